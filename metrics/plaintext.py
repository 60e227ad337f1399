"""Free text people give us (descriptions, tags, verdict notes and claims) that is later printed to
a terminal or shown on a page.

Invariant: such text holds no control character (C0, DEL, C1) and no bidirectional override, so
``collection list`` cannot be made to move the cursor, recolour or hide a line, and a note cannot
reorder what a reviewer reads. A verdict note may keep line breaks and tabs.
"""

from __future__ import annotations

import re

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
