"""What a race's judge reads of a run: every name a model could be known by masked, in any
disguise, and the runs that name themselves found out.

Invariants:

* Only what models wrote is masked: their answers, the arguments of their tool calls, what the
  tools returned (a tool can echo an argument), the job's output, and the assistant messages a
  job sent back. What the job itself sent, the task and the rubric are never masked, and a name
  the task uses is masked nowhere: it is a word of the task ("Give a swift answer" beside a
  model of family ``swift``), unless a version or tier goes with it (``swift-2``).
* Names are found in the text as ``race.normal`` folds it (NFKC, look-alike letters of other
  scripts read as Latin, invisible characters and combining marks dropped, ``%XX`` decoded),
  case-insensitively, and the *original* characters are masked (``normal.Folded.origin``): no
  piece of a name, visible or not, reaches the judge.
* Two passes find a name. By words, on word boundaries, whatever joins its parts (``GPT-4o``,
  ``gpt4o``, ``GPT 4o``), with the contextual names of ``race.names``. By letters: a name's
  letters and digits in a row, starting and ending on a word boundary (a CamelCase joint
  counts: ``ZephyrMini``), with nothing between two of them but a few of `` -_.*`~/:`` and at
  most one newline (``**Zephyr**-mini``, ``Zep*hyr*``, ``Z.e.p.h.y.r``, ``Zephyr\nMini``); a
  space inside a name's word is allowed only in a name of five letters or more, or between
  single letters (``Z e p h y r``), and never after a full stop. Contextual names (ordinary
  words) are found by the first pass only.
* A token that decodes from base64 to readable text naming a model is masked whole.
* The whole token a name stands in is masked (``zeta-mini-v2``, ``https://www.anthropic.com``),
  with the version and tier words after it ("Claude 3.5 Sonnet" is one ``[model]``).
  Placeholders: ``[model]``, ``[vendor]``, ``[endpoint]``, and ``[link]`` for an address that
  names a model or a vendor.
* The names (``Names.of``): every roster model's alias, served id, the served id's vendor and
  model parts, family; every endpoint's name, URL and host; every served id the catalog lists;
  the built-in table of well-known names (``race.names``).
* Masking is linear in the text's length: the letter pass walks a trie of the names from each
  word boundary, never deeper than the longest name.
* A run is void only when it names *itself* (``race.selfname``): its own alias, served id,
  family or vendor, said of itself, found in the unmasked text. Mentions of other models are
  masked and nothing more.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from typing import Callable, ItemsView, Iterable

from panelist.metrics.race import names as builtin
from panelist.metrics.race import selfname
from panelist.metrics.race.names import ENDPOINT, MODEL, VENDOR
from panelist.metrics.race.normal import base64_tokens, fold
from panelist.metrics.roster.roster import Endpoint, Model

PLACEHOLDER = {MODEL: "[model]", VENDOR: "[vendor]", ENDPOINT: "[endpoint]"}
LINK = "[link]"
_RANK = {ENDPOINT: 0, MODEL: 1, VENDOR: 2}  # which placeholder a token naming several takes

REACH = 256  # how far a name's token is looked for
_WORD = re.compile(r"[^\W\d_]+|\d+")
_JOINERS = "._:/@+~%=&?#-"  # what joins a name's parts inside one token
_EDGE = "._:/@~%=&?#-"  # what a token does not end on ("R+" keeps its +)
_URL = re.compile(r"[a-z][a-z0-9+.-]*://|^www\.|^(?:[\w-]+\.)+[a-z]{2,}(?:[/:?#]|$)", re.I)
_TAIL = re.compile(
    r"(?:[ \t]?-?(?:[a-z]?\d+(?:\.\d+)*(?:[a-z]{1,2})?|\d+x\d+[a-z]|"
    + "|".join(sorted(builtin.TIERS))
    + r")(?!\w))+",
    re.I,
)
_CAMEL_IN = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])|(?<=[a-z])(?=[A-Z])")  # CamelCase joints
_SEP = frozenset(" \t\r\n-_.*`~/:")  # what may split a name's letters (see above)


def normal(text: str) -> str:
    """``text`` as masking reads it (``normal.fold``)."""
    return fold(text).text


def key(text: str) -> tuple[str, ...]:
    """A name's words, casefolded; letters and digits are words of their own (``gpt4o`` is
    ``gpt``, ``4``, ``o``), so whatever joins them is one name."""
    return tuple(w.casefold() for w in _WORD.findall(normal(text)))


def flat(k: tuple) -> str:
    """A name's letters and digits in a row: how the letter pass knows it."""
    return "".join(k)


