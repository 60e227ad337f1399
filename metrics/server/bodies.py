"""The one body each dashboard write declares (``Body``): its fields, each with the JSON type it
takes, whether it is required, and its bounds. ``Body.check`` refuses anything else with a 400
that names the field and says what to send, before the route's handler touches anything.

A handler declares its body with ``@takes(Body(...))`` beside its definition; the dashboard
refuses to build an ``/api/`` write route whose action declares none (``declared``), so no write
takes a body nobody described.

Invariants:

* A body is a JSON object, or no body at all (taken as ``{}``); anything else is refused.
* A field not declared is refused, naming it and listing those the route takes: a misspelt
  field would otherwise be dropped in silence (``"rmp": 5`` would mint a key with no limit).
* null for an optional field is the same as leaving it out (an edit then clears or keeps it, as
  the route says); null for a required field is refused. ``check`` returns the body without
  those nulls, so a handler never meets one.
* A number is never a boolean, always finite and within its bounds; a whole number is a JSON
  integer. Text has a length cap where one is declared.
* A field sent wrong is named before one left out. A refusal never repeats the value sent (it
  may be a secret, or megabytes): it says which JSON type came, or which bound it broke.
* The rules here are types and bounds only; what a name may look like, whether a model exists
  and the like stay with the domain's own checks, which the CLI shares.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

from panelist.metrics.errors import BadRequest
from panelist.metrics.plaintext import visible

MAX_WHOLE = 2**53 - 1  # the largest whole number a browser's JSON reads exactly
SHOWN = 64  # characters of an unknown field's name a refusal repeats


class _Absent:
    """No body was sent (the request had none): taken as ``{}``."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


