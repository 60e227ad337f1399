"""The blind judge of a race: the tool difference, the masking, the question and its answer.

Invariants:

* The tool difference is computed here, in code, from the two runs' tool calls: every reference
  call the run did not make with the same arguments is ``skipped`` or (same tool, other
  arguments) ``different``; every run call left over is ``extra``. Order is not compared.
* Nothing the judge reads names a model: every alias, served id, family, endpoint name and
  endpoint URL (and its host) of every model in the race is replaced, case-insensitively and
  wherever it stands as a whole token, by ``[model]`` or ``[endpoint]`` in every text: task,
  rubric, both transcripts and the tool difference. The two runs are labelled only "reference"
  and "candidate".
* A judgement is accepted only as a JSON object with integer ``accuracy`` in 0..7, integer
  ``shown_work`` in 0..3 and a string ``reason``. Anything else is asked once more, with the
  problem named; a second failure is a judge failure, never a guessed score.
* Any tool difference caps accuracy at ``CAP`` (at least 3 points off the top), whatever the
  judge said: code enforces what the rubric promises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from panelist.metrics.store import jsonwire
from panelist.metrics.roster.roster import Endpoint, Model
from panelist.metrics.race.transcript import as_text

MAX_ACCURACY, MAX_SHOWN_WORK = 7, 3
CAP = 4            # the most accuracy a run with any tool difference can keep
ASKS = 2           # a judge is asked at most twice for one run

SCHEMA = {
    "type": "object",
    "properties": {
        "accuracy": {"type": "integer", "minimum": 0, "maximum": MAX_ACCURACY},
        "shown_work": {"type": "integer", "minimum": 0, "maximum": MAX_SHOWN_WORK},
        "reason": {"type": "string"},
    },
    "required": ["accuracy", "shown_work", "reason"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {"type": "json_schema",
                   "json_schema": {"name": "judgement", "strict": True, "schema": SCHEMA}}

INSTRUCTIONS = f"""\
You judge one run of a job against a reference run of the same job, on the same input.
Read the task, the rubric, both runs in full and the tool difference, which was computed \
exactly by code.

Score the candidate run:
- accuracy, 0 to {MAX_ACCURACY}: does its final output do what the task asks, as well as the \
reference does? A tool called wrongly, a tool skipped, or a tool's result misread costs at \
least 3 points.
- shown_work, 0 to {MAX_SHOWN_WORK}: does the run show how it got there (the steps and the \
facts it relied on)?

