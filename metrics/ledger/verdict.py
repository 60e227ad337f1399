"""A verdict: the caller's judgement of one call, checked against the real work.

Shape: ``{"call": str, "useful": bool, "note": str, "real": [str], "false": [str]}``; ``real``
and ``false`` name the claims the caller confirmed or refuted. Instead of ``call``, a caller
that holds only the panel id (a merged or picked reply, the ``X-Panelist-Panel`` header) sends
``"panel"`` and ``"alias"`` (the model, or ``merger``); ``call_of`` resolves them to the call id
through the ledger. The ledger keeps the last verdict per call; sending the same one again
writes nothing.

Bounds: a verdict is written again on every change, so its size is capped: the note at MAX_NOTE
characters, each claim at MAX_CLAIM, the claims together at MAX_CLAIMS_TOTAL characters and
MAX_CLAIMS entries. Notes and claims are plain text (no control characters but tab and newline
in a note); a lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest
from panelist.metrics.store.jsonwire import clean
from panelist.metrics.plaintext import first_control

OWED_FIELDS = ("call", "panel", "alias", "seat", "collection", "shape", "seconds", "ts")
MAX_NOTE = 4000
MAX_CLAIMS = 50
MAX_CLAIM = 500
MAX_CLAIMS_TOTAL = 4000
MAX_CALL = 200  # far above any call id we hand out (p20250101-123456789.explorer12)


def _target(body: dict) -> dict:
    """``{"call"}``, or ``{"call": None, "panel", "alias"}``: what the verdict is about."""
    call, panel, alias = body.get("call"), body.get("panel"), body.get("alias")
    if panel is None and alias is None:
        if not isinstance(call, str) or not call.strip() or len(call) > MAX_CALL:
            raise BadRequest(
                "'call' must be the call id of a seat (from bench.seats[].call); "
                "or send 'panel' (bench.panel, or the X-Panelist-Panel header) "
                "and 'alias' (the model, or 'merger') instead",
                param="call",
            )
        return {"call": clean(call.strip())}
    if call is not None:
        raise BadRequest("send either 'call', or 'panel' and 'alias', not both", param="call")
    if not isinstance(panel, str) or not panel.strip() or len(panel) > MAX_CALL:
        raise BadRequest(
            "'panel' must be a panel id (bench.panel in a reply, or the "
            "X-Panelist-Panel header), sent with 'alias'",
            param="panel",
        )
    if not isinstance(alias, str) or not alias.strip() or len(alias) > MAX_CALL:
        raise BadRequest(
            "'alias' must name the model whose answer you judge (a seat's alias, "
            "or 'merger' for the merged answer), sent with 'panel'",
            param="alias",
        )
    return {"call": None, "panel": clean(panel.strip()), "alias": clean(alias.strip())}


def call_of(v: dict, ledger, *, key: str | None = None) -> str:
    """The call id a checked verdict is about (looked up by panel and alias if so sent; with
    ``key``, only that gateway key's panels are found)."""
    return v["call"] or ledger.panel_call(v["panel"], v["alias"], key=key)


def check(body) -> dict:
    if not isinstance(body, dict):
        raise BadRequest(
            'the body must be a JSON object: {"call": "<call id>", "useful": true} '
            'or {"panel": "<panel id>", "alias": "<model>", "useful": true}'
        )
    target = _target(body)
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
        raise BadRequest(
            f"'note' holds a control character ({bad}); send plain text (line "
            "breaks and tabs are fine)",
            param="note",
        )
    claims = {}
    total = 0
    for name in ("real", "false"):
        value = body.get(name, [])
        if value is None:
            value = []
        if (
            not isinstance(value, list)
            or not all(isinstance(v, str) for v in value)
            or len(value) > MAX_CLAIMS
        ):
            raise BadRequest(
                f"'{name}' must be a list of at most {MAX_CLAIMS} strings "
                "(the claims you found real or false)",
                param=name,
            )
        for i, v in enumerate(value):
            if len(v) > MAX_CLAIM:
                raise BadRequest(
                    f"{name}[{i}] is {len(v)} characters; a claim is at most "
                    f"{MAX_CLAIM} characters (quote the claim, not the evidence; "
                    "put more in 'note')",
                    param=f"{name}[{i}]",
                )
            if bad := first_control(v):
                raise BadRequest(
                    f"{name}[{i}] holds a control character ({bad}); send each "
                    "claim as one line of plain text",
                    param=f"{name}[{i}]",
                )
            total += len(v)
        claims[name] = [clean(v) for v in value if v.strip()]
    if total > MAX_CLAIMS_TOTAL:
        raise BadRequest(
            f"'real' and 'false' hold {total} characters together; the limit is "
            f"{MAX_CLAIMS_TOTAL} (each claim at most {MAX_CLAIM}); name the claims "
            f"briefly and put the rest in 'note' (up to {MAX_NOTE})",
            param="real",
        )
    unknown = sorted(set(body) - {"call", "panel", "alias", "useful", "note", "real", "false"})
    if unknown:
        raise BadRequest(
            f"unknown field(s) {', '.join(unknown)}; a verdict has call (or panel "
            "and alias), useful, note, real and false",
            param=unknown[0],
        )
    return {**target, "useful": useful, "note": note.strip(), **claims}


def owed(seat: dict) -> dict:
    """What a caller needs to know of a call that awaits its verdict; ``seat`` is the seat it
    sat in (member, explorer, nominee, merger), which a seat line names its ``role``."""
    out = {k: seat.get(k) for k in OWED_FIELDS}
    if out["seat"] is None:
        out["seat"] = seat.get("role")
    return out


def not_owed(panel: dict) -> dict:
    """A panel whose reply never reached the caller (``Ledger.undelivered``), as the pending
    list shows it apart: ``{"panel", "reason", "calls": [owed-shaped calls]}``."""
    return {
        "panel": panel["panel"],
        "reason": panel["reason"],
        "calls": [owed(seat) for seat in panel["calls"]],
    }