def _joined(text: str, end: int, start: int) -> bool:
    """Whether the words ending at ``end`` and starting at ``start`` are parts of one name:
    nothing between them, one space, or up to three joiners (``://``)."""
    gap = text[end:start]
    return gap == "" or gap in (" ", "\t") or (len(gap) <= 3 and all(c in _JOINERS for c in gap))


def _in_token(c: str) -> bool:
    return c.isalnum() or c == "_" or c in _JOINERS


def _token(text: str, start: int, end: int) -> tuple[int, int]:
    """The token ``text[start:end]`` stands in, at most ``REACH`` characters either side: a
    name inside one huge token (a blob) costs no more than inside a word."""
    a, b = start, end
    low, high = max(0, start - REACH), min(len(text), end + REACH)
    while a > low and _in_token(text[a - 1]):
        a -= 1
    while b < high and _in_token(text[b]):
        b += 1
    return a, b


@dataclass(frozen=True)
class _Name:
    what: str  # MODEL, VENDOR or ENDPOINT
    after: frozenset | None = None  # a contextual name's next words; None: always a name


class Names:
    """The names a race masks, by ``key``."""

    def __init__(self):
        self._names: dict[tuple, _Name] = {}
        self._reach: dict[str, int] = {}  # a first word -> the most words a name of it has
        self._trie: dict = {}  # a name's letters, one level each; None: its key
        self.shown: dict[str, str] = {}  # flat -> the name as it was first given

    @classmethod
    def of(
        cls, models: Iterable[Model], endpoints: Iterable[Endpoint], served: Iterable[str] = ()
    ) -> "Names":
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
        if (
            not k
            or (len(k) == 1 and len(k[0]) < 2)
            or (len(k) < 3 and not any(w[0].isalpha() for w in k))
        ):
            return  # a lone letter or a bare number names nothing
        old = self._names.get(k)
        if old is not None and (
            old.after is None
            and after is not None
            or old.after == after
            and _RANK[old.what] <= _RANK[what]
        ):
            return  # an always-name beats a contextual one; then a model beats an endpoint
        self._names[k] = _Name(what, after)
        self._reach[k[0]] = max(self._reach.get(k[0], 0), len(k))
        self.shown.setdefault(flat(k), text)
        node = self._trie
        for c in flat(k):
            node = node.setdefault(c, {})
        node.setdefault(None, k)

    def get(self, k: tuple) -> _Name | None:
        return self._names.get(k)

    def keys(self):
        return self._names.keys()

    def items(self) -> ItemsView[tuple, _Name]:
        return self._names.items()

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
        self.add(last.split(":")[0], MODEL)  # "llama3:8b", as local servers tag sizes
        words = [w for w in re.split(r"[-_.: ]+", last) if w]
        for a in range(len(words)):  # "name-x", "x-mini-v2": runs of two words or more
            for b in range(a + 2, len(words) + 1):
                if (a, b) != (0, len(words)) and any(
                    not any(c.isdigit() for c in w) and w.casefold() not in builtin.TIERS
                    for w in words[a:b]
                ):
                    self.add("-".join(words[a:b]), MODEL)

    def _plain(self, word: str) -> bool:
        name = self._names.get((word,))
        return name is not None and name.after is None

    def spans(self, text: str, exempt: frozenset = frozenset()) -> list[tuple]:
        """``(start, end, what, key)`` of every name in the folded ``text`` (not those whose
        ``flat`` is in ``exempt``), each span grown to the token it stands in and the
        versions after it; by words, then by letters."""
        words = [(m.start(), m.end(), m.group().casefold()) for m in _WORD.finditer(text)]
        found = self._word_spans(text, exempt, words)
        return found + self._letter_spans(text, exempt, words)

    def _word_spans(self, text: str, exempt: frozenset, words: list[tuple]) -> list[tuple]:
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
                k = tuple(w[2] for w in words[i : i + size])
                name = self._names.get(k)
                if name is not None and all(
                    _joined(text, words[j][1], words[j + 1][0]) for j in range(i, i + size - 1)
                ):
                    hit = size, k, name
                    break
            if hit is None:
                i += 1
                continue
            size, k, name = hit
            span = (start, words[i + size - 1][1])
            if name.after is not None:
                context = self._context(text, words, i, size, name, found)
                if context is None:
                    i += 1
                    continue
                span = context
            if flat(k) not in exempt or self._versioned(text, *span):
                found.append((*self._grown(text, *span), name.what, k))
            i += size
        return found

    def _letter_spans(self, text: str, exempt: frozenset, words: list[tuple]) -> list[tuple]:
        """Names whose letters stand in a row, split or joined (see the module's docstring).
        ``words``: ``(start, end, casefolded)`` of each word of ``text``."""
        letters = _Letters(text, words)
        found: list[tuple] = []
        chars, ends, n, done = letters.chars, letters.ends, len(letters.chars), -1
        node: dict | None  # the trie's node of the letters read so far
        for k in letters.starts:
            if k <= done:
                continue
            node, j, best = self._trie, k, None
            while j < n:
                node = node.get(chars[j])
                if node is None:
                    break
                name_key = node.get(None)
                if name_key is not None and j in ends:
                    name = self._names[name_key]
                    if name.after is None and _split_ok(text, letters, k, j, name_key):
                        best = j, name_key, name
                j += 1
            if best is None:
                continue
            j, name_key, name = best
            span = letters.at(k), letters.at(j) + 1
            if flat(name_key) not in exempt or self._versioned(text, *span):
                found.append((*self._grown(text, *span), name.what, name_key))
                done = j
        return found

    @staticmethod
    def _versioned(text: str, start: int, end: int) -> bool:
        """Whether the token a name stands in gives it a version or a tier (``swift-mini-v2``,
        ``swift-2``): then it names a model, even where the task uses the word."""
        a, b = _token(text, start, end)
        rest = _WORD.findall(text[a:start] + " " + text[end:b])
        return any(w.isdigit() or w.casefold() in builtin.TIERS for w in rest)

    def _context(self, text, words, i, size, name, found) -> tuple[int, int] | None:
        """Where a contextual name stands as a name (see ``race.names``), or None."""
        j = i + size
        start, end = words[i][0], words[j - 1][1]
        nxt = words[j] if j < len(words) and _joined(text, words[j - 1][1], words[j][0]) else None
        prev = words[i - 1] if i and _joined(text, words[i - 1][1], start) else None
        if (
            nxt is None
            and text[end : end + 3] in ("'s ", "’s ")
            and j + 1 < len(words)
            and words[j + 1][0] == end + 3
        ):
            nxt = words[j + 1]  # "Meta's Llama": what follows the possessive
        if nxt is not None and nxt[2] in name.after:
            return start, nxt[1]
        if nxt is not None and (nxt[2].isdigit() or self._plain(nxt[2])):
            return start, end
        if prev is not None and prev[2].isdigit():
            return prev[0], end  # "3.5 Sonnet"
        if prev is not None and (self._plain(prev[2]) or found and found[-1][1] >= prev[1]):
            return start, end
        if (
            name.what == VENDOR
            and i
            and words[i - 1][2] in builtin.ORIGIN
            and text[words[i - 1][1] : start] in (" ", "\t")
        ):
            return start, end
        return None

    @staticmethod
    def _grown(text: str, start: int, end: int) -> tuple[int, int]:
        a, b = _token(text, start, end)
        while a < start and text[a] in _EDGE:
            a += 1
        while b > end and text[b - 1] in _EDGE:
            b -= 1
        tail = _TAIL.match(text, b)
        return a, tail.end() if tail else b


