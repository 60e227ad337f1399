"""Text as a race's masking reads it, with a map back to the characters it came from.

``fold(text)`` is what ``race.blind`` matches names in: each character NFKC-normalised, its
combining marks (accents, variation selectors) dropped, invisible characters (soft hyphen,
zero-width space, joiners, word joiner, byte-order mark, tag characters, fillers) dropped,
look-alike letters of other scripts (Cyrillic ``е``, Greek ``Ζ``) read as the Latin letters
they mimic, every dash as ``-``, every space as `` ``, and a ``%XX`` escape of a printable
ASCII character as that character (``zephyr%2Dmini`` reads ``zephyr-mini``), and an HTML
character reference or a backslash escape as the character it stands for (``Zeph&shy;yr``,
``Z\\u0065phyr``).

Invariants:

* Case is kept (a name's CamelCase joints are found from it); matching casefolds later.
* ``Folded.origin(start, end)`` maps a slice of the folded text back to the slice of the
  original that produced it, and that slice covers every character dropped inside it or
  right after its last character: masking the original slice leaves no piece of the name
  (an invisible character, an accent, an escape) behind.
* Linear in the length of the text; ASCII text without ``%``, ``&`` or ``\\`` is its own fold.

``forms(original)`` names the disguises a slice of original text wears, for a person reading
why a run was voided. ``base64_text(token)`` is the text a plausible base64 token encodes.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from dataclasses import dataclass

# letters and digits of other scripts that pass for Latin ones in a name; what NFKC already
# maps (full-width, mathematical letters, ligatures) is not repeated here
LOOKALIKES = {
    # Cyrillic
    "а": "a",
    "в": "b",
    "е": "e",
    "ё": "e",
    "к": "k",
    "м": "m",
    "н": "h",
    "о": "o",
    "р": "p",
    "с": "c",
    "т": "t",
    "у": "y",
    "х": "x",
    "ѕ": "s",
    "і": "i",
    "ї": "i",
    "ј": "j",
    "ԁ": "d",
    "ԛ": "q",
    "ԝ": "w",
    "ӏ": "l",
    "һ": "h",
    "ү": "y",
    "ь": "b",
    "з": "3",
    "б": "6",
    "А": "A",
    "В": "B",
    "Е": "E",
    "Ё": "E",
    "К": "K",
    "М": "M",
    "Н": "H",
    "О": "O",
    "Р": "P",
    "С": "C",
    "Т": "T",
    "У": "Y",
    "Х": "X",
    "Ѕ": "S",
    "І": "I",
    "Ї": "I",
    "Ј": "J",
    "Ү": "Y",
    "Һ": "H",
    "Ԛ": "Q",
    "Ԝ": "W",
    "З": "3",
    "Ӏ": "I",
    "Ь": "b",
    # Greek
    "α": "a",
    "β": "b",
    "γ": "y",
    "ε": "e",
    "ι": "i",
    "κ": "k",
    "ν": "v",
    "ο": "o",
    "ρ": "p",
    "τ": "t",
    "υ": "u",
    "χ": "x",
    "ω": "w",
    "ϲ": "c",
    "ϳ": "j",
    "Α": "A",
    "Β": "B",
    "Ε": "E",
    "Ζ": "Z",
    "Η": "H",
    "Ι": "I",
    "Κ": "K",
    "Μ": "M",
    "Ν": "N",
    "Ο": "O",
    "Ρ": "P",
    "Τ": "T",
    "Υ": "Y",
    "Χ": "X",
    "Ϲ": "C",
    # Latin letters that are not the ASCII ones
    "ı": "i",
    "ȷ": "j",
    "ɑ": "a",
    "ɡ": "g",
    "ɩ": "i",
    "ǀ": "l",
    # Armenian
    "օ": "o",
    "ս": "u",
    "ց": "g",
    "հ": "h",
    "ո": "n",
}
# invisible characters that are not format characters (Cf) or marks (Mn, Me): fillers and blanks
INVISIBLE = frozenset("\u115f\u1160\u17b4\u17b5\u3164\uffa0\u2800")
_DROP = ("Cf", "Mn", "Me")
_HEX = frozenset("0123456789abcdefABCDEF")


def _fold_char(c: str) -> str:
    """One non-ASCII character as the masking reads it ("" when it is dropped)."""
    if c in INVISIBLE or unicodedata.category(c) in _DROP:
        return ""
    out = []
    for d in unicodedata.normalize("NFD", unicodedata.normalize("NFKC", c)):
        cat = unicodedata.category(d)
        if cat in _DROP or d in INVISIBLE:
            continue
        if cat == "Pd" or d == "\u2212":
            d = "-"
        elif cat == "Zs":
            d = " "
        elif cat in ("Zl", "Zp"):
            d = "\n"
        out.append(LOOKALIKES.get(d, d))
    return "".join(out)


@dataclass(frozen=True)
class Folded:
    """``text`` folded; ``lo[i]``/``hi[i]``: the original slice folded character ``i`` came
    from (None: the text is its own fold)."""

    text: str
    lo: list | None = None
    hi: list | None = None

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The original slice that folded ``text[start:end]`` came from."""
        if self.lo is None or self.hi is None or start >= end:  # both None, or neither
            return start, end
        return self.lo[start], self.hi[end - 1]


