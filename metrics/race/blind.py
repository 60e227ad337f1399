"""What a race's judge reads of a run: every name a model could be known by masked, and the
runs that name themselves all the same found out.

Invariants:

* Only what models wrote is masked: their answers, the arguments of their tool calls, what the
  tools returned (a tool can echo an argument), the job's output, and the assistant messages a
  job sent back. What the job itself sent, the task and the rubric are never masked, and a name
  the task uses is masked nowhere: it is a word of the task ("Give a swift answer" beside a
  model of family ``swift``).
* A name is matched case-insensitively on word boundaries, whatever joins its parts (``GPT-4o``,
  ``gpt4o``, ``GPT 4o``). The whole token it stands in is masked (``zeta-mini-v2``,
  ``https://www.anthropic.com/news``), with the version and tier words after it ("Claude 3.5
  Sonnet" is one ``[model]``). Placeholders: ``[model]``, ``[vendor]``, ``[endpoint]``, and
  ``[link]`` for an address that names a model or a vendor.
* The names (``Names.of``): every roster model's alias, served id, the served id's vendor and
  model parts, family; every endpoint's name, URL and host; every served id the catalog lists;
  the built-in table of well-known names (``race.names``).
* Text a model wrote is NFKC-normalised and stripped of format characters (zero-width spaces)
  before it is masked, so "Ｃｌａｕｄｅ" and "Cl\\u200baude" are masked as "Claude" is.
* ``names_itself`` finds a run saying who it is or who made it, masked or not ("I'm [model]",
  "As [model], I…", "an AI model made by [vendor]", "I am Zorblax-7"). Such a run is never
  scored: the race voids its judgement and says why (``Seen.names_itself``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable

from panelist.metrics.race import names as builtin
from panelist.metrics.race.names import ENDPOINT, MODEL, VENDOR
from panelist.metrics.roster.roster import Endpoint, Model

PLACEHOLDER = {MODEL: "[model]", VENDOR: "[vendor]", ENDPOINT: "[endpoint]"}
LINK = "[link]"
_RANK = {ENDPOINT: 0, MODEL: 1, VENDOR: 2}   # which placeholder a token naming several takes

_WORD = re.compile(r"[^\W\d_]+|\d+")
_JOINERS = "._:/@+~%=&?#-"                   # what joins a name's parts inside one token
_EDGE = "._:/@~%=&?#-"                       # what a token does not end on ("R+" keeps its +)
_URL = re.compile(r"[a-z][a-z0-9+.-]*://|^www\.|^(?:[\w-]+\.)+[a-z]{2,}(?:[/:?#]|$)", re.I)
_TAIL = re.compile(r"(?:[ \t]?-?(?:[a-z]?\d+(?:\.\d+)*(?:[a-z]{1,2})?|\d+x\d+[a-z]|"
                   + "|".join(sorted(builtin.TIERS)) + r")(?!\w))+", re.I)


def normal(text: str) -> str:
    """``text`` as masking reads it: NFKC, without format characters (zero-width and the like)."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def key(text: str) -> tuple[str, ...]:
    """A name's words, casefolded; letters and digits are words of their own (``gpt4o`` is
    ``gpt``, ``4``, ``o``), so whatever joins them is one name."""
    return tuple(w.casefold() for w in _WORD.findall(normal(text)))


def _joined(text: str, end: int, start: int) -> bool:
    """Whether the words ending at ``end`` and starting at ``start`` are parts of one name:
    nothing between them, one space, or up to three joiners (``://``)."""
    gap = text[end:start]
    return gap == "" or gap in (" ", "\t") or (len(gap) <= 3 and all(c in _JOINERS for c in gap))


def _in_token(c: str) -> bool:
    return c.isalnum() or c == "_" or c in _JOINERS


@dataclass(frozen=True)
class _Name:
    what: str                         # MODEL, VENDOR or ENDPOINT
    after: frozenset | None = None    # a contextual name's next words; None: always a name