@dataclass(frozen=True)
class Hit:
    """A name found in a text: the original characters ``start:end``, what it names, its key,
    and how it read once folded (or decoded)."""

    start: int
    end: int
    what: str
    key: tuple
    read: str
    base64: bool = False


class Masker:
    """Masks the names of ``names`` in what models wrote; the names ``task`` (the task, the
    rubric, what the job sent) uses are never masked."""

    def __init__(self, names: Names, task: Iterable[str] = ()):
        self.names = names
        self.exempt = frozenset(
            flat(k) for text in task if text for *_, k in names.spans(normal(text))
        )

    def __call__(self, text: str) -> str:
        return self.mask(text)[0]

    def hits(self, text: str, depth: int = 1) -> list[Hit]:
        """Every name in ``text``, in the original's characters, sorted; a base64 token whose
        text names one is a hit of its own (``depth``: how deep encodings are opened)."""
        folded = fold(text)
        found = [
            Hit(*folded.origin(a, b), what, k, folded.text[a:b])
            for a, b, what, k in self.names.spans(folded.text, self.exempt)
        ]
        if depth > 0:
            for a, b, decoded in base64_tokens(text):
                inner = self.hits(decoded, depth - 1)
                if inner:
                    best = min(inner, key=lambda h: _RANK[h.what])
                    found.append(Hit(a, b, best.what, best.key, decoded, base64=True))
        return sorted(found, key=lambda h: (h.start, -h.end))

    def mask(self, text: str) -> tuple[str, int]:
        """``(masked text, names masked)``."""
        if not text:
            return text, 0
        return self.masked(text, self.hits(text))

    @staticmethod
    def masked(text: str, hits: list[Hit]) -> tuple[str, int]:
        """``text`` with every hit's characters replaced (overlapping hits as one)."""
        merged: list[list] = []
        for h in hits:
            if merged and h.start <= merged[-1][1]:
                last = merged[-1]
                last[1] = max(last[1], h.end)
                if _RANK[h.what] < _RANK[last[2]]:
                    last[2] = h.what
                last[3] = last[3] or bool(_URL.search(h.read))
            else:
                merged.append([h.start, h.end, h.what, bool(_URL.search(h.read))])
        out, at = [], 0
        for start, end, what, link in merged:
            out.append(text[at:start])
            out.append(LINK if what != ENDPOINT and link else PLACEHOLDER[what])
            at = end
        out.append(text[at:])
        return "".join(out), len(merged)

    def itself(
        self, text: str, own: selfname.Own, hits: list[Hit] | None = None, depth: int = 1
    ) -> list[dict]:
        """Where ``text`` (unmasked) names its own writer, ``own``: one piece of evidence per
        place (``selfname.evidence``); the text a base64 token encodes is read too."""
        if hits is None:
            hits = self.hits(text, depth)
        found = selfname.evidence(text, hits, own, self.names.shown)
        for h in hits:
            if h.base64 and depth > 0:
                for e in self.itself(h.read, own, depth=depth - 1):
                    found.append(
                        dict(
                            e,
                            forms=["base64", *e["forms"]],
                            written=selfname.shown(text[h.start : h.end]),
                        )
                    )
        return found


