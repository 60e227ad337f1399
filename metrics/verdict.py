"""A verdict: the caller's judgement of one call, checked against the real work.

Shape: ``{"call": str, "useful": bool, "note": str, "real": [str], "false": [str]}``; ``real``
and ``false`` name the claims the caller confirmed or refuted. The ledger keeps the last verdict
per call; sending the same one again writes nothing.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest

OWED_FIELDS = ("call", "panel", "alias", "seat", "collection", "shape", "seconds", "ts")
MAX_NOTE = 4000
MAX_CLAIMS = 50


def check(body) -> dict:
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object: {"call": "<call id>", "useful": true}')
    call = body.get("call")
    if not isinstance(call, str) or not call.strip():
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
    claims = {}
    for name in ("real", "false"):
        value = body.get(name, [])
        if value is None:
            value = []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value) \
                or len(value) > MAX_CLAIMS:
            raise BadRequest(f"'{name}' must be a list of at most {MAX_CLAIMS} strings "
                             "(the claims you found real or false)", param=name)
        claims[name] = [v for v in value if v.strip()]
    unknown = sorted(set(body) - {"call", "useful", "note", "real", "false"})
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)}; a verdict has call, useful, "
                         "note, real and false", param=unknown[0])
    return {"call": call.strip(), "useful": useful, "note": note.strip(), **claims}


def owed(seat: dict) -> dict:
    """What a caller needs to know of a call that awaits its verdict."""
    return {k: seat.get(k) for k in OWED_FIELDS}
