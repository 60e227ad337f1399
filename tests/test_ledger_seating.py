"""The ledger's seating index: "seated" lines count turns per shape, are folded once by the tail
reader, survive a snapshot, and are seen by another ledger (another process) on the folder."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from panelist.metrics import errors
from panelist.metrics.ledger.ledger import Ledger

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_750_000_000.0


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs" / "gateway"


def seated(ledger: Ledger, shape: str, *aliases: str, at: float = T0) -> str:
    panel = ledger.new_panel(at)
    ledger.record_seated(panel, shape, list(aliases), at)
    return panel


def waited(ledger: Ledger, shape: str, *aliases: str) -> dict:
    return {a: s.waited for a, s in ledger.states(aliases, shape).items()}


def test_seated_lines_count_turns_per_shape(runs):
    with Ledger(runs) as ledger:
        seated(ledger, "general", "m", "a", "b", at=T0)
        seated(ledger, "general", "m", "c", at=T0 + 1)
        seated(ledger, "review", "a", at=T0 + 2)
        seated(ledger, "general", "m", "a", at=T0 + 3)
        assert waited(ledger, "general", "m", "a", "b", "c", "new") == {
            "m": 0,
            "a": 0,
            "b": 2,
            "c": 1,
            "new": None,
        }
        assert waited(ledger, "review", "a", "b") == {"a": 0, "b": None}
        st = ledger.states(["a", "b"], "general")
        assert st["a"].last_seated == T0 + 3 and st["b"].last_seated == T0
        # a seat line alone (as logs from before "seated" lines have) sets the time, not a turn:
        # such a model counts as having waited every turn
        ledger.record_seat(
            {
                "call": "p20250101-99.explorer1",
                "panel": "p20250101-99",
                "alias": "old",
                "shape": "general",
                "seated": T0 - 50,
                "status": "ok",
            }
        )
        assert waited(ledger, "general", "old") == {"old": 3}
    lines = [json.loads(x) for x in (runs / "evidence.jsonl").read_text().splitlines()]
    first = lines[0]
    assert first["kind"] == "seated" and first["v"] == 1 and first["ts"].endswith("Z")
    assert first["aliases"] == ["m", "a", "b"] and first["seated"] == T0


def test_turns_survive_a_snapshot_and_an_older_snapshot_is_replayed(runs):
    with Ledger(runs) as ledger:
        for i in range(5):
            seated(ledger, "general", "m", f"x{i % 3}", at=T0 + i)
        before = ledger.states(["m", "x0", "x1", "x2"], "general")
    with Ledger(runs) as reopened:
        assert reopened.from_snapshot and reopened.replayed == 0
        assert reopened.states(["m", "x0", "x1", "x2"], "general") == before
    snapshot = json.loads((runs / "index.json").read_text())
    del snapshot["turns"]  # as written before turns were counted
    (runs / "index.json").write_text(json.dumps(snapshot))
    with Ledger(runs) as replayed:
        assert not replayed.from_snapshot and replayed.replayed == 5
        assert replayed.states(["m", "x0", "x1", "x2"], "general") == before


def test_malformed_seated_lines_count_no_turn(runs):
    runs.mkdir(parents=True)
    bad = [
        {"kind": "seated", "shape": 5, "seated": T0, "aliases": ["a"]},
        {"kind": "seated", "shape": "general", "seated": "soon", "aliases": ["a"]},
        {"kind": "seated", "shape": "general", "seated": True, "aliases": ["a"]},
        {"kind": "seated", "shape": "general", "seated": T0, "aliases": "a"},
        {"kind": "seated", "shape": "general", "aliases": ["a"]},
    ]
    # then a good line with one alias that is not a string: that alias is passed over
    good = {"kind": "seated", "shape": "general", "seated": T0, "aliases": ["b", 7]}
    (runs / "evidence.jsonl").write_text(
        "".join(json.dumps(dict(r, v=1)) + "\n" for r in bad + [good])
    )
    with Ledger(runs) as ledger:
        assert waited(ledger, "general", "a", "b") == {"a": None, "b": 0}
        seated(ledger, "general", "a")
        assert waited(ledger, "general", "a", "b") == {"a": 0, "b": 1}


def test_record_seated_refuses_what_is_not_a_seating(runs):
    with Ledger(runs) as ledger:
        for shape, aliases in (("", ["a"]), ("general", ["a", ""]), ("general", [3])):
            with pytest.raises(errors.BadRequest, match="a seating needs"):
                ledger.record_seated("p20250101-1", shape, aliases, T0)


WRITER = """
import sys
sys.path.insert(0, {root!r}); import _bootstrap
from panelist.metrics.ledger.ledger import Ledger
with Ledger(sys.argv[1]) as ledger:
    ledger.record_seated(ledger.new_panel(), "general", ["m", "x"], 1750000100.0)
"""


@pytest.mark.slow
def test_another_process_sees_a_seating_at_its_next_look(runs):
    with Ledger(runs) as ledger:
        seated(ledger, "general", "m", "y")
        assert waited(ledger, "general", "x", "y") == {"x": None, "y": 0}
        subprocess.run(
            [sys.executable, "-c", WRITER.format(root=str(ROOT)), str(runs)], check=True, timeout=60
        )
        assert waited(ledger, "general", "x", "y") == {"x": 0, "y": 1}
        assert ledger.states(["x"], "general")["x"].last_seated == 1750000100.0