def own_of(model: Model) -> selfname.Own:
    """The names ``model`` would name itself by: its alias, its served id and that id's parts,
    its family, its vendor (the served id's vendor part, and the maker of a well-known name in
    its names) and that vendor's well-known models."""
    kinds: dict[str, str] = {}
    shown: dict[str, str] = {}
    single: set[str] = set()  # names of one word
    for text, kind in (
        (model.alias, "alias"),
        (model.served, "served id"),
        (model.family, "family"),
    ):
        names = Names()
        if kind == "served id":
            names.add_served(text)
        else:
            names.add(text, MODEL)
        for k, name in names.items():
            kinds.setdefault(flat(k), "vendor" if name.what == VENDOR else kind)
            if len(k) == 1:
                single.add(flat(k))
        shown.update({f: t for f, t in names.shown.items() if f not in shown})
    words = {w for t in (model.alias, model.served, model.family) for w in key(t or "")}
    makers = {
        m
        for word, made in builtin.MAKERS.items()
        if key(word)
        and (flat(key(word)) in kinds or (len(key(word)) == 1 and key(word)[0] in words))
        for m in made
    }
    for vendor in makers:
        if len(key(vendor)) == 1:
            single.add(flat(key(vendor)))
        kinds.setdefault(flat(key(vendor)), "vendor")
        shown.setdefault(flat(key(vendor)), vendor)
    vendors = {f for f, kind in kinds.items() if kind == "vendor"}
    for word, made in builtin.MAKERS.items():
        if any(flat(key(m)) in vendors for m in made):
            kinds.setdefault(flat(key(word)), "its vendor's model")
            shown.setdefault(flat(key(word)), word)
    known = {flat(key(w)) for w in (*builtin.MODELS, *builtin.VENDORS, *builtin.DOMAINS)}
    plain = frozenset(
        f
        for f in kinds
        if f in single and f.isalpha() and f not in known and f not in builtin.MAKERS
    )
    return selfname.Own(model.alias, kinds, shown, plain)