class Names:
    """The names a race masks, by ``key``."""

    def __init__(self):
        self._names: dict[tuple, _Name] = {}
        self._reach: dict[str, int] = {}   # a first word -> the most words a name of it has

    @classmethod
    def of(cls, models: Iterable[Model], endpoints: Iterable[Endpoint],
           served: Iterable[str] = ()) -> "Names":
        """The built-in table, then every endpoint's, model's and listed served id's names."""
        names = cls()
        for word in builtin.MODELS:
            names.add(word, MODEL)
        for word in (*builtin.VENDORS, *builtin.DOMAINS):
            names.add(word, VENDOR)
        for word, (what, after) in builtin.CONTEXTUAL.items():
            names.add(word, what, frozenset(after))
        for ep in endpoints:
            host = re.sub(r"^[a-z][a-z0-9+.-]*://", "", ep.base_url, flags=re.I).split("/")[0]
            for name in (ep.name, ep.base_url, host, host.rsplit(":", 1)[0]):
                names.add(name, ENDPOINT)
        for m in models:
            names.add_served(m.served)
            names.add(m.alias, MODEL)
            names.add(m.family, MODEL)
        for s in served:
            names.add_served(s)
        return names

    def add(self, text: str, what: str, after: frozenset | None = None) -> None:
        k = key(text or "")
        if not k or (len(k) == 1 and len(k[0]) < 2) or \
                (len(k) < 3 and not any(w[0].isalpha() for w in k)):
            return   # a lone letter or a bare number names nothing
        old = self._names.get(k)
        if old is not None and (old.after is None and after is not None or
                                old.after == after and _RANK[old.what] <= _RANK[what]):
            return   # an always-name beats a contextual one; then a model beats an endpoint
        self._names[k] = _Name(what, after)
        self._reach[k[0]] = max(self._reach.get(k[0], 0), len(k))

    def add_served(self, served: str) -> None:
        """A served id (``vendor/name-x-v2``), its vendor parts, its model part, and each run of
        two or more of the model part's words with one that is no version or tier (``name-x``,
        ``x-mini-v2``, never ``mini-v2``): the forms a model names itself by."""
        self.add(served, MODEL)
        parts = [p for p in re.split(r"[/@]", served) if p]
        for vendor in parts[:-1]:
            self.add(vendor, VENDOR)
        if not parts:
            return
        last = parts[-1]
        self.add(last, MODEL)
        self.add(last.split(":")[0], MODEL)   # "llama3:8b", as local servers tag sizes
        words = [w for w in re.split(r"[-_.: ]+", last) if w]
        for a in range(len(words)):   # "name-x", "x-mini-v2": runs of two words or more
            for b in range(a + 2, len(words) + 1):
                if (a, b) != (0, len(words)) and any(
                        not any(c.isdigit() for c in w) and w.casefold() not in builtin.TIERS
                        for w in words[a:b]):
                    self.add("-".join(words[a:b]), MODEL)

    def _plain(self, word: str) -> bool:
        name = self._names.get((word,))
        return name is not None and name.after is None

    def spans(self, text: str, exempt: frozenset = frozenset()) -> list[tuple]:
        """``(start, end, what, key)`` of every name in ``text`` (not those in ``exempt``),
        each span grown to the token it stands in and the versions after it."""
        words = [(m.start(), m.end(), m.group().casefold()) for m in _WORD.finditer(text)]
        found: list[tuple] = []
        i, n = 0, len(words)
        while i < n:
            start, _, first = words[i]
            reach = self._reach.get(first)
            if not reach or (start and text[start - 1].isalnum()):
                i += 1
                continue
            hit = None
            for size in range(min(reach, n - i), 0, -1):
                k = tuple(w[2] for w in words[i:i + size])
                name = self._names.get(k)
                if name is not None and all(_joined(text, words[j][1], words[j + 1][0])
                                            for j in range(i, i + size - 1)):
                    hit = size, k, name
                    break
            if hit is None:
                i += 1
                continue
            size, k, name = hit
            span = (start, words[i + size - 1][1])
            if name.after is not None:
                span = self._context(text, words, i, size, name, found)
                if span is None:
                    i += 1
                    continue
            if k not in exempt or self._versioned(text, *span):
                found.append((*self._grown(text, *span), name.what, k))
            i += size
        return found

    @staticmethod
    def _versioned(text: str, start: int, end: int) -> bool:
        """Whether the token a name stands in gives it a version or a tier (``swift-mini-v2``,
        ``swift-2``): then it names a model, even where the task uses the word."""
        a, b = start, end
        while a > 0 and _in_token(text[a - 1]):
            a -= 1
        while b < len(text) and _in_token(text[b]):
            b += 1
        rest = _WORD.findall(text[a:start] + " " + text[end:b])
        return any(w.isdigit() or w.casefold() in builtin.TIERS for w in rest)

    def _context(self, text, words, i, size, name, found) -> tuple[int, int] | None:
        """Where a contextual name stands as a name (see ``race.names``), or None."""
        j = i + size
        start, end = words[i][0], words[j - 1][1]
        nxt = words[j] if j < len(words) and _joined(text, words[j - 1][1], words[j][0]) \
            else None
        prev = words[i - 1] if i and _joined(text, words[i - 1][1], start) else None
        if nxt is None and text[end:end + 3] in ("'s ", "’s ") and j + 1 < len(words) \
                and words[j + 1][0] == end + 3:
            nxt = words[j + 1]   # "Meta's Llama": what follows the possessive
        if nxt is not None and nxt[2] in name.after:
            return start, nxt[1]
        if nxt is not None and (nxt[2].isdigit() or self._plain(nxt[2])):
            return start, end
        if prev is not None and prev[2].isdigit():
            return prev[0], end   # "3.5 Sonnet"
        if prev is not None and (self._plain(prev[2]) or found and found[-1][1] >= prev[1]):
            return start, end
        if name.what == VENDOR and i and words[i - 1][2] in builtin.ORIGIN \
                and text[words[i - 1][1]:start] in (" ", "\t"):
            return start, end
        return None

    @staticmethod
    def _grown(text: str, start: int, end: int) -> tuple[int, int]:
        a, b = start, end
        while a > 0 and _in_token(text[a - 1]):
            a -= 1
        while b < len(text) and _in_token(text[b]):
            b += 1
        while a < start and text[a] in _EDGE:
            a += 1
        while b > end and text[b - 1] in _EDGE:
            b -= 1
        tail = _TAIL.match(text, b)
        return a, tail.end() if tail else b


