"""A run's tool calls against the reference run's, in code, compared by value.

Invariants:

* Arguments are data, compared after the tool's own schema coercion (``coerce``: ``"42"`` is
  42 for an ``integer``, 42 is ``"42"`` for a ``string``, nothing that loses information), never
  as text: key order, ``42`` against ``42.0`` and spacing make no difference; ``true`` is never 1.
  The order of the calls is not compared.
* Calls pair up in this order: the same tool with the same arguments (no difference); the same
  tool whose call returned the very same result (``equivalent``: reported, not counted); the
  same tool with other arguments (``different``). A reference call left over is ``skipped``.
* A run's call left over is ``extra`` when its result shows in what the run did after it (its
  output, or a later call's arguments), else ``unused``: reported, not counted. A result shows
  when one of its distinctive values (a string of 3 or more characters, a number of 2 or more
  digits, a word of 4 or more letters of a result that is not JSON) that no other result of
  either run and not the task holds stands as a word in that text.
* ``differs`` counts ``skipped``, ``different`` and ``extra``: what caps a run's accuracy.
"""

from __future__ import annotations

import math
import re

from panelist.metrics.race.transcript import arguments_of, as_text

COUNTED = ("skipped", "different", "extra")
NOTED = ("equivalent", "unused")
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS = re.compile(r"[^\W_]{4,}|\d{2,}")


# -- coercion --------------------------------------------------------------------------------------
def _types(schema: dict) -> list[str]:
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) else [k for k in kind if isinstance(k, str)] \
        if isinstance(kind, list) else []


def _is(value, kind: str) -> bool:
    return {"string": isinstance(value, str), "boolean": isinstance(value, bool),
            "null": value is None, "object": isinstance(value, dict),
            "array": isinstance(value, list),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            }.get(kind, False)


def _to(value, kind: str):
    """``value`` as ``kind`` when that loses nothing, else a sentinel (``_NO``)."""
    if kind == "integer":
        if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            return int(value.strip())
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif kind == "number" and isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        number = float(value.strip())
        if math.isfinite(number):
            return int(number) if _INTEGER.fullmatch(value.strip()) else number
    elif kind == "boolean" and isinstance(value, str) and value.strip().lower() in ("true",
                                                                                   "false"):
        return value.strip().lower() == "true"
    elif kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value):
        return str(value)
    return _NO


_NO = object()