class _Letters:
    """The letters and digits of a text in a row (``chars``, casefolded), where words and
    CamelCase parts begin (``starts``) and end (``ends``), as indexes into ``chars``; ``at``
    maps one back to its position in the text."""

    def __init__(self, text: str, words: list[tuple]):
        self._begin = [a for a, _, _ in words]
        self._offset = list(itertools.accumulate((b - a for a, b, _ in words), initial=0))
        chars = "".join(w for _, _, w in words)
        if len(chars) != self._offset[-1]:  # a letter whose casefold is longer ("ß")
            chars = "".join(c.casefold()[:1] or c for a, b, _ in words for c in text[a:b])
        self.chars = chars
        joints = [self._index(m.start()) for m in _CAMEL_IN.finditer(text)]
        self.starts = sorted([*self._offset[:-1], *joints])
        self.ends = {o - 1 for o in self._offset[1:]} | {j - 1 for j in joints}

    def _index(self, position: int) -> int:
        i = bisect.bisect_right(self._begin, position) - 1
        return self._offset[i] + position - self._begin[i]

    def at(self, k: int) -> int:
        i = bisect.bisect_right(self._offset, k) - 1
        return self._begin[i] + k - self._offset[i]

    def positions(self, k: int, j: int) -> list[int]:
        """Where letters ``k..j`` stand in the text."""
        i = bisect.bisect_right(self._offset, k) - 1
        out: list[int] = []
        while k <= j:
            end = min(self._offset[i + 1], j + 1)
            base = self._begin[i] - self._offset[i]
            out.extend(range(base + k, base + end))
            k, i = end, i + 1
        return out


def _split_ok(text: str, letters: _Letters, k: int, j: int, name_key: tuple) -> bool:
    """Whether the letters ``k..j`` are one name however they are split."""
    where = letters.positions(k, j)
    if where[-1] - where[0] == j - k:
        return True  # nothing between its letters
    joints, at = set(), 0
    for w in name_key[:-1]:
        at += len(w)
        joints.add(at)  # after which of its letters the name's own parts meet
    spaced, pieces, piece = False, [], 1
    for t in range(j - k):
        gap = text[where[t] + 1 : where[t + 1]]
        if not gap:
            piece += 1
            continue
        if len(gap) > 4 or not _SEP.issuperset(gap) or gap.replace("\r\n", "\n").count("\n") > 1:
            return False
        if "." in gap and (" " in gap or "\n" in gap):
            return False  # the end of a sentence, not a name
        if t + 1 not in joints and (" " in gap or "\t" in gap or "\n" in gap):
            spaced = True
        pieces.append(piece)
        piece = 1
    pieces.append(piece)
    return not spaced or len(flat(name_key)) >= 5 or max(pieces) == 1


@dataclass(frozen=True)
class Seen:
    """A run as its judge reads it."""

    text: str  # the transcript, masked
    masked: int  # names masked in it
    names_itself: tuple = ()  # where it names itself, in words: its judgement is void
    evidence: tuple = ()  # the same, for a person to confirm (``selfname.evidence``)


def seen(render: Callable, masker: Masker, own: Model | None = None) -> Seen:
    """``render(mask)`` (``Transcript.render``) with ``masker``: ``mask(text, by_model)``
    masks ``text``, and text a model wrote is also searched for the run's model, ``own``,
    naming itself (not searched without ``own``)."""
    count, found = [0], []
    mine = own_of(own) if own is not None else None

    def mask(text: str, by_model: bool = True) -> str:
        if not text:
            return text
        hits = masker.hits(text)
        out, n = masker.masked(text, hits)
        count[0] += n
        if by_model and mine is not None:
            found.extend(masker.itself(text, mine, hits))
        return out

    text = render(mask)
    unique = list({(e["name"], e["excerpt"]): e for e in found}.values())
    return Seen(text, count[0], tuple(selfname.said(e) for e in unique), tuple(unique))
