"""``panelist suite run --demo``: simulated models that answer the suite's tasks offline.

No model is consulted. Each simulated model gets rules keyed on the prompt it will be sent
(``scripts/sim_upstream.py``'s ``rules`` behaviour): a claim is recognised by its prompt, a bug
by its faulty line as the prompt numbers it, its control by the original line at the same
place. What each model answers is scripted here, deterministically, from the keys, so the
report shows differences:

* ``sim-careful`` thinks aloud in a ``<think>`` block and fences its verdict; right on about
  nine tasks in ten;
* ``sim-steady`` answers plainly; right on about seven in ten;
* ``sim-swift`` never looks: ``NO FAULT`` and ``VERDICT: TRUE`` whatever it is asked (high on
  controls, nothing on pairs);
* ``sim-flaky`` is right on about six in ten, and hedges one claim (both verdicts:
  unparseable);
* ``sim-vision`` answers plainly; right on about eight in ten.

Every model of the demo roster is scripted: the run's simulator answers only the models it
knows, so a model left out here would fail every task as "model not found".

Every explanation line says the answer is simulated. No call fails, so two demo runs on the
same tasks give the same report.
"""

from __future__ import annotations

import hashlib

from panelist.suite import excerpt
from panelist.suite.tasks import Task, bug_of, control_of

MODELS = ("sim-careful", "sim-steady", "sim-swift", "sim-flaky", "sim-vision")
LATENCY = {
    "sim-careful": 0.4,
    "sim-steady": 0.2,
    "sim-swift": 0.05,
    "sim-flaky": 0.1,
    "sim-vision": 0.2,
}
RIGHT_IN_TEN = {"sim-careful": 9, "sim-steady": 7, "sim-flaky": 6, "sim-vision": 8}


def _luck(model: str, task: Task) -> int:
    """0..9, fixed per model and pair, so a bug and its control share their fate."""
    return hashlib.sha256(f"{model}|{task.pair}".encode()).digest()[0] % 10


def marker(task: Task, known: dict[str, Task]) -> str | None:
    """Text that occurs in this task's prompt and in no other task's of its pair."""
    if task.kind == "claim":
        return task.prompt.strip()
    bug, control = bug_of(task, known), control_of(task, known)
    if bug is None or control is None or bool(bug.files) != bool(control.files):
        return None
    bug_lines, ctl_lines = bug.code, control.code  # a prompt's own code: as it shows them
    for n in bug.lines:
        theirs, ours = bug_lines.get(n), ctl_lines.get(n)
        if theirs != ours:
            mine = theirs if task.kind == "bug" else ours
            if mine is None:
                return None
            return f"\n{excerpt.numbered_line(n, mine) if task.files else mine}\n"
    return None


def answer(model: str, task: Task, known: dict[str, Task], hedge: bool = False) -> str:
    """What ``model`` answers to ``task``: its scripted verdict and a simulated explanation."""
    note = f"(simulated answer of {model}; no model was consulted)"
    if hedge:
        return f"VERDICT: TRUE\nOn reflection it could go either way.\nVERDICT: FALSE\n{note}"
    bug = bug_of(task, known)
    spot = bug.lines[0] if bug is not None else 1
    if model == "sim-swift":
        verdict = "VERDICT: TRUE" if task.kind == "claim" else "NO FAULT"
        return f"{verdict}\n{note}"
    right = _luck(model, task) < RIGHT_IN_TEN.get(model, 5)
    if task.kind == "claim":
        verdict = f"VERDICT: {'TRUE' if task.answer == right else 'FALSE'}"
    elif task.kind == "bug":
        verdict = (
            f"FAULT: line {spot}"
            if right
            else ("NO FAULT" if _luck(model, task) % 2 else f"FAULT: line {spot + 7}")
        )
    else:
        verdict = "NO FAULT" if right else f"FAULT: line {spot}"
    if model == "sim-careful":
        return f"<think>Reading the code line by line.</think>\n```\n{verdict}\n```\n{note}"
    return f"{verdict}\n{note}"


def behaviours(tasks: list[Task], known: dict[str, Task]) -> dict[str, dict]:
    """The simulated upstream's models for a demo run of ``tasks``."""
    return {m: {"latency": LATENCY[m], "rules": r} for m, r in rules(tasks, known).items()}


def rules(tasks: list[Task], known: dict[str, Task]) -> dict[str, list[dict]]:
    """Per simulated model, its ``rules`` behaviour for these tasks."""
    claims = [t for t in tasks if t.kind == "claim"]
    hedged = claims[0].id if claims else None
    out: dict[str, list[dict]] = {m: [] for m in MODELS}
    for task in tasks:
        text = marker(task, known)
        if text is None:
            continue  # answered as the model answers anything: unparseable, and so flagged
        for model in MODELS:
            out[model].append(
                {
                    "contains": text,
                    "answer": answer(
                        model, task, known, hedge=model == "sim-flaky" and task.id == hedged
                    ),
                }
            )
    return out
