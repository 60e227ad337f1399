"""``panelist suite mine``: draft claim tasks from the claims verdicts found real or false.

A verdict lists the claims of an answer that the judge checked against the real work: ``real`` ones
and ``false`` ones (docs/guide.md, "A first panel and its verdicts"). Each becomes a claim task
whose prompt states the claim and whose key is ``true`` (found real) or ``false`` (found false).
The code the claim was about comes from the request the panel answered: every file in its logged
prompt under a ``===== FILE: <path> =====`` header becomes a fixture (a file shown with the suite's
numbered margin, from line 1 on, is stored without it); a prompt without such headers is attached
whole as ``request.txt``.

How the logs are read: evidence.jsonl is streamed once, line by line, remembering for each
judged call only the byte offset of its latest verdict line (the last verdict wins); then each
of those lines is read at its offset, and its panel's calls.jsonl line is found through the
ledger's index. Memory holds one offset per judged call, never a log.

Invariants: a task's id names the panel and digests the call and the claim's text, so mining
twice writes nothing new. When a newer verdict moves a claim to the other list, its task is
rewritten with the new key while it is still a draft; a task someone reviewed (``draft`` set
to false) is never touched, and is reported instead. Every task written is a draft.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from typing import Any
from pathlib import Path

from panelist.metrics.store import jsonl
from panelist.metrics.home import open_home
from panelist.suite import drafts
from panelist.suite.taskfiles import MAX_FILE, MAX_TOTAL

HELP = "turn the claims verdicts found real or false into draft claim tasks"
LICENSE = "user's prompts"
HEADER = re.compile(r"^===== FILE: (.+?) =====[ \t]*\r?$", re.M)
NUMBERED = re.compile(r"^ *(\d+)\| ?(.*)$")  # the suite's margin: "  153| code"
REQUEST = "request.txt"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", metavar="DIR", help="write the tasks here (default: the data folder's suite/tasks)"
    )
    parser.add_argument(
        "--license",
        metavar="TEXT",
        default=LICENSE,
        help=f"the code's license, recorded in each task (default: {LICENSE})",
    )


def run(args, out) -> int:
    """The command: mine the data folder's verdicts, then print what was made."""
    home = open_home(args.data)
    root = drafts.out_dir(home, args.out)
    report = mine(home, root, license=args.license)
    if out.as_json:
        out.result(report)
        return 0
    print(summary(report))
    for tid in report["reviewed"]:
        print(
            f"left alone: {tid} was reviewed, and a newer verdict says the opposite; check "
            "it again",
            file=sys.stderr,
        )
    return 0


def summary(report: dict) -> str:
    text = (
        f"{report['claims']} claim(s) in {report['verdicts']} verdict(s) with claims: "
        f"{report['written']} task(s) written, {report['present']} already there, "
        f"{report['updated']} updated (a newer verdict changed the key) in {report['out']}"
    )
    if report["missing"]:
        text += (
            f"\n{report['missing']} claim(s) skipped: their panel is not in calls.jsonl "
            "(still running, or the log was removed)"
        )
    if report["too_large"]:
        text += (
            f"\n{report['too_large']} claim(s) skipped: a file of their request is over "
            f"{MAX_FILE:,} bytes, or its files are over {MAX_TOTAL:,} together (what the "
            "suite loads)"
        )
    if report["written"] or report["updated"]:
        text += '\nevery task is a draft: review it, set "draft": false, and it runs by default'
    return text


# -- the logs ------------------------------------------------------------------------------------


def latest_verdicts(path: Path) -> dict[str, int]:
    """Each judged call's latest verdict line, as its byte offset; read as a stream."""
    found: dict[str, int] = {}
    for start, line in jsonl.lines(path):  # whole lines only: a torn one is left
        if b'"verdict"' not in line:  # most lines are seats: skip them unparsed
            continue
        record = jsonl.parse_line(line)  # None for a foreign line
        if (
            record is not None
            and record.get("kind") == "verdict"
            and isinstance(record.get("call"), str)
        ):
            found[record["call"]] = start
    return found


def files_in(prompt: str) -> list[tuple[str, str]]:
    """The files a prompt carries, each under a ``===== FILE: <path> =====`` header and running
    to the next header or the end; ``(path, text)`` in order."""
    heads = list(HEADER.finditer(prompt))
    out = []
    for head, after in zip(heads, heads[1:] + [None]):
        body = prompt[head.end() : after.start() if after else len(prompt)]
        body = body[1:] if body.startswith("\n") else body
        body = body.rstrip("\n")
        out.append((head.group(1).strip(), _unnumbered(body) + "\n" if body else ""))
    return out


def _unnumbered(body: str) -> str:
    """A file shown with the suite's numbered margin from line 1 on, without the margin;
    anything else (an excerpt, plain text) as it is, so its line numbers stay true."""
    lines = body.split("\n")
    plain = []
    for n, line in enumerate(lines, 1):
        m = NUMBERED.match(line)
        if not m or int(m.group(1)) != n:
            return body
        plain.append(m.group(2))
    return "\n".join(plain)


