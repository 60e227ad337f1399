"""A run's tool calls against the reference run's, in code, compared by value, and the
difference in the words the judge reads.

Invariants:

* Arguments are data, compared after the tool's own schema coercion (``coerce``: ``"42"`` is
  42 for an ``integer``, 42 is ``"42"`` for a ``string``, nothing that loses information), never
  as text: key order, ``42`` against ``42.0`` and spacing make no difference; ``true`` is never 1.
  The order of the calls is not compared.
* Calls are numbered from 1 in the order each run made them (``call`` for the run's,
  ``reference_call`` for the reference's): the numbers the runs' blocks show the judge.
* Calls pair up in this order: the same tool with the same arguments (no difference); the same
  tool whose call returned the very same result (``equivalent``: reported, not counted); the
  same tool with other arguments (``different``, with ``gaps``: which arguments differ, by
  their place in each call's arguments as shown, keys sorted). A reference call left over is
  ``skipped``.
* A run's call left over to a tool the reference never called is ``new_tool``, counted whatever
  its result: code cannot tell a harmless call from one that deletes an order. The race may
  allow such calls (``allow``: ``True`` for any tool, or a list of tool names); an allowed one
  is ``allowed``: reported, not counted.
* A run's call left over to a tool the reference also called is ``extra`` when its result shows
  in what the run did after it (its output, or a later call's arguments), else ``unused``:
  reported, not counted. A result shows when one of its distinctive values (a string of 3 or
  more characters, a number of 2 or more digits, a word of 4 or more letters of a result that
  is not JSON) that no other result of either run and not the task holds stands as a word in
  that text.
* ``differs`` counts ``skipped``, ``different``, ``extra`` and ``new_tool``: what caps a run's
  accuracy.
* ``describe`` is the block the judge is told code wrote, so it holds only code's own words,
  numbers, and tool names that did not come from the candidate: a name the reference called
  (the reference is the job's own run, its tools the job's own) or one the race's allow list
  names. No tool name the candidate alone chose, and no argument, key or result of either run,
  is ever written there: those stay in the runs' own blocks, where the judge finds a call by
  its number. Whenever the candidate made a call the reference did not, the block says so; it
  never opens with "no difference" then.
"""

from __future__ import annotations

import math
import re

from panelist.metrics.race.transcript import arguments_of, as_text
from panelist.metrics.store import jsonwire

COUNTED = ("skipped", "different", "extra", "new_tool")
NOTED = ("equivalent", "unused", "allowed")
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS = re.compile(r"[^\W_]{4,}|\d{2,}")


# -- coercion --------------------------------------------------------------------------------------
def _types(schema: dict) -> list[str]:
    kind = schema.get("type")
    return (
        [kind]
        if isinstance(kind, str)
        else [k for k in kind if isinstance(k, str)]
        if isinstance(kind, list)
        else []
    )


