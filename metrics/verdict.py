"""A verdict: the caller's judgement of one call, checked against the real work.

Shape: ``{"call": str, "useful": bool, "note": str, "real": [str], "false": [str]}``; ``real``
and ``false`` name the claims the caller confirmed or refuted. The ledger keeps the last verdict
per call; sending the same one again writes nothing.

Bounds: a verdict is written again on every change, so its size is capped: the note at MAX_NOTE
characters, each claim at MAX_CLAIM, the claims together at MAX_CLAIMS_TOTAL characters and
MAX_CLAIMS entries. Notes and claims are plain text (no control characters but tab and newline
in a note); a lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest
from panelist.metrics.jsonwire import clean
from panelist.metrics.plaintext import first_control

OWED_FIELDS = ("call", "panel", "alias", "seat", "collection", "shape", "seconds", "ts")
MAX_NOTE = 4000
MAX_CLAIMS = 50
MAX_CLAIM = 500
MAX_CLAIMS_TOTAL = 4000
MAX_CALL = 200   # far above any call id we hand out (p20250101-123456789.explorer12)


def check(body) -> dict:
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object: {"call": "<call id>", "useful": true}')
    call = body.get("call")
    if not isinstance(call, str) or not call.strip() or len(call) > MAX_CALL:
        raise BadRequest("'call' must be the call id of a seat (from bench.seats[].call)",
                         param="call")
    useful = body.get("useful")
    if not isinstance(useful, bool):
        raise BadRequest("'useful' must be true or false", param="useful")
    note = body.get("note", "")
    if note is None:
        note = ""
    if not isinstance(note, str) or len(note) > MAX_NOTE:
        raise BadRequest(f"'note' must be text of at most {MAX_NOTE} characters", param="note")
    note = clean(note).replace("\r\n", "\n")
    if bad := first_control(note, lines=True):
        raise BadRequest(f"'note' holds a control character ({bad}); send plain text (line "
                         "breaks and tabs are fine)", param="note")
    claims = {}
    total = 0
    for name in ("real", "false"):
        value = body.get(name, [])
        if value is None:
            value = []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value) \
                or len(value) > MAX_CLAIMS:
            raise BadRequest(f"'{name}' must be a list of at most {MAX_CLAIMS} strings "
                             "(the claims you found real or false)", param=name)
        for i, v in enumerate(value):
            if len(v) > MAX_CLAIM:
                raise BadRequest(f"{name}[{i}] is {len(v)} characters; a claim is at most "
                                 f"{MAX_CLAIM} characters (quote the claim, not the evidence; "
                                 "put more in 'note')", param=f"{name}[{i}]")
            if bad := first_control(v):
                raise BadRequest(f"{name}[{i}] holds a control character ({bad}); send each "
                                 "claim as one line of plain text", param=f"{name}[{i}]")
            total += len(v)
        claims[name] = [clean(v) for v in value if v.strip()]
    if total > MAX_CLAIMS_TOTAL:
        raise BadRequest(f"'real' and 'false' hold {total} characters together; the limit is "
                         f"{MAX_CLAIMS_TOTAL} (each claim at most {MAX_CLAIM}); name the claims "
                         f"briefly and put the rest in 'note' (up to {MAX_NOTE})", param="real")
    unknown = sorted(set(body) - {"call", "useful", "note", "real", "false"})
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)}; a verdict has call, useful, "
                         "note, real and false", param=unknown[0])
    return {"call": clean(call.strip()), "useful": useful, "note": note.strip(), **claims}


def owed(seat: dict) -> dict:
    """What a caller needs to know of a call that awaits its verdict."""
    return {k: seat.get(k) for k in OWED_FIELDS}
