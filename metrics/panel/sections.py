"""A panel's answers as the text of one reply: a section per seat (its seat, model, call id,
status and answer or why it has none), the tokens of several seats added up, and the hint that
says how to give a verdict. The reply in ``all`` mode, the CLI's ``ask`` and a stream's
sections share it."""

from __future__ import annotations

from panelist.metrics.seats import SeatResult


def tokens_of(seats: list[SeatResult]) -> dict:
    """The tokens of ``seats`` added up, in OpenAI's ``usage`` shape."""
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for r in seats:
        for mine, theirs in (("prompt_tokens", "prompt"), ("completion_tokens", "completion"),
                             ("total_tokens", "total")):
            usage[mine] += (r.tokens or {}).get(theirs) or 0
    return usage


def verdict_hint(url: str | None) -> str:
    cli = "panelist verdict <call> --useful|--not-useful [--note TEXT]"
    if url:
        return (f'POST {url}/bench/verdict {{"call": "<call>", "useful": true|false, '
                f'"note": "...", "real": [...], "false": [...]}} or {cli}')
    return cli


def section(r: SeatResult, n: int) -> str:
    head = (f"## Seat {n}: {r.seat} · {r.alias}\n\n"
            f"call `{r.call}` · {r.status} · {r.seconds:.2f} s\n\n")
    if r.answered:
        text = r.answer.strip()
        calls = "\n".join(f"- tool call `{c['function']['name']}` "
                          f"`{c['function']['arguments']}`" for c in r.tool_calls)
        return head + "\n\n".join(p for p in (text, calls) if p) + "\n"
    return head + f"> {r.status}: {r.reason or 'no answer'}\n"


def markdown(seats: list[SeatResult]) -> str:
    return "\n".join(section(r, i) for i, r in enumerate(seats, 1))


def markdown_of(seats: list[dict]) -> str:
    """``markdown`` of seats given as their public dicts (as an error body carries them)."""
    names = set(SeatResult.__dataclass_fields__)
    return markdown([SeatResult(**dict({k: v for k, v in s.items() if k in names}, served=""))
                     for s in seats if isinstance(s, dict)])