class Masker:
    """Masks the names of ``names`` in what models wrote; the names ``task`` (the task, the
    rubric, what the job sent) uses are never masked."""

    def __init__(self, names: Names, task: Iterable[str] = ()):
        self.names = names
        self.exempt = frozenset(k for text in task if text
                                for *_, k in names.spans(normal(text)))

    def __call__(self, text: str) -> str:
        return self.mask(text)[0]

    def mask(self, text: str) -> tuple[str, int]:
        """``(masked text, names masked)``."""
        if not text:
            return text, 0
        text = normal(text)
        spans = sorted(self.names.spans(text, self.exempt))
        if not spans:
            return text, 0
        merged: list[list] = []
        for start, end, what, _ in spans:
            if merged and start <= merged[-1][1]:
                last = merged[-1]
                last[1] = max(last[1], end)
                if _RANK[what] < _RANK[last[2]]:
                    last[2] = what
            else:
                merged.append([start, end, what])
        out, at = [], 0
        for start, end, what in merged:
            out.append(text[at:start])
            out.append(LINK if what != ENDPOINT and _URL.search(text[start:end])
                       else PLACEHOLDER[what])
            at = end
        out.append(text[at:])
        return "".join(out), len(merged)


# -- a run that names itself -----------------------------------------------------------------------
_PH = r"\[(?:model|vendor|link|endpoint)\]"
_ME = r"(?:\bI\s+am|\bI['’]m|\bmy\s+name\s+is|\bcall\s+me|(?:^|[.!?]\s+|\n\s*)this\s+is|" \
      r"\bI\s+go\s+by|\byou(?:['’]re|\s+are)\s+(?:talking|chatting|speaking)\s+(?:to|with))"