def _is(value, kind: str) -> bool:
    return {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "object": isinstance(value, dict),
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
    elif (
        kind == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false")
    ):
        return value.strip().lower() == "true"
    elif (
        kind == "string"
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    ):
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
        return {
            k: coerce(props.get(k, extra if isinstance(extra, dict) else None), v)
            for k, v in value.items()
        }
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
        return ("number", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, list):
        return ("list", tuple(map(_canon, value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    return ("other", repr(value))


# -- what the race allows --------------------------------------------------------------------------
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_allow(allow):
    """``allow`` as a race keeps it: None (an extra call to a tool the reference did not call
    counts), True (no such call counts) or a tuple of the tool names whose extra calls do not
    count; ValueError saying what to give otherwise."""
    if allow is None or allow is False:
        return None
    if allow is True:
        return True
    if isinstance(allow, (list, tuple, set, frozenset)) and all(
        isinstance(n, str) and _TOOL_NAME.fullmatch(n.strip()) for n in allow
    ):
        names = tuple(dict.fromkeys(n.strip() for n in allow))
        return names or None
    raise ValueError(
        "allow_extra_tools is true (a call to any tool the reference did not call "
        "does not count against accuracy) or a list of tool names (letters, digits, "
        f"'_', '-' or '.', at most 64 each) whose extra calls do not count, not "
        f"{allow!r}"
    )


def allow_text(allow) -> str:
    """What ``allow`` lets a run do, for people and for the judge."""
    allow = check_allow(allow)
    if allow is None:
        return "none: every call to a tool the reference did not call counts"
    if allow is True:
        return "calls to any tool the reference did not call"
    return "calls to " + ", ".join(allow)


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
        elif (
            isinstance(item, (int, float))
            and not isinstance(item, bool)
            and len(str(item).lstrip("-")) >= 2
        ):
            out.add(str(item))
    return out


def _shows(value: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text) is not None


def _gaps(reference, run) -> dict | None:
    """Which arguments of two calls of one tool differ, by place (from 1) among each call's
    keys in sorted order, as a run's block shows them; None unless both are JSON objects."""
    if not isinstance(reference, dict) or not isinstance(run, dict):
        return None
    mine, theirs = sorted(run, key=str), sorted(reference, key=str)
    return {
        "of": len(mine),
        "changed": [
            i
            for i, k in enumerate(mine, 1)
            if k in reference and _canon(run[k]) != _canon(reference[k])
        ],
        "added": [i for i, k in enumerate(mine, 1) if k not in reference],
        "of_reference": len(theirs),
        "missing": [i for i, k in enumerate(theirs, 1) if k not in run],
    }


def tool_difference(
    reference: list[dict], run: list[dict], output: str | None = "", task: str = "", allow=None
) -> dict:
    """``{"skipped", "different", "extra", "new_tool", "equivalent", "unused", "allowed"}`` of
    ``run``'s tool calls against ``reference``'s (see the module docstring). Each call is
    ``{"tool", "arguments"}`` with ``used`` (the arguments as the tool was called with them,
    when coercion changed them) and ``returned`` or ``raised``; ``output`` is the run's final
    output, ``task`` what the job was given, ``allow`` the race's ``allow_extra_tools``."""
    allow = check_allow(allow)
    left = list(range(len(run)))
    unmatched = []
    for r, call in enumerate(reference):  # the same tool with the same arguments: no difference
        same = next(
            (
                i
                for i in left
                if run[i]["tool"] == call["tool"]
                and _canon(_arguments(run[i])) == _canon(_arguments(call))
            ),
            None,
        )
        if same is None:
            unmatched.append(r)
        else:
            left.remove(same)
    equivalent, different, skipped = [], [], []
    for r in unmatched:  # another route to the very same result
        call = reference[r]
        same = next(
            (
                i
                for i in left
                if run[i]["tool"] == call["tool"] and _result(run[i]) == _result(call)
            ),
            None,
        )
        if same is None:
            skipped.append(r)
        else:
            left.remove(same)
            equivalent.append(
                {
                    "tool": call["tool"],
                    "reference": call["arguments"],
                    "run": run[same]["arguments"],
                    "call": same + 1,
                    "reference_call": r + 1,
                }
            )
    for r in skipped[:]:  # the same tool with other arguments: called differently
        call = reference[r]
        other = next((i for i in left if run[i]["tool"] == call["tool"]), None)
        if other is not None:
            left.remove(other)
            skipped.remove(r)
            different.append(
                {
                    "tool": call["tool"],
                    "reference": call["arguments"],
                    "run": run[other]["arguments"],
                    "call": other + 1,
                    "reference_call": r + 1,
                    "gaps": _gaps(_arguments(call), _arguments(run[other])),
                }
            )
    known: set[str] = set()
    for i, call in enumerate([*reference, *run]):
        if i >= len(reference) and i - len(reference) in left:
            continue
        known |= _values(call)
    task_text = (task or "").casefold()
    called = {c["tool"] for c in reference}
    extra: list[dict] = []
    unused: list[dict] = []
    new_tool: list[dict] = []
    allowed: list[dict] = []
    for i in left:
        entry = {"tool": run[i]["tool"], "arguments": run[i]["arguments"], "call": i + 1}
        if run[i]["tool"] not in called:  # what the call did is not code's to know: it counts
            free = allow is True or (allow is not None and run[i]["tool"] in allow)
            (allowed if free else new_tool).append(entry)
            continue
        later = " ".join(as_text(_arguments(c)) for c in run[i + 1 :])
        seen = f"{output or ''}\n{later}".casefold()
        mine = {v for v in _values(run[i]) if v not in known and not _shows(v, task_text)}
        (extra if any(_shows(v, seen) for v in mine) else unused).append(entry)
    return {
        "skipped": [
            {
                "tool": reference[r]["tool"],
                "arguments": reference[r]["arguments"],
                "reference_call": r + 1,
            }
            for r in skipped
        ],
        "different": different,
        "extra": extra,
        "new_tool": new_tool,
        "equivalent": equivalent,
        "unused": unused,
        "allowed": allowed,
    }


def differs(diff: dict | None) -> bool:
    """Whether ``diff`` holds a difference that counts (caps accuracy)."""
    return diff is not None and any(diff.get(k) for k in COUNTED)


# -- the difference as the judge reads it ----------------------------------------------------------
PLACES = 10  # argument places one line of the judge's block lists before counting the rest


def _places(places: list[int], of: int) -> str:
    said = [str(p) for p in places[:PLACES]]
    if len(places) > PLACES:
        said.append(f"{len(places) - PLACES} more")
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
    return f"argument{'s' if len(said) > 1 else ''} {listed} of {of}"


def _gap_text(gaps: dict | None) -> str:
    if not gaps or not (gaps["changed"] or gaps["added"] or gaps["missing"]):
        return "its arguments differ from the reference call's"
    parts = []
    if gaps["changed"]:
        parts.append(
            f"its {_places(gaps['changed'], gaps['of'])} "
            f"{'has' if len(gaps['changed']) == 1 else 'have'} another value"
        )
    if gaps["added"]:
        parts.append(
            f"its {_places(gaps['added'], gaps['of'])} "
            f"{'is' if len(gaps['added']) == 1 else 'are'} not among the reference "
            "call's"
        )
    if gaps["missing"]:
        parts.append(
            f"the reference call's {_places(gaps['missing'], gaps['of_reference'])} "
            f"{'is' if len(gaps['missing']) == 1 else 'are'} missing from it"
        )
    return "; ".join(parts)


def describe(diff: dict, allow=None) -> str:
    """The difference as the judge reads it, in the block it is told code wrote: what counts,
    then what was noted and why not, each call by its number in its run's block. Only a tool
    name the reference called, or one ``allow`` names, is written here (module docstring)."""
    allow = check_allow(allow)
    named = set(allow) if isinstance(allow, tuple) else set()
    counted = [
        f"- reference call {d['reference_call']} ({d['tool']}) was skipped: no call of "
        "the candidate matches it."
        for d in diff.get("skipped") or ()
    ]
    counted += [
        f"- candidate call {d['call']} calls {d['tool']}, as reference call "
        f"{d['reference_call']} does, with other arguments: {_gap_text(d.get('gaps'))}."
        for d in diff.get("different") or ()
    ]
    counted += [
        f"- candidate call {d['call']} is a further call to {d['tool']}, beyond the "
        "reference's, and its result shows in what the candidate did after it."
        for d in diff.get("extra") or ()
    ]
    counted += [
        f"- candidate call {d['call']} calls a tool the reference did not call (read its "
        "name in the candidate's block); the race does not allow extra calls to it."
        for d in diff.get("new_tool") or ()
    ]
    noted = [
        f"- candidate call {d['call']} calls {d['tool']} with other arguments than "
        f"reference call {d['reference_call']}, and the tool returned the same."
        for d in diff.get("equivalent") or ()
    ]
    noted += [
        f"- candidate call {d['call']} is a further call to {d['tool']}, beyond the "
        "reference's; its result does not show in the candidate's output."
        for d in diff.get("unused") or ()
    ]
    noted += [
        f"- candidate call {d['call']} calls "
        + (d["tool"] if d["tool"] in named else "a tool (read its name in the candidate's block)")
        + ", which the reference did not call; the race allows extra calls to it."
        for d in diff.get("allowed") or ()
    ]
    further = bool(diff.get("unused") or diff.get("allowed"))
    lines = ['Calls are named by their numbers in the runs\' blocks ("Tool call N").']
    if counted:
        lines += ["Differences that count against accuracy:", *counted]
    elif further:
        lines.append(
            "No difference that counts, but the candidate made more calls than the "
            "reference: it made each of the reference's calls, with the same arguments "
            "or the same results, and the further calls below."
        )
    elif noted:
        lines.append(
            "No difference that counts: the candidate made each of the reference's "
            "calls, with the same arguments or the same results, and no other call."
        )
    else:
        lines.append(
            "No difference: the candidate made each of the reference's calls, with "
            "the same arguments, and no other call."
        )
    if noted:
        lines += ["Noted, not counted:", *noted]
    if allow is not None:
        lines.append(f"The race allows extra {allow_text(allow)}.")
    return "\n".join(lines)


# -- the difference as people read it --------------------------------------------------------------
def summary(diff: dict | None) -> str:
    """One line for a person reading the report (tool names quoted as JSON, whoever chose
    them); "" when the calls do not differ at all."""
    if not diff:
        return ""

    def name(d: dict) -> str:
        return jsonwire.dumps(str(d["tool"]))

    counted = [
        f"reference call {d['reference_call']} {name(d)} skipped" for d in diff.get("skipped") or ()
    ]
    counted += [
        f"call {d['call']} {name(d)} with other arguments than reference call {d['reference_call']}"
        for d in diff.get("different") or ()
    ]
    counted += [
        f"call {d['call']} {name(d)} a further call whose result was used"
        for d in diff.get("extra") or ()
    ]
    counted += [
        f"call {d['call']} {name(d)} a tool the reference did not call"
        for d in diff.get("new_tool") or ()
    ]
    noted = [
        f"call {d['call']} {name(d)} other arguments, same result as reference call "
        f"{d['reference_call']}"
        for d in diff.get("equivalent") or ()
    ]
    noted += [
        f"call {d['call']} {name(d)} a further call whose result was not used"
        for d in diff.get("unused") or ()
    ]
    noted += [
        f"call {d['call']} {name(d)} a tool the reference did not call, allowed"
        for d in diff.get("allowed") or ()
    ]
    parts = ([f"counted: {'; '.join(counted)}"] if counted else []) + (
        [f"noted: {'; '.join(noted)}"] if noted else []
    )
    return " · ".join(parts)
