"""Code a task's prompt carries itself, numbered as its file numbers it.

Some tasks hold the code under review in the prompt instead of attaching a file: each line
written with its line number in the file, a bar and the text (``112|     tokens = ...``), as
this suite numbers the files it attaches. Such a prompt is sent as written; its numbers are
what a ``FAULT: line N`` answer names, so a bug's key is read against them.

Invariants: the code is the prompt's first run of at least ``MIN_RUN`` lines numbered one after
another (``86|`` then ``87|`` ...); the run may start at any number (an excerpt of a file); a
stray numbered line, or numbers that skip, end the run. A prompt without such a run carries no
code.
"""

from __future__ import annotations

import re

MIN_RUN = 2
_NUMBERED = re.compile(r"^ *(\d{1,7})\|(?: |$)")


def numbered(prompt: str) -> dict[int, str]:
    """The prompt's code, by line number: each line as the prompt shows it (number and bar
    included); empty when the prompt carries none."""
    run: dict[int, str] = {}
    last = 0
    for line in prompt.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        m = _NUMBERED.match(line)
        n = int(m.group(1)) if m else None
        if n is not None and run and n == last + 1:
            run[n], last = line, n
            continue
        if len(run) >= MIN_RUN:
            return run
        run, last = ({n: line}, n) if n is not None else ({}, 0)
    return run if len(run) >= MIN_RUN else {}
