"""JSON that crosses our edges: what callers and upstreams send in, what we write out.

The one rule for text we did not make ourselves: a lone UTF-16 surrogate (``"\\ud800"`` in JSON,
or a stray byte a command line decoded with ``surrogateescape``) becomes U+FFFD where it comes
in. A string holding one cannot be encoded as UTF-8, so letting it through would fail whichever
writer met it first: a reply, a log line, an error. Valid pairs (``"\\ud83d\\ude00"``) are joined
by the decoder into one character and are untouched.

Invariants:

* ``loads`` returns data whose strings (keys included) hold no lone surrogate and whose nesting is
  at most ``MAX_DEPTH`` containers deep, or raises ``JSONRefused`` (a ``ValueError``) saying why;
  never ``RecursionError``.
* ``dumps`` never raises for a string's contents: a surrogate that slipped past ``loads`` is
  written as U+FFFD, so a writer cannot lose a record over one bad character.
"""

from __future__ import annotations

import json
import re
from json import encoder as _stock
from typing import Any, Callable

MAX_DEPTH = 64  # containers inside containers: a chat request needs five or six
_LONE = re.compile("[\ud800-\udfff]")
# how a lone surrogate can arrive in UTF-8 bytes: as an escape, or encoded raw (ED A0..BF ..),
# which json.loads decodes with "surrogatepass" instead of refusing. Two patterns, not one
# alternation: each alone is searched from its literal first byte, ten times faster on an answer.
_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_RAW = re.compile(rb"\xed[\xa0-\xbf]")


class JSONRefused(ValueError):
    """Raised when incoming JSON does not parse or nests deeper than MAX_DEPTH."""


def clean(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD."""
    return _LONE.sub("\ufffd", text)


def clean_data(value, depth: int = MAX_DEPTH):
    """``value`` with every string (keys too) cleaned; refuses nesting past ``depth``."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        if depth <= 0:
            raise JSONRefused(f"the JSON nests deeper than {MAX_DEPTH} levels")
        return {clean(k): clean_data(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth <= 0:
            raise JSONRefused(f"the JSON nests deeper than {MAX_DEPTH} levels")
        return [clean_data(v, depth - 1) for v in value]
    return value


def _check_depth(value, depth: int) -> None:
    stack = [(value, depth)]
    while stack:
        item, left = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if left <= 0:
            raise JSONRefused(f"the JSON nests deeper than {MAX_DEPTH} levels")
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, left - 1))


def _no_constant(name: str):
    raise JSONRefused(f"{name} is not a JSON number; send a finite number")


def _unique(pairs: list) -> dict:
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise JSONRefused(f"the key {key!r} appears twice in one object; send each key once")
        seen[key] = value
    return seen


def loads(data: bytes | str, *, strict: bool = False, unique: bool = False):
    """Parse JSON from outside. Raises ``JSONRefused`` (with the decoder's reason) or
    ``UnicodeDecodeError`` for bytes that are not UTF-8. ``strict`` also refuses ``NaN`` and
    ``Infinity``, which Python's decoder takes but no JSON peer we forward to would;
    ``unique`` refuses an object that names a key twice (which the decoder would let the last
    one win), where two readers could take two different values from one text."""
    kw: dict[str, Any] = {"parse_constant": _no_constant} if strict else {}
    if unique:
        kw["object_pairs_hook"] = _unique
    try:
        value = json.loads(data, **kw)
    except RecursionError:
        raise JSONRefused(f"the JSON nests deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError:
        raise
    except ValueError as exc:
        raise JSONRefused(str(exc)) from None
    if not isinstance(value, (dict, list)):
        return clean(value) if isinstance(value, str) else value
    if (
        not isinstance(data, bytes)
        or _ESCAPE.search(data)
        or (not data.isascii() and _RAW.search(data))
        or json.detect_encoding(data) not in ("utf-8", "utf-8-sig")
    ):  # UTF-16/32: walk it all
        return clean_data(value)  # walks and checks depth at once
    # nesting cannot exceed the brackets opened: most bodies open too few to need the walk
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH:
        _check_depth(value, MAX_DEPTH)
    return value


# json.dumps builds a new encoder for every call that passes an option, and JSONEncoder.encode
# a new C encoder for every call; a log line or a reply is encoded with one of a few option
# sets, so each set's encoder is built once and kept
_ENCODERS: dict[tuple, Callable[[object], str]] = {}


def _text(value, kw: dict) -> str:
    """The encoder's text for ``value``; lone surrogates may still be in it."""
    kw.setdefault("ensure_ascii", False)
    key = tuple(sorted(kw.items()))
    try:
        encode = _ENCODERS[key]
    except KeyError:
        encode = _encoder(kw)
        if len(_ENCODERS) < 64:  # the option sets are a handful; this only bounds a misuse
            _ENCODERS[key] = encode
    except TypeError:  # an option whose value cannot be part of a key (a list): not kept
        encode = _encoder(kw)
    return encode(value)


def _encoder(kw: dict) -> Callable[[object], str]:
    """``JSONEncoder(**kw).encode``, with its C encoder made once. That one is kept without
    the circular-reference check, whose table a failed call could leave filled: what we
    encode is parsed JSON and trees of our own, and a cycle still fails (RecursionError)."""
    encoder = json.JSONEncoder(**kw)
    make = _stock.c_make_encoder  # type: ignore[attr-defined]  # C accelerator; not in typeshed
    if make is None or encoder.indent is not None:
        return encoder.encode
    strings = _stock.encode_basestring_ascii if encoder.ensure_ascii else _stock.encode_basestring
    whole = make(
        None,
        encoder.default,
        strings,
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode(value) -> str:
        return strings(value) if isinstance(value, str) else "".join(whole(value, 0))

    return encode


def dumps(value, **kw) -> str:
    """``json.dumps`` (``ensure_ascii=False`` unless given) whose result always encodes to UTF-8."""
    text = _text(value, kw)
    # an ASCII text (known at once, without a scan) holds no surrogate
    return clean(text) if not text.isascii() and _LONE.search(text) else text


def encode(value, **kw) -> bytes:
    """``dumps`` as UTF-8 bytes."""
    text = _text(value, kw)
    try:
        # the encoding is needed anyway, and fails exactly when a lone surrogate is there
        return text.encode()
    except UnicodeEncodeError:
        return clean(text).encode()