_PLAIN = re.compile(r"[\x00-\x24\x27-\x5b\x5d-\x7f]+")  # ASCII but "%", "&" and "\\"
# an HTML character reference, or a backslash escape of a character (as JSON and Python write)
_ESCAPE = re.compile(
    r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
    r"|\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8}|[ntr])"
)
_CONTROL = {"n": "\n", "t": "\t", "r": "\r"}  # what JSON writes a newline in a string as


def _unescape(escape: str) -> str | None:
    """The characters an escape stands for, or None for one that stands for nothing."""
    if escape[0] == "&":
        said = html.unescape(escape)
        return None if said == escape else said
    if escape[1] in _CONTROL:
        return _CONTROL[escape[1]]
    try:
        return chr(int(escape[2:], 16))
    except (ValueError, OverflowError):
        return None


def _odd(text: str, i: int, out: list, lo: list, hi: list, cache: dict) -> int:
    """Fold the character at ``i`` (or the escape there); where the next one is."""
    c = text[i]
    if (
        c == "%"
        and i + 2 < len(text)
        and text[i + 1] in _HEX
        and text[i + 2] in _HEX
        and 0x20 <= int(text[i + 1 : i + 3], 16) < 0x7F
    ):
        out.append(chr(int(text[i + 1 : i + 3], 16)))
        lo.append(i)
        hi.append(i + 3)
        return i + 3
    escape = _ESCAPE.match(text, i) if c in "&\\" else None
    if escape is not None:
        said = _unescape(escape.group())
        if said is not None:
            unescaped = "".join(d if d < "\x80" else _fold_char(d) for d in said)
            if not unescaped and hi:
                hi[-1] = escape.end()
            for d in unescaped:
                out.append(d)
                lo.append(i)
                hi.append(escape.end())
            return escape.end()
    folded = cache.get(c)
    if folded is None:
        folded = cache[c] = c if c < "\x80" else _fold_char(c)
    if not folded:
        if hi:  # a dropped character goes with the one before it
            hi[-1] = i + 1
    for d in folded:
        out.append(d)
        lo.append(i)
        hi.append(i + 1)
    return i + 1


def fold(text: str) -> Folded:
    """``text`` as masking reads it (see the module's docstring)."""
    if text.isascii() and "%" not in text and "&" not in text and "\\" not in text:
        return Folded(text)
    cache: dict[str, str] = {}
    out: list[str] = []
    lo: list[int] = []
    hi: list[int] = []
    i, n = 0, len(text)
    while i < n:
        m = _PLAIN.match(text, i)  # a run of ASCII without "%" folds to itself, at once
        if m is None:
            i = _odd(text, i, out, lo, hi, cache)
            continue
        a, b = m.span()
        out.append(text[a:b])
        lo.extend(range(a, b))
        hi.extend(range(a + 1, b + 1))
        i = b
    return Folded("".join(out), lo, hi)


def forms(original: str, folded: str = "") -> list[str]:
    """The disguises ``original`` (a name as a run wrote it) wears, in words."""
    found = []
    for c in original:
        if c < "\x80":
            continue
        if c in INVISIBLE or unicodedata.category(c) == "Cf":
            found.append("invisible characters")
        elif unicodedata.category(c) in ("Mn", "Me"):
            found.append("combining marks")
        elif (
            unicodedata.normalize("NFKC", c) != c
            and unicodedata.category(unicodedata.normalize("NFKC", c)[0]) != "Zs"
        ):
            found.append("compatibility forms (full-width, styled letters)")
        elif unicodedata.normalize("NFD", c)[0] in LOOKALIKES:
            found.append("look-alike letters")
        elif unicodedata.normalize("NFD", c) != c:
            found.append("accented letters")
    if re.search(r"%[0-9A-Fa-f]{2}", original):
        found.append("percent-encoded")
    if _ESCAPE.search(original):
        found.append("escaped (HTML or backslash)")
    plain = folded or original
    if "\n" in plain:
        found.append("split by a newline")
    if re.search(r"[*`~]|(?<![\w])_|_(?![\w])", plain):
        found.append("markdown marks")
    if re.search(r"\w[ \t]+\w", plain):
        found.append("split by spaces")
    if re.search(r"\w\.\w", plain):
        found.append("split by dots")
    if re.search(r"[a-z][A-Z]", plain):
        found.append("joined (CamelCase)")
    return list(dict.fromkeys(found))


_B64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{8,}={0,2}(?![\w+/=-])")


def base64_tokens(text: str):
    """``(start, end, decoded text)`` of every token of ``text`` that decodes from base64 (or
    its URL-safe form) to readable text."""
    for m in _B64.finditer(text):
        decoded = base64_text(m.group())
        if decoded is not None:
            yield m.start(), m.end(), decoded


def base64_text(token: str) -> str | None:
    """What ``token`` encodes when that is readable text (UTF-8, printable, with a letter),
    else None: a word or an identifier that merely could be base64 decodes to noise."""
    body = token.rstrip("=")
    if len(body) % 4 == 1 or (("-" in body or "_" in body) and ("+" in body or "/" in body)):
        return None
    if body.isalpha() and (body.islower() or body.isupper()):
        return None  # an ordinary word, not an encoding: base64 mixes cases
    alt = b"-_" if ("-" in body or "_" in body) else None
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alt, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if len(text) < 3 or not any(c.isalpha() for c in text):
        return None
    readable = sum(c.isprintable() or c in "\n\t" for c in text)
    return text if readable == len(text) else None
