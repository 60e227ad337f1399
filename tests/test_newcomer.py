"""A newcomer's first minutes: the demo keeps to its own data folder, and ``--help`` at every
level of the command line lists every command beneath it and says what each option does."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PATIENCE
from panelist.metrics.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent


def demo_run(tmp_path: Path, *extra: str) -> tuple[str, Path]:
    """Start ``python serve.py --demo`` with its default data folder under ``tmp_path``, read
    its start lines, stop it as Ctrl-C would, and hand back what it said and that folder."""
    xdg = tmp_path / "xdg"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}
    env.update(XDG_DATA_HOME=str(xdg), HOME=str(tmp_path / "home"))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "serve.py"), "--demo", "--port", "0", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = [proc.stdout.readline()]
        assert said[0].startswith("panelist dashboard on "), (said, proc.stderr.read())
        while said[-1] and not said[-1].startswith("try:"):  # the start lines end so
            said.append(proc.stdout.readline())
        proc.send_signal(signal.SIGINT)
        assert proc.wait(PATIENCE) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(PATIENCE)
        proc.stdout.close()
        proc.stderr.close()
    return "".join(said), xdg / "panelist"


@pytest.mark.slow
def test_the_demo_writes_nothing_into_the_default_data_folder(tmp_path):
    said, default = demo_run(tmp_path)
    demo = default.with_name("panelist-demo")
    assert not default.exists(), sorted(p.name for p in default.rglob("*"))
    roster = json.loads((demo / "config" / "roster.json").read_text())
    assert "demo" in roster["endpoints"]  # the demo's roster went to its own folder
    assert f"data folder {demo}" in said and "--data DIR names another" in said, said


@pytest.mark.slow
def test_the_demo_uses_the_data_folder_data_names(tmp_path):
    mine = tmp_path / "mine"
    said, default = demo_run(tmp_path, "--data", str(mine))
    assert not default.exists() and not default.with_name("panelist-demo").exists()
    assert "demo" in json.loads((mine / "config" / "roster.json").read_text())["endpoints"]
    assert f"data folder {mine}" in said and "names another" not in said, said


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every parser of the command line with its path, and the subcommands each lists."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


def test_every_help_lists_every_subcommand_and_every_option_says_what_it_does():
    unlisted, silent = [], []
    for path, parser in parsers(build_parser()):
        shown = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                listed = {a.dest: a.help for a in action._choices_actions}
                for name in action.choices:
                    # a subcommand shows in its parent's help only with a help line of its own
                    if not listed.get(name) or not re.search(rf"^ {{4}}{name}(\s|$)", shown, re.M):
                        unlisted.append(" ".join((*path, name)))
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                silent.append(f"{' '.join(path)}: {action.option_strings or action.dest}")
    assert not unlisted, f"missing from their parent's --help: {unlisted}"
    assert not silent, f"options without help: {silent}"


@pytest.mark.parametrize(
    "noun, verbs",
    [
        ("model", ("add", "list", "rm")),
        ("collection", ("save", "list", "rm")),
        ("endpoint", ("add", "list", "rm")),
        ("key", ("create", "list", "revoke")),
    ],
)
def test_a_nouns_help_names_its_verbs(noun, verbs, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([noun, "--help"])
    shown = capsys.readouterr().out
    assert done.value.code == 0
    for verb in verbs:
        assert re.search(rf"^ {{4}}{verb}\s", shown, re.M), (verb, shown)