_MADE = r"(?:made|created|built|developed|trained|designed|engineered|programmed|released|" \
        r"owned|operated|fine-?tuned|powered)"
_AI = r"(?:AI|A\.I\.|language\s+model|LLM|chat\s?bot|assistant|model)"
_SELF = [re.compile(p) for p in (
    rf"(?i:{_ME}\s+(?:an?\s+|the\s+|called\s+|named\s+|actually\s+)?)\[(?:model|vendor)\]",
    rf"(?i:(?:^|[.!?]\s+|\n\s*)as\s+(?:an?\s+|the\s+)?){_PH}(?i:[^.!?\n]{{0,60}}?,\s*I\b)",
    rf"(?i:\bI\s+(?:was|have\s+been|were)\s+(?:\w+\s+)?{_MADE}\s+(?:by|at)\b)",
    rf"(?i:(?:\bI\s+am|\bI['’]m)\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+){{0,3}}?{_AI}\b"
    rf"[^.!?\n]{{0,40}}?\b{_MADE}\s+(?:by|at)\b)",
    rf"(?i:\bas\s+an?\s+(?:large\s+)?{_AI}\b[^.!?\n]{{0,40}}?\b{_MADE}\s+by\b)",
    rf"(?i:\b{_AI}\b[^.!?\n]{{0,40}}?\b{_MADE}\s+(?:by|at)\s+(?:the\s+\w+\s+at\s+)?){_PH}",
    r"(?i:\bmy\s+(?:creators?|makers?|trainers?|parent\s+company)\b)",
    rf"{_PH}(?i:\s+here\b)",
    r"(?i:\bI\s+am|\bI['’]m|\bmy\s+name\s+is)\s+(?:called\s+)?[A-Z]\w*(?:[-.]\w+)*[-\d]\w*",
    rf"(?i:\bI\s+am|\bI['’]m|\bmy\s+name\s+is)\s+[A-Z]\w+,\s+(?i:an?\s+(?:large\s+)?{_AI})\b",
)]


def names_itself(text: str) -> list[str]:
    """Where ``text`` (masked) says who the model is or who made it: an excerpt per place."""
    spans = sorted(m.span() for pattern in _SELF for m in pattern.finditer(text))
    merged: list[list[int]] = []
    for start, end in spans:   # one excerpt per place, however many patterns found it
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [_excerpt(text, a, b) for a, b in merged]


def _excerpt(text: str, start: int, end: int) -> str:
    """The place with a few words either side, on word boundaries, as one line."""
    a, b = max(0, start - 24), min(len(text), end + 24)
    head, tail = text[a:start], text[end:b]
    if a > 0 and " " in head:
        head = head.split(" ", 1)[1]
    if b < len(text) and " " in tail:
        tail = tail.rsplit(" ", 1)[0]
    return " ".join((head + text[start:end] + tail).split())[:200]


@dataclass(frozen=True)
class Seen:
    """A run as its judge reads it."""

    text: str                  # the transcript, masked
    masked: int                # names masked in it
    names_itself: tuple = ()   # excerpts where it says who it is: its judgement is void


def seen(render: Callable, masker: Masker) -> Seen:
    """``render(mask)`` (``Transcript.render``) with ``masker``: ``mask(text, by_model)``
    masks ``text``, and text a model wrote is also searched for the model naming itself."""
    count, said = [0], []

    def mask(text: str, by_model: bool = True) -> str:
        out, n = masker.mask(text)
        count[0] += n
        if by_model:
            said.extend(names_itself(out))
        return out

    return Seen(render(mask), count[0], tuple(dict.fromkeys(said)))
