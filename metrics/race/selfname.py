"""When a run names itself: its own alias, served id, family or vendor, said of itself.

A race voids a run's judgement when the run names itself (``jury``); masking alone
(``race.blind``) keeps every other name from the judge. This module decides the first, on the
*unmasked* text, from the names ``blind`` found in it and the run's own names (``Own``,
``blind.own_of``).

The rule, meant to void self-identification and nothing else:

* Only the run's *own* names count: its alias, served id and the id's parts, family, vendor
  (the id's vendor part, or the maker of a well-known name among them: ``gpt-4o`` is
  OpenAI's), and that vendor's well-known models ("I'm ChatGPT" from ``gpt-4o``). A run that
  writes about other models, even "I'm Claude", names nobody it is: it is masked, not voided.
* The own name must stand where a text says who its writer is or who made it: "I'm X",
  "I am an X model", "my name is X", "call me X", "As X, I …", "As an X model, I …", "X here",
  "This is X speaking", "I was trained by X", "I'm a language model developed by X", "As a
  model made by X, I …", "my creators at X", "I'm based on X", "you're chatting with X", "X
  trained me", "I'm from X", "my underlying model is X". A
  third-person mention of its own model ("GPT-4o's main advantage is …" written by
  ``gpt-4o``) is masked and not voided: it is how an answer about models reads, and the judge
  never sees the name.
* An own name that is a plain word (``careful``, ``swift``, ``sonnet``, a vendor such as
  ``aurora``: one word of letters that is not a well-known model or vendor) names the run only
  written as a name, capitalised, and never after an article ("I'm Swift" does; "I'm swift to
  answer", "I am a careful reviewer" and "This is a careful review" do not). A name the task
  uses never voids (``blind.Masker`` leaves it out of the hits).
* Each place is evidence a person can check (``evidence``): the name as the roster or the
  table spells it, which of the run's names it is, how it read once folded, the characters
  actually written (invisible ones shown as ``\\u200b``), their disguises (``normal.forms``) and
  an excerpt of the original text around them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from panelist.metrics.race.normal import fold, forms

if TYPE_CHECKING:  # blind imports this module
    from panelist.metrics.race.blind import Hit

SELF, WORD, OTHER = "[self]", "[selfword]", "[model]"

_S = r"\[self\]"  # an own name that is a name whatever its context
_SW = r"\[(?:self|selfword)\]"  # ... or a plain-word own name written as a name
_END = r"(?!['’]s\b|-)"  # not "[self]'s advantage", not "[self]-based"
_AI = r"(?:AI|A\.I\.|(?:large\s+)?language\s+model|LLM|chat\s?bot|assistant|model)"
_MADE = (
    r"(?:made|created|built|developed|trained|designed|engineered|programmed|released|"
    r"owned|operated|fine-?tuned|powered)"
)
_MARKUP = re.compile(r"[*`~]+|(?<!\w)_+|_+(?!\w)")  # emphasis and code marks around a name
_START = r"(?:^|(?<=[.!?])\s+|\n\s*)"
_PATTERNS = [
    re.compile(p, re.I)
    for p in (
        # "I'm X", "my name is X", "you're chatting with X"; "I'm an X model"
        rf"(?:\bI\s+am|\bI['’]m|\bmy\s+name\s+is|\bcall\s+me|\bI\s+go\s+by|"
        rf"\byou(?:['’]re|\s+are)\s+(?:talking|chatting|speaking)\s+(?:to|with))\s+"
        rf"(?:(?:an?|the)\s+{_S}\s+{_AI}\b|(?:called\s+|named\s+|actually\s+)?{_SW}{_END})",
        # "As X, I", "As an X model, I"
        rf"{_START}as\s+(?:(?:an?|the)\s+{_S}\s+{_AI}|{_SW}(?:\s+{_AI})?)\s*,\s*I\b",
        # "I was trained by X"
        rf"\bI\s+(?:was|have\s+been|am|['’]m|were)\s+(?:\w+\s+){{0,2}}?{_MADE}\s+(?:by|at)\s+"
        rf"(?:the\s+\w+\s+at\s+)?{_SW}",
        # "I'm a large language model trained by X"
        rf"(?:\bI\s+am|\bI['’]m)\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+){{0,3}}?{_AI}\b[^.!?\n]{{0,40}}?"
        rf"\b{_MADE}\s+(?:by|at)\s+(?:the\s+\w+\s+at\s+)?{_SW}",
        # "I'm Y, made by X", "I'm Y, an assistant built by X"
        rf"(?:\bI\s+am|\bI['’]m)\s+\[\w+\]\s*,\s*(?:an?\s+(?:[\w-]+\s+){{0,3}}?{_AI}\s+)?{_MADE}"
        rf"\s+(?:by|at)\s+{_SW}",
        # "As a model made by X, I …" (not "As a model made by X, Y refuses …": that is Y)
        rf"\bas\s+an?\s+(?:[\w-]+\s+){{0,2}}?{_AI}\b[^.!?\n]{{0,40}}?\b{_MADE}\s+by\s+{_SW}"
        rf"(?:\s+[\w-]+){{0,3}}?\s*,\s*(?:I|I['’]m|I['’]ve|my|me)\b",
        # "my creators at X"
        rf"\bmy\s+(?:creators?|makers?|developers?|trainers?|parent\s+company)\s*(?:,|:|at|is|are)?"
        rf"\s*{_SW}",
        # "X here", "Hi, X here"
        rf"{_START}(?:(?:hi|hello|hey)\b[,!]?\s*)?{_SW}\s+here\b"
        r"(?!\s+(?:is|are|was|refers|means|stands|denotes|shows|wins|does)\b)",
        # "This is X speaking", "This is X, your assistant"
        rf"\bthis\s+is\s+{_SW}(?:\s+(?:speaking|here)\b|\s*,\s*(?:your|an?)\s+(?:[\w-]+\s+){{0,2}}?"
        rf"{_AI}\b)",
        # "I'm based on X", "I'm a version of X"
        rf"(?:\bI\s+am|\bI['’]m)\s+(?:based\s+on|built\s+on|powered\s+by|running\s+on|"
        rf"an?\s+version\s+of|an?\s+instance\s+of|an?\s+variant\s+of|one\s+of)\s+{_SW}",
        # "OpenAI trained me", "I'm from X", "my underlying model is X"
        rf"{_SW}\s+(?:has\s+|have\s+|originally\s+)?(?:created|built|developed|trained|designed|"
        rf"programmed|fine-?tuned)\s+me\b",  # not "made me": "X made me rethink" is an idiom
        rf"(?:\bI\s+am|\bI['’]m|\bI\s+come)\s+from\s+{_SW}",
        rf"\bmy\s+(?:underlying\s+|base\s+)?model(?:['’]s\s+name)?\s+is\s+(?:called\s+)?{_SW}",
        # a sign-off: "Regards, X"
        rf"\b(?:regards|sincerely|cheers|yours)\s*,\s*{_SW}\s*$",
    )
]


@dataclass(frozen=True)
class Own:
    """A run's own names: ``kinds`` maps each name's letters (``blind.flat``) to which of its
    names it is (alias, served id, family, vendor, its vendor's model); ``shown`` to the name
    as given; ``plain`` holds those that are plain words."""

    alias: str
    kinds: dict
    shown: dict
    plain: frozenset


def shown(text: str) -> str:
    """``text`` as a person can read it: invisible characters and marks spelt as escapes."""
    out = []
    for c in text:
        if c == "\n":
            out.append("\\n")
        elif c.isprintable() and unicodedata.category(c) not in ("Cf", "Mn", "Me") or c == " ":
            out.append(c)
        else:
            out.append(f"\\u{ord(c):04x}")
    return "".join(out)


def _excerpt(text: str, start: int, end: int, reach: int = 40) -> str:
    a, b = max(0, start - reach), min(len(text), end + reach)
    head, tail = text[a:start], text[end:b]
    if a > 0 and " " in head:
        head = head.split(" ", 1)[1]
    if b < len(text) and " " in tail:
        tail = tail.rsplit(" ", 1)[0]
    return shown(" ".join((head + text[start:end] + tail).split(" ")))[:240]


def _flat(k: tuple) -> str:
    return "".join(k)


def evidence(text: str, hits: list[Hit], own: Own, names_shown: dict | None = None) -> list[dict]:
    """Where ``text`` names its writer ``own`` (``hits``: ``blind.Hit`` of every name in it):
    ``{"name", "as", "read", "written", "forms", "excerpt"}`` per place."""
    if not any(_flat(h.key) in own.kinds for h in hits):
        return []
    marked: list[str] = []  # the text with each name as a placeholder
    places: list[tuple[int, int, Hit | None, int, int]] = []
    at = 0
    length = 0
    for group in _groups(hits):
        start, end = group[0].start, max(h.end for h in group)
        if start < at:
            continue
        seg = _MARKUP.sub("", fold(text[at:start]).text)
        marked.append(seg)
        length += len(seg)
        mark, hit = _mark(text, group, own)
        marked.append(mark)
        places.append((length, length + len(mark), hit, start, end))
        length += len(mark)
        at = end
    marked.append(_MARKUP.sub("", fold(text[at:]).text))
    reading = "".join(marked)
    found: dict[tuple, dict] = {}
    for pattern in _PATTERNS:
        for m in pattern.finditer(reading):
            for a, b, hit, start, end in places:
                if hit is None or not (m.start() <= a and b <= m.end()):
                    continue
                f = _flat(hit.key)
                written = text[start:end]
                found.setdefault(
                    (start, end),
                    {
                        "name": own.shown.get(f) or (names_shown or {}).get(f) or f,
                        "as": own.kinds[f],
                        "read": hit.read,
                        "written": shown(written),
                        "forms": (["base64"] if hit.base64 else []) + forms(written, hit.read),
                        "excerpt": _excerpt(text, start, end),
                    },
                )
    return [found[k] for k in sorted(found)]


def _groups(hits: list) -> list[list]:
    groups: list[list] = []
    for h in hits:
        if groups and h.start < max(x.end for x in groups[-1]):
            groups[-1].append(h)
        else:
            groups.append([h])
    return groups


def _mark(text: str, group: list[Hit], own: Own) -> tuple[str, Hit | None]:
    """The placeholder for names overlapping in one place, and the own name among them."""
    for h in group:
        f = _flat(h.key)
        if f not in own.kinds:
            continue
        if f not in own.plain:
            return SELF, h
        first = next((c for c in h.read if c.isalnum()), "")
        if first.isupper():
            return WORD, h
    return OTHER, None


def said(e: dict) -> str:
    """One piece of evidence in words, for the row's reason."""
    how = f" ({', '.join(e['forms'])})" if e["forms"] else ""
    return f"{e['name']} (its {e['as']}) written “{e['written']}”{how}: “{e['excerpt']}”"
