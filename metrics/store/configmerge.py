"""Three-way merges of JSON documents: two edits of one base, combined where they do not touch
the same value.

``merge(base, ours, theirs)`` walks the documents as nested objects. At each key: a side that
left the base's value as it was takes the other side's; two sides that made the same change
agree; two objects changed on both sides are merged key by key; anything else is a ``Clash``
at that key's path. A key one side removed and the other left alone is removed. Lists and
scalars are whole values: two different edits of one list clash.

``distance(a, b)`` counts the values two documents differ in (to tell which of several versions
an edit was most likely made from).

Invariants: the result holds every change either side made, or the merge raises; neither input
is changed; ``merge(b, x, b) == x`` and ``merge(b, b, x) == x``.
"""

from __future__ import annotations

ABSENT = object()  # a key a document does not have


class Clash(Exception):
    """Raised when both sides changed one value differently; ``path`` names it."""

    def __init__(self, path: tuple[str, ...]):
        super().__init__("/".join(path) or "(the whole document)")
        self.path = path


def merge(base, ours, theirs, path: tuple[str, ...] = ()):
    """The document holding both edits of ``base``; ``ABSENT`` where both removed a key."""
    if ours == theirs:
        return ours
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    if isinstance(ours, dict) and isinstance(theirs, dict):
        below = base if isinstance(base, dict) else {}
        out = {}
        for key in dict.fromkeys([*theirs, *ours]):
            value = merge(
                below.get(key, ABSENT),
                ours.get(key, ABSENT),
                theirs.get(key, ABSENT),
                path + (str(key),),
            )
            if value is not ABSENT:
                out[key] = value
        return out
    raise Clash(path)


def distance(a, b) -> int:
    """How many values two documents differ in: objects compared key by key, anything else
    (a list, a scalar, a key one lacks) counting one."""
    if a == b:
        return 0
    if isinstance(a, dict) and isinstance(b, dict):
        return sum(distance(a.get(k, ABSENT), b.get(k, ABSENT)) for k in {*a, *b})
    return 1
