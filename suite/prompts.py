"""A task as the messages a model is sent.

Invariants: the key, ``why`` and provenance are never sent; a bug and its control get the very
same instructions (the model is never told which kind it holds, and is told that the code may
have no fault at all); the answer form asked for is exactly what ``answers`` reads.
"""

from __future__ import annotations

import hashlib

from panelist.suite import excerpt
from panelist.suite.focus import Focus
from panelist.suite.tasks import Task, focus_of as _focus_of

REVIEW = (
    "Review the code above. It may contain one fault (a statement that makes it behave wrongly) "
    "or none at all. The number at the left of each line is that line's number in the file.\n"
    "Your first line must be exactly one of:\n"
    "FAULT: line N        (the faulty statement's line; a statement on several lines: "
    "FAULT: line N, M)\n"
    "NO FAULT\n"
    "Give nothing else on that line; explain on the lines after it if you wish."
)

CLAIM = (
    "Is the claim above true of the code shown? The number at the left of each line is that "
    "line's number in the file.\n"
    "Your first line must be exactly one of:\n"
    "VERDICT: TRUE\n"
    "VERDICT: FALSE\n"
    "Give nothing else on that line; explain on the lines after it if you wish."
)


def focus_of(task: Task, tasks: dict[str, Task]) -> Focus:
    """The lines each attached file's excerpt must hold (``tasks.focus_of``)."""
    return _focus_of(task, tasks)


def text(task: Task, epoch: int, focus: Focus = ()) -> str:
    """The user message: the task's prompt, its files (each long one excerpted around its own
    focus lines), then the answer form."""
    if focus and not isinstance(focus[0], tuple):
        focus = (tuple(focus),)  # a bare tuple of lines is the first file's, as it once was
    files = [
        excerpt.render(
            f.path,
            f.text,
            focus=focus[i] if i < len(focus) else (),
            seed=f"{task.pair}|{epoch}|{f.path}",
        )
        for i, f in enumerate(task.files)
    ]
    rule = CLAIM if task.kind == "claim" else REVIEW
    return "\n".join([task.prompt.strip(), "", *files, rule])


def messages(task: Task, epoch: int, focus: Focus = ()) -> list[dict]:
    return [{"role": "user", "content": text(task, epoch, focus)}]


def digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()[:16]