def got(value) -> str:
    """What came, by JSON type, never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


class Field(ABC):
    """One field of a body. ``json``: the JSON types it takes (null aside); ``hint``: what the
    field is for, said in every refusal of it."""

    json: tuple[str, ...] = ()

    def __init__(self, *, required: bool = False, hint: str = ""):
        self.required = required
        self.hint = hint

    @abstractmethod
    def what(self) -> str:
        """What to send, e.g. ``a whole number from 1 to 1000000``."""

    @abstractmethod
    def problem(self, value) -> str | None:
        """What is wrong with a value that is not null (``got …``), or None when it fits."""


class Text(Field):
    """A string of at most ``max_len`` characters (any length when None); not empty when
    ``nonempty``."""

    json = ("string",)

    def __init__(self, max_len: int | None = None, *, nonempty: bool = False, **kw):
        super().__init__(**kw)
        self.max_len, self.nonempty = max_len, nonempty

    def what(self) -> str:
        if self.max_len is None:
            return "a non-empty string" if self.nonempty else "a string"
        if self.nonempty:
            return f"a string of 1 to {self.max_len} characters"
        return f"a string of at most {self.max_len} characters"

    def problem(self, value) -> str | None:
        if not isinstance(value, str):
            return f"got {got(value)}"
        if self.nonempty and not value.strip():
            return "got an empty string"
        if self.max_len is not None and len(value) > self.max_len:
            return f"got {len(value)} characters"
        return None


class OneOf(Field):
    """One of a few strings."""

    json = ("string",)

    def __init__(self, *choices: str, **kw):
        super().__init__(**kw)
        self.choices = choices

    def what(self) -> str:
        return "one of " + ", ".join(f"'{c}'" for c in self.choices)

    def problem(self, value) -> str | None:
        if not isinstance(value, str):
            return f"got {got(value)}"
        return None if value in self.choices else "got another string"


class Flag(Field):
    """true or false."""

    json = ("boolean",)

    def what(self) -> str:
        return "true or false"

    def problem(self, value) -> str | None:
        return None if isinstance(value, bool) else f"got {got(value)}"


class Number(Field):
    """A finite number from ``low`` to ``high`` (above ``low`` when ``above``)."""

    json = ("number",)
    noun = "a number"
    whole = False

    def __init__(self, low: float = 0, high: float = MAX_WHOLE, *, above: bool = False, **kw):
        super().__init__(**kw)
        self.low, self.high, self.above = low, high, above

    def what(self) -> str:
        least = f"above {_shown(self.low)}" if self.above else f"of {_shown(self.low)}"
        if self.high >= MAX_WHOLE:
            return f"{self.noun} {least}" + ("" if self.above else " or more")
        if self.above:
            return f"{self.noun} {least} and at most {_shown(self.high)}"
        return f"{self.noun} from {_shown(self.low)} to {_shown(self.high)}"

    def problem(self, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"got {got(value)}"
        if not math.isfinite(value) or value > self.high:
            return f"got a number above {_shown(self.high)}"
        if value < self.low or (self.above and value == self.low):
            return f"got a number {'of' if value == self.low else 'below'} {_shown(self.low)}"
        if self.whole and not isinstance(value, int):
            return "got a decimal number"
        return None


class Whole(Number):
    """A JSON integer from ``low`` to ``high`` (a browser never writes one with a point)."""

    noun = "a whole number"
    whole = True


def _shown(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


class Strings(Field):
    """A list of at most ``max_items`` strings of at most ``max_len`` characters each; with
    ``comma``, one string of comma-separated words is taken too (as the CLI takes it)."""

    def __init__(self, max_items: int, max_len: int, *, comma: bool = False, **kw):
        super().__init__(**kw)
        self.max_items, self.max_len, self.comma = max_items, max_len, comma
        self.json = ("array", "string") if comma else ("array",)

    def what(self) -> str:
        also = ", or one comma-separated string" if self.comma else ""
        return (
            f"a list of at most {self.max_items} strings of at most {self.max_len} characters{also}"
        )

    def problem(self, value) -> str | None:
        if self.comma and isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list):
            return f"got {got(value)}"
        if len(value) > self.max_items:
            return f"got {len(value)} items"
        for i, item in enumerate(value):
            if not isinstance(item, str):
                return f"got a list holding {got(item)} (item {i + 1})"
            if len(item) > self.max_len:
                return f"got a string of {len(item)} characters (item {i + 1})"
        return None


class Items(Field):
    """A list of at most ``max_items`` JSON objects, whose own fields the domain that reads them
    checks (a chat request's messages and tools are checked whole by its parser)."""

    json = ("array",)

    def __init__(self, max_items: int, **kw):
        super().__init__(**kw)
        self.max_items = max_items

    def what(self) -> str:
        return f"a list of at most {self.max_items} JSON objects"

    def problem(self, value) -> str | None:
        if not isinstance(value, list):
            return f"got {got(value)}"
        if len(value) > self.max_items:
            return f"got {len(value)} items"
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                return f"got a list holding {got(item)} (item {i + 1})"
        return None


class Body:
    """The fields a write takes, in the order they are checked."""

    def __init__(self, **fields: Field):
        self.fields = fields

    def check(self, body) -> dict:
        """``body`` without its nulls, or BadRequest naming the first field at fault."""
        if body is ABSENT:
            body = {}
        if not isinstance(body, dict):
            raise BadRequest(f"the body must be a JSON object{self._menu(': ')}; got {got(body)}")
        unknown = [k for k in body if k not in self.fields]
        if unknown:  # shown as printable text, and only its start: the name is the caller's
            name = visible(unknown[0][:SHOWN]) + ("…" if len(unknown[0]) > SHOWN else "")
            raise BadRequest(
                f"unknown field '{name}'; "
                f"{self._menu() or 'this route takes no fields: send {} or no body'}",
                param=name,
            )
        for name, field in self.fields.items():
            value = body.get(name)
            if value is None:
                if name in body and field.required:
                    self._refuse(name, field, "got null")
                continue
            why = field.problem(value)
            if why is not None:
                self._refuse(name, field, why)
        for name, field in self.fields.items():
            if field.required and name not in body:
                self._refuse(name, field, None)
        return {k: v for k, v in body.items() if v is not None}

    def _menu(self, lead: str = "") -> str:
        if not self.fields:
            return ""
        return f"{lead}this route takes " + ", ".join(
            f"{n} (required)" if f.required else n for n, f in self.fields.items()
        )

    @staticmethod
    def _refuse(name: str, field: Field, why: str | None) -> None:
        """A refusal of one field: what to send, what the field is for, and what came."""
        hint = f" ({field.hint})" if field.hint else ""
        if field.required and why in (None, "got null"):
            said = f"'{name}' is required: {field.what()}{hint}"
        else:
            said = f"'{name}' must be {field.what()}{hint}"
        raise BadRequest(said if why is None else f"{said}; {why}", param=name)


NOTHING = Body()  # a write that takes no fields: {} or no body


def takes(body: Body):
    """Declare the body a route's action takes (``declared`` reads it back)."""

    def mark(fn):
        fn.takes = body
        return fn

    return mark


def declared(action) -> Body | None:
    """The body an action declared with ``takes``, or None."""
    body = getattr(action, "takes", None)
    return body if isinstance(body, Body) else None