def fixtures_of(prompt: str) -> dict[str, bytes]:
    """The prompt's files as fixtures under safe, distinct paths (or the request itself)."""
    found = files_in(prompt)
    if not found:
        return {REQUEST: prompt.encode()}
    out: dict[str, bytes] = {}
    for i, (name, text) in enumerate(found, 1):
        path = drafts.safe_path(name) or f"file{i}.txt"
        while path in out:
            stem, dot, ext = path.rpartition(".")
            path = f"{stem}-{i}.{ext}" if dot and "/" not in ext else f"{path}-{i}"
        out[path] = text.encode()
    return out


# -- mining --------------------------------------------------------------------------------------


def task_id(panel: str, call: str, claim: str) -> str:
    digest = hashlib.sha256(f"{call}\0{claim}".encode()).hexdigest()[:10]
    return f"mined-{drafts.slug(panel, 40)}-{digest}"


def claim_task(
    verdict: dict, claim: str, real: bool, fixtures: dict[str, bytes], *, license: str, created: str
) -> dict:
    call = verdict["call"]
    panel = verdict.get("panel") or call.split(".", 1)[0]
    note = (verdict.get("note") or "").strip()
    judged = f"{'found real' if real else 'found false'} by {verdict.get('by') or 'a judge'}"
    return {
        "id": task_id(panel, call, claim),
        "title": claim if len(claim) <= 80 else claim[:79] + "…",
        "kind": "claim",
        "prompt": f"Claim: {claim}",
        "attach": list(fixtures),
        "answer": real,
        "why": f"The claim was {judged} in the verdict on {call}" + (f": {note}" if note else "."),
        "source": f"verdict on call {call} (panel {panel}, model {verdict.get('alias')}, "
        f"{verdict.get('collection') or 'no collection'}, {verdict.get('ts')})",
        "license": license,
        "created": created,
        "draft": True,
    }


def mine(home, root: Path, *, license: str = LICENSE, created: str | None = None) -> dict:
    """Write a draft claim task for every real and false claim of the current verdicts; returns
    ``{out, verdicts, claims, written, present, updated, reviewed: [ids], missing, too_large,
    tasks: [ids]}``."""
    from panelist.metrics.ledger.ledger import Ledger

    created = created or drafts.today()
    report: dict[str, Any] = {
        "out": str(root),
        "verdicts": 0,
        "claims": 0,
        "written": 0,
        "present": 0,
        "updated": 0,
        "reviewed": [],
        "missing": 0,
        "too_large": 0,
        "tasks": [],
    }
    evidence = home.gateway_runs / "evidence.jsonl"
    latest = latest_verdicts(evidence)
    if not latest:
        return report
    with Ledger(home.gateway_runs) as ledger:
        for call, offset in latest.items():
            verdict = jsonl.read_line(evidence, offset)
            if verdict is None:
                continue
            real, false = _claims(verdict.get("real")), _claims(verdict.get("false"))
            both = set(real) & set(false)  # said real and false at once: no key to give
            claims = [(c, True) for c in real if c not in both] + [
                (c, False) for c in false if c not in both
            ]
            if not claims:
                continue
            report["verdicts"] += 1
            report["claims"] += len(claims)
            panel = ledger.panel(call.split(".", 1)[0])
            prompt = panel.get("prompt") if panel else None
            if not isinstance(prompt, str):
                report["missing"] += len(claims)
                continue
            fixtures = fixtures_of(prompt)
            if (
                any(len(b) > MAX_FILE for b in fixtures.values())
                or sum(map(len, fixtures.values())) > MAX_TOTAL
            ):
                report["too_large"] += len(claims)
                continue
            for claim, is_real in claims:
                task = claim_task(
                    verdict, claim, is_real, fixtures, license=license, created=created
                )
                _put(root, task, fixtures, report)
    return report


def _claims(value) -> list[str]:
    if not isinstance(value, list):
        return []
    return list(dict.fromkeys(c.strip() for c in value if isinstance(c, str) and c.strip()))


def _put(root: Path, task: dict, fixtures: dict[str, bytes], report: dict) -> None:
    """Write a task unless it is there with the same key; a draft with the other key is
    rewritten, a reviewed one left alone (and reported)."""
    tid = task["id"]
    report["tasks"].append(tid)
    if not drafts.exists(root, tid):
        if drafts.write(root, task, fixtures):
            report["written"] += 1
        else:
            report["present"] += 1
        return
    current = drafts.read(root, tid)
    if current is not None and current.get("answer") == task["answer"]:
        report["present"] += 1
    elif current is not None and current.get("draft") is False:
        report["reviewed"].append(tid)
    else:
        drafts.write(root, task, fixtures, replace=True)
        report["updated"] += 1
