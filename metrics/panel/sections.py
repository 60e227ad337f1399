"""A panel's seats as a reply shows them: each seat's public fields (``public``), its section of
the text (its seat, model, call id, status and answer or why it has none), and the hint that says
how to give a verdict. The reply in ``all`` mode, the CLI's ``ask`` and a stream's sections share
it."""

from __future__ import annotations

from panelist.metrics.seats import SeatResult


def public(r: SeatResult) -> dict:
    """A seat as the panel shows it (``bench.seats``, ``calls.jsonl``, an error's seats): its
    error as one line, ``kind: message``; ``tool_calls`` only when it made some, ``clamped``
    only when its output budget was lowered."""
    out = {
        "call": r.call,
        "seat": r.seat,
        "alias": r.alias,
        "status": r.status,
        "seconds": r.seconds,
        "answer": r.answer,
        "error": r.reason,
        "tokens": r.tokens,
        "tool_calls": r.tool_calls,
        "finish_reason": r.finish_reason,
    }
    if not r.tool_calls:  # a plain answer's record stays as it always was
        del out["tool_calls"]
    if r.clamped:  # the caller's budget was lowered for this seat: the caller is told
        out["clamped"] = r.clamped
    return out


def verdict_hint(url: str | None) -> str:
    cli = "panelist verdict <call> --useful|--not-useful [--note TEXT]"
    if url:
        return (
            f'POST {url}/bench/verdict {{"call": "<call>", "useful": true|false, '
            f'"note": "...", "real": [...], "false": [...]}} or {cli}'
        )
    return cli


def section(r: SeatResult, n: int) -> str:
    head = (
        f"## Seat {n}: {r.seat} · {r.alias}\n\ncall `{r.call}` · {r.status} · {r.seconds:.2f} s\n\n"
    )
    if r.answered:
        text = r.answer.strip()
        calls = "\n".join(
            f"- tool call `{c['function']['name']}` `{c['function']['arguments']}`"
            for c in r.tool_calls
        )
        return head + "\n\n".join(p for p in (text, calls) if p) + "\n"
    return head + f"> {r.status}: {r.reason or 'no answer'}\n"


def markdown(seats: list[SeatResult]) -> str:
    return "\n".join(section(r, i) for i, r in enumerate(seats, 1))


def markdown_of(seats: list[dict]) -> str:
    """``markdown`` of seats given as their public dicts (as an error body carries them)."""
    names = set(SeatResult.__dataclass_fields__)
    return markdown(
        [
            SeatResult(**dict({k: v for k, v in s.items() if k in names}, served=""))
            for s in seats
            if isinstance(s, dict)
        ]
    )