def coerce(schema, value):
    """``value`` as the JSON schema ``schema`` types it, where that loses nothing (see the
    module docstring); anything else is left as it is, for the tool to refuse."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        return {k: coerce(props.get(k, extra if isinstance(extra, dict) else None), v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [coerce(schema.get("items"), v) for v in value]
    kinds = _types(schema)
    if not kinds or any(_is(value, k) for k in kinds):
        return value
    for kind in kinds:
        out = _to(value, kind)
        if out is not _NO:
            return out
    return value


def _canon(value):
    """``value`` as one comparable form: numbers by value, never a boolean as a number."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", int(value) if isinstance(value, float) and value.is_integer()
                else value)
    if isinstance(value, list):
        return ("list", tuple(map(_canon, value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    return ("other", repr(value))


# -- the difference --------------------------------------------------------------------------------
def _arguments(call: dict):
    return call.get("used", call["arguments"])


def _result(call: dict):
    """What the call gave, comparable: ``("returned", data)`` or ``("raised", text)``."""
    if "raised" in call:
        return ("raised", call["raised"])
    return ("returned", _canon(arguments_of(call.get("returned"))))


def _values(call: dict) -> set[str]:
    """The values of a call's result a text could have taken from it, casefolded."""
    if "raised" in call:
        return set()
    data = arguments_of(call.get("returned"))
    if isinstance(data, str):
        return {w.casefold() for w in _WORDS.findall(data)}
    out: set[str] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and len(item.strip()) >= 3:
            out.add(item.strip().casefold())
        elif isinstance(item, (int, float)) and not isinstance(item, bool) \
                and len(str(item).lstrip("-")) >= 2:
            out.add(str(item))
    return out


def _shows(value: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text) is not None


def tool_difference(reference: list[dict], run: list[dict], output: str | None = "",
                    task: str = "") -> dict:
    """``{"skipped", "different", "extra", "equivalent", "unused"}`` of ``run``'s tool calls
    against ``reference``'s. Each call is ``{"tool", "arguments"}`` with ``used`` (the arguments
    as the tool was called with them, when coercion changed them) and ``returned`` or
    ``raised``; ``output`` is the run's final output, ``task`` what the job was given."""
    left = list(range(len(run)))
    unmatched = []
    for call in reference:   # the same tool with the same arguments: no difference
        same = next((i for i in left if run[i]["tool"] == call["tool"]
                     and _canon(_arguments(run[i])) == _canon(_arguments(call))), None)
        if same is None:
            unmatched.append(call)
        else:
            left.remove(same)
    equivalent, different, skipped = [], [], []
    for call in unmatched:   # another route to the very same result
        same = next((i for i in left if run[i]["tool"] == call["tool"]
                     and _result(run[i]) == _result(call)), None)
        if same is None:
            skipped.append(call)
        else:
            left.remove(same)
            equivalent.append({"tool": call["tool"], "reference": call["arguments"],
                               "run": run[same]["arguments"]})
    for call in skipped[:]:   # the same tool with other arguments: called differently
        other = next((i for i in left if run[i]["tool"] == call["tool"]), None)
        if other is not None:
            left.remove(other)
            skipped.remove(call)
            different.append({"tool": call["tool"], "reference": call["arguments"],
                              "run": run[other]["arguments"]})
    known: set[str] = set()
    for i, call in enumerate([*reference, *run]):
        if i >= len(reference) and i - len(reference) in left:
            continue
        known |= _values(call)
    task_text = (task or "").casefold()
    extra, unused = [], []
    for i in left:
        later = " ".join(as_text(_arguments(c)) for c in run[i + 1:])
        seen = f"{output or ''}\n{later}".casefold()
        mine = {v for v in _values(run[i]) if v not in known and not _shows(v, task_text)}
        entry = {"tool": run[i]["tool"], "arguments": run[i]["arguments"]}
        (extra if any(_shows(v, seen) for v in mine) else unused).append(entry)
    return {"skipped": [{"tool": c["tool"], "arguments": c["arguments"]} for c in skipped],
            "different": different, "extra": extra, "equivalent": equivalent,
            "unused": unused}


def differs(diff: dict | None) -> bool:
    """Whether ``diff`` holds a difference that counts (caps accuracy)."""
    return bool(diff) and any(diff.get(k) for k in COUNTED)


def describe(diff: dict) -> str:
    """The difference as the judge reads it: what counts, then what was noted and why not."""
    lines = [f"- skipped: {d['tool']} with {as_text(d['arguments'])}" for d in diff["skipped"]]
    lines += [f"- different arguments: {d['tool']} with {as_text(d['run'])} where the reference "
              f"used {as_text(d['reference'])}" for d in diff["different"]]
    lines += [f"- extra: {d['tool']} with {as_text(d['arguments'])}" for d in diff["extra"]]
    if not lines:
        lines = ["None: the candidate made the reference's tool calls, with the same arguments "
                 "or the same results."]
    noted = [f"- {d['tool']} with {as_text(d['run'])} where the reference used "
             f"{as_text(d['reference'])}: the tool returned the same" for d in
             diff.get("equivalent") or ()]
    noted += [f"- extra {d['tool']} with {as_text(d['arguments'])}: its result does not show in "
              "the candidate's output" for d in diff.get("unused") or ()]
    if noted:
        lines += ["Noted, not counted as differences:", *noted]
    return "\n".join(lines)