Answer with one JSON object and nothing else:
{{"accuracy": <integer>, "shown_work": <integer>, "reason": "<one or two sentences>"}}"""


# -- the tool difference ---------------------------------------------------------------------------
def _key(arguments) -> str:
    return jsonwire.dumps(arguments, sort_keys=True, separators=(",", ":"), default=repr)


def tool_difference(reference: list[dict], run: list[dict]) -> dict:
    """``{"skipped", "different", "extra"}`` of ``run``'s tool calls against ``reference``'s;
    each call is ``{"tool", "arguments"}``."""
    left = list(run)
    unmatched = []
    for call in reference:   # the same tool with the same arguments: no difference
        same = next((i for i, c in enumerate(left) if c["tool"] == call["tool"]
                     and _key(c["arguments"]) == _key(call["arguments"])), None)
        if same is None:
            unmatched.append(call)
        else:
            del left[same]
    skipped, different = [], []
    for call in unmatched:   # the same tool with other arguments: called differently
        other = next((i for i, c in enumerate(left) if c["tool"] == call["tool"]), None)
        if other is None:
            skipped.append({"tool": call["tool"], "arguments": call["arguments"]})
        else:
            different.append({"tool": call["tool"], "reference": call["arguments"],
                              "run": left.pop(other)["arguments"]})
    extra = [{"tool": c["tool"], "arguments": c["arguments"]} for c in left]
    return {"skipped": skipped, "different": different, "extra": extra}


def differs(diff: dict | None) -> bool:
    return bool(diff) and any(diff.get(k) for k in ("skipped", "different", "extra"))


def describe(diff: dict) -> str:
    if not differs(diff):
        return "None: the candidate made the same tool calls with the same arguments."
    lines = [f"- skipped: {d['tool']} with {as_text(d['arguments'])}" for d in diff["skipped"]]
    lines += [f"- different arguments: {d['tool']} with {as_text(d['run'])} where the reference "
              f"used {as_text(d['reference'])}" for d in diff["different"]]
    lines += [f"- extra: {d['tool']} with {as_text(d['arguments'])}" for d in diff["extra"]]
    return "\n".join(lines)


# -- masking ---------------------------------------------------------------------------------------
class Masker:
    """Replaces every identifier of the given models and endpoints in a text."""

    def __init__(self, models: Iterable[Model], endpoints: Iterable[Endpoint]):
        names: dict[str, str] = {}
        for ep in endpoints:
            host = re.sub(r"^[a-z]+://", "", ep.base_url, flags=re.I).split("/")[0]
            for name in (ep.base_url, ep.base_url.split("://")[-1], host,
                         host.rsplit(":", 1)[0], ep.name):
                names.setdefault(name.lower(), "[endpoint]")
        for m in models:   # a model's names win where an endpoint shares one
            for name in (m.alias, m.served, m.family):
                names[name.lower()] = "[model]"
        names.pop("", None)
        self._names = names
        # longest first, so "sim-swift-2" is masked whole before "sim-swift" could be
        ordered = sorted(names, key=len, reverse=True)
        self._pattern = re.compile(
            r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, ordered)) + r")(?![A-Za-z0-9])",
            re.I) if ordered else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: self._names[m.group(0).lower()], text)


# -- the question and the answer -------------------------------------------------------------------
def messages(task: str, rubric: str | None, reference: str, candidate: str, diff: dict,
             mask: Masker) -> list[dict]:
    body = "\n\n".join([
        "# Task\n" + mask(task),
        "# Rubric\n" + mask(rubric or "No rubric beyond the task: judge by the task itself."),
        "# Reference run\n" + mask(reference),
        "# Candidate run\n" + mask(candidate),
        "# Tool difference (candidate against reference, computed by code)\n"
        + mask(describe(diff)),
    ])
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": body}]


def again(previous: list[dict], said: str, problem: str) -> list[dict]:
    """The question asked once more, naming what was wrong with the first answer."""
    return previous + [
        {"role": "assistant", "content": said},
        {"role": "user", "content": f"That answer cannot be used: {problem}. Answer again with "
                                    "only the JSON object {\"accuracy\", \"shown_work\", "
                                    "\"reason\"}."}]


def parse(text: str) -> tuple[dict | None, str]:
    """``(judgement, "")`` or ``(None, what is wrong with it)``."""
    try:
        value = jsonwire.loads(text.strip(), strict=True)
    except ValueError:
        return None, "it is not a JSON object"
    if not isinstance(value, dict):
        return None, "it is not a JSON object"
    out = {}
    for key, top in (("accuracy", MAX_ACCURACY), ("shown_work", MAX_SHOWN_WORK)):
        v = value.get(key)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            return None, f"'{key}' must be a whole number from 0 to {top}"
        if not 0 <= v <= top:
            return None, f"'{key}' is {v}, outside 0 to {top}"
        out[key] = v
    if not isinstance(value.get("reason"), str):
        return None, "'reason' must be a string"
    out["reason"] = value["reason"]
    return out, ""


@dataclass
class Judgement:
    accuracy: int | None = None
    shown_work: int | None = None
    reason: str = ""
    said: int | None = None    # the accuracy the judge gave, when code capped it
    error: str = ""            # why there is no judgement
    asks: int = 0

    @property
    def total(self) -> int | None:
        return None if self.accuracy is None else self.accuracy + self.shown_work

    def cap(self, diff: dict) -> "Judgement":
        if self.accuracy is not None and differs(diff) and self.accuracy > CAP:
            self.said, self.accuracy = self.accuracy, CAP
        return self
