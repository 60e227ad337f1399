"""Free text people give us (descriptions, tags, verdict notes and claims) that is later printed to
a terminal or shown on a page, and text we shorten to show it (``clip``, ``shorten``).

Invariants: such text holds no control character (C0, DEL, C1) and no bidirectional override, so
``collection list`` cannot be made to move the cursor, recolour or hide a line, and a note cannot
reorder what a reviewer reads. A verdict note may keep line breaks and tabs. Shortened text is
never cut inside a word (unless one word alone is longer than the room), and says where it was
cut with "…"; ``shorten`` keeps a message's last clause, the part that says what to do, whole.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
# where a sentence (or a clause of one of our messages) ends: a cut there leaves whole thoughts
_SENTENCE_END = re.compile(r"[.;!?](?= )")

# C0 controls, DEL, C1 controls, and the bidi embeddings/overrides/isolates (Trojan Source)
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_FORBIDDEN_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def first_control(text: str, *, lines: bool = False) -> str | None:
    """The first forbidden character of ``text`` as ``U+XXXX``, or None when there is none.
    ``lines`` allows tab and line feed (multi-line notes)."""
    found = (_FORBIDDEN_BUT_LINES if lines else _FORBIDDEN).search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def visible(text: str) -> str:
    """``text`` safe to print: each forbidden character shown as an escape (``\\x1b``), for
    values written before these rules or by hand into a config file."""
    return _FORBIDDEN.sub(lambda m: repr(m.group())[1:-1], text)


def clip(text: str, limit: int) -> str:
    """``text``, whitespace folded, in at most ``limit`` characters: whole when it fits, else cut
    after its last sentence that fits (when that keeps at least half the room) or else at its
    last whole word, then "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    room = max(limit - 1, 0)  # the ellipsis takes one
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, room - 1)]
    if ends and ends[-1] >= room // 2:
        return text[: ends[-1]] + " " + ELLIPSIS
    return _words(text, room) + ELLIPSIS


def shorten(text: str, limit: int) -> str:
    """``text`` (one of our messages, ``what happened; what to do``), whitespace folded, in at
    most ``limit`` characters: the clause after its last "; " stays whole and what comes before
    is cut at a word, marked "…". Without a last clause, or without room for it beside a
    quarter of the limit, it is ``clip``'d."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head, sep, advice = text.rpartition("; ")
    room = limit - len(sep) - len(advice) - 1
    if not sep or room < limit // 4:
        return clip(text, limit)
    return _words(head, room) + ELLIPSIS + sep + advice


def _words(text: str, room: int) -> str:
    """The longest start of ``text`` of at most ``room`` characters that ends at a word's end
    (a single word longer than the room is cut in it: there is nothing else to cut at)."""
    if len(text) <= room:
        return text
    cut = text[:room]
    if text[room] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,:;-")
