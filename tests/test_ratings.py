"""Ratings: the pairwise counts the index folds from verdicts, the Bradley–Terry fit with its
bootstrap intervals, the suite's and races' comparisons, and ``panelist ratings``."""

import json
import math
import random

from panelist.metrics.cli.main import main
from panelist.metrics.ledger import bradleyterry, raceevidence, suiteevidence
from panelist.metrics.ledger.index import Index
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.pairsfile import PairsView
from panelist.metrics.ledger.ratings import Ratings, rate


def verdict(call, alias, useful, shape="general"):
    return {
        "kind": "verdict",
        "call": call,
        "panel": call.partition(".")[0],
        "alias": alias,
        "shape": shape,
        "useful": useful,
    }


def test_the_index_counts_who_was_judged_better_on_one_panel():
    ix = Index()
    lines = [
        verdict("p1.a", "fast", True),
        verdict("p1.b", "mid", False),
        verdict("p1.c", "slow", False),
        verdict("p1.d", "fast", False),  # itself: no pair
        verdict("p2.a", "fast", True),
        verdict("p2.b", "mid", True),  # a tie
        verdict("p3.a", "mid", True, shape="review"),
        verdict("p3.b", "slow", False, shape="review"),
    ]
    for offset, line in enumerate(lines):
        ix.fold(offset * 100, line)
    assert ix.pairs.of("general") == {("fast", "mid"): 1, ("fast", "slow"): 1}
    assert ix.pairs.of("review") == {("mid", "slow"): 1}
    # a replacing verdict moves its pairs: mid is now useful on p1, slow still not
    ix.fold(1000, verdict("p1.b", "mid", True))
    assert ix.pairs.of("general") == {("fast", "slow"): 1, ("mid", "slow"): 1, ("mid", "fast"): 1}
    ix.fold(1100, verdict("p1.b", "mid", True))  # the same again changes nothing
    ix.fold(1200, verdict("p1.e", "x-one", True, shape="review"))  # not p1's shape: foreign
    assert ix.pairs.of("general") == {("fast", "slow"): 1, ("mid", "slow"): 1, ("mid", "fast"): 1}
    assert ix.counts[("mid", "general")] == [2, 0]  # the useful counts follow as before


def judge_panel(ledger, seats, shape="general"):
    panel = ledger.new_panel()
    for i, (alias, useful) in enumerate(seats):
        call = f"{panel}.member{i + 1}"
        ledger.record_seat(
            {
                "call": call,
                "panel": panel,
                "alias": alias,
                "shape": shape,
                "status": "ok",
                "key": "local",
            }
        )
        ledger.record_verdict(call, useful=useful)


def test_the_pairs_are_kept_in_the_snapshot_and_follow_other_processes(tmp_path):
    runs = tmp_path / "gateway"
    with Ledger(runs) as ledger:
        judge_panel(ledger, [("fast", True), ("slow", False)])
        judge_panel(ledger, [("mid", False), ("slow", True)], shape="review")
        with Ledger(runs) as other:  # another process's verdict is seen on its next read
            judge_panel(other, [("fast", True), ("mid", False)])
        assert ledger.pairs("general") == {("fast", "slow"): 1, ("fast", "mid"): 1}
    reopened = Ledger(runs)
    try:
        assert reopened.from_snapshot and reopened.replayed == 0
        assert reopened.pairs("general") == {("fast", "slow"): 1, ("fast", "mid"): 1}
        assert reopened.pairs("review") == {("slow", "mid"): 1}
        assert reopened.paired_shapes() == ["general", "review"]
        # a reader of the saved pairs alone gives the same counts, verdicts after them too
        judge_panel(reopened, [("slow", True), ("fast", False)])
        light = PairsView(runs)
        assert (
            light.pairs("general")
            == reopened.pairs("general")
            == {("fast", "slow"): 1, ("fast", "mid"): 1, ("slow", "fast"): 1}
        )
        assert light.pairs("review") == {("slow", "mid"): 1}
        assert light.paired_shapes() == ["general", "review"]
    finally:
        reopened.close()
    # saved pairs of another evidence file are not taken: the verdicts are folded from the start
    saved = json.loads((runs / "pairs.json").read_text())
    (runs / "pairs.json").write_text(
        json.dumps(
            dict(
                saved,
                ino=saved["ino"] + 1,
                pairs={"wins": [["general", "mid", "fast", 99]], "panels": []},
            )
        )
    )
    assert PairsView(runs).pairs("general") == {
        ("fast", "slow"): 1,
        ("fast", "mid"): 1,
        ("slow", "fast"): 1,
    }


def synthetic(strengths: dict[str, float], panels: int, seed: int) -> dict:
    """Win counts of three-seat panels where each answer is useful at a rate that grows with
    its model's strength (a Bradley–Terry world: each pair's outcome follows the gap)."""
    rng = random.Random(seed)
    ix = Index()
    names = sorted(strengths)
    offset = 0
    for p in range(panels):
        for s, alias in enumerate(rng.sample(names, 3)):
            offset += 100
            useful = rng.random() < 1 / (1 + math.exp(-strengths[alias]))
            ix.fold(offset, verdict(f"p{p}.s{s}", alias, useful))
    return ix.pairs.of("general")


def test_ratings_recover_a_known_order():
    truth = {"a": 2.0, "b": 1.2, "c": 0.5, "d": -0.2, "e": -1.0, "f": -1.8}
    rated = rate("general", {"verdicts": synthetic(truth, 3000, seed=7)})
    assert [r.alias for r in rated.models] == ["a", "b", "c", "d", "e", "f"]
    public = rated.public()
    assert public["shape"] == "general" and public["sources"]["verdicts"] > 1000
    for row in public["models"]:
        lo, hi = row["interval"]
        assert 0 < lo < row["rating"] < hi < 1
        assert row["wins"] + row["losses"] > 0
    # neighbours a full point apart are told apart at 95%
    rows = public["models"]
    assert all(rows[i]["interval"][0] > rows[i + 1]["interval"][1] for i in (0, 2, 4))
    # with a tenth of the evidence, the intervals are wider
    fewer = rate("general", {"verdicts": synthetic(truth, 300, seed=7)}).public()["models"]
    width = {r["alias"]: r["interval"][1] - r["interval"][0] for r in rows}
    assert all(r["interval"][1] - r["interval"][0] > width[r["alias"]] for r in fewer)


def test_intervals_are_seeded_and_the_fit_is_the_likelihoods_maximum():
    wins = synthetic({"a": 1.0, "b": 0.0, "c": -1.0}, 400, seed=3)
    assert rate("general", {"verdicts": wins}) == rate("general", {"verdicts": dict(wins)})
    comparisons = bradleyterry.Comparisons(wins)
    theta = bradleyterry.fit(comparisons)

    def loglik(t):
        total = sum(
            bradleyterry.PRIOR
            * (math.log(bradleyterry.chance(x)) + math.log(bradleyterry.chance(-x)))
            for x in t
        )
        for i, j, a, b in comparisons.cells:
            total += a * math.log(bradleyterry.chance(t[i] - t[j]))
            total += b * math.log(bradleyterry.chance(t[j] - t[i]))
        return total

    best = loglik(theta)
    for k in range(3):
        for nudge in (-0.01, 0.01):
            moved = list(theta)
            moved[k] += nudge
            assert loglik(moved) < best


def test_no_comparison_no_rating():
    assert rate("general", {"verdicts": {}}).models == []
    # a model that only ever tied has no comparison and is not rated
    ix = Index()
    ix.fold(0, verdict("p1.a", "fast", True))
    ix.fold(100, verdict("p1.b", "mid", True))
    assert rate("general", {"verdicts": ix.pairs.of("general")}).models == []


def test_suite_units_and_race_inputs_are_comparisons(folder):
    found = {
        ("claim", "t1"): {"fast": True, "slow": False, "mid": False},
        ("pair", "p1"): {"fast": False, "slow": True},
        ("pair", "p2"): {"fast": True, "slow": True},
    }  # separates nobody
    assert suiteevidence.comparisons(found) == {
        ("fast", "slow"): 1,
        ("fast", "mid"): 1,
        ("slow", "fast"): 1,
    }
    # each unit is one unit of evidence: its pairs are counted together
    assert suiteevidence.patterns(found) == {
        (("fast", "mid"), ("fast", "slow")): 1,
        (("slow", "fast"),): 1,
    }
    folder.races.mkdir(parents=True, exist_ok=True)
    rows = [
        {"model": "fast", "input": 0, "accuracy": 7, "total": 9},
        {"model": "fast", "input": 0, "accuracy": 5, "total": 7},
        {"model": "mid", "input": 0, "accuracy": 4, "total": 9},
        {"model": "slow", "input": 0, "accuracy": 6, "total": 8},
        {"model": "mid", "input": 1, "accuracy": 5, "total": 5},
        {"model": "slow", "input": 1, "accuracy": 5, "total": 6},
        {"model": "slow", "input": 1, "accuracy": None, "total": None},
    ]  # judge failed
    (folder.races / "r20260101-0000abcd.json").write_text(json.dumps({"rows": rows}))
    (folder.races / "r20260102-0000abcd.json").write_text("{not json")  # counts nothing
    with Ledger(folder.gateway_runs) as ledger:
        book = Ratings.of_home(folder, ledger)
        sources = book.sources("general")
        # by mean accuracy: on input 0 fast (6) and slow (6) tie, both above mid (4); on
        # input 1 mid and slow tie (the unjudged run does not count). Input 0 is one unit
        assert sources["races"] == {(("fast", "mid"), ("slow", "mid")): 1}
        assert book.races.pairs() == {("fast", "mid"): 1, ("slow", "mid"): 1}
        assert "races" not in book.sources("review") and "suite" in book.sources("review")
        assert book.shapes() == ["general"]
        rated = book.of("general")
        assert rated.sources == {"verdicts": 0, "races": 2}
        assert rated.public()["clusters"] == {"verdicts": 0, "races": 1}
        assert [r.alias for r in rated.models][-1] == "mid"
        assert rated.of("mid").clusters == rated.of("fast").clusters == 1
        # a race that ends later counts at the next look
        (folder.races / "r20260103-0000abcd.json").write_text(
            json.dumps(
                {
                    "rows": [
                        {"model": "mid", "input": 0, "accuracy": 7},
                        {"model": "fast", "input": 0, "accuracy": 3},
                    ]
                }
            )
        )
        assert book.sources("general")["races"] == {
            (("fast", "mid"), ("slow", "mid")): 1,
            (("mid", "fast"),): 1,
        }
        assert book.races.pairs() == {("fast", "mid"): 1, ("slow", "mid"): 1, ("mid", "fast"): 1}


def test_race_inputs_are_rated_on_accuracy_after_the_cap_never_on_totals(folder):
    # on every input "capped" had its accuracy capped at 4 and wrote 3 points of shown work
    # (a total of 7); "right" was marked 6 for accuracy and showed nothing (a total of 6)
    folder.races.mkdir(parents=True)
    rows = []
    for i in range(8):
        rows += [
            {
                "model": "capped",
                "input": i,
                "accuracy": 4,
                "capped_from": 7,
                "shown_work": 3,
                "total": 7,
            },
            {
                "model": "right",
                "input": i,
                "accuracy": 6,
                "capped_from": None,
                "shown_work": 0,
                "total": 6,
            },
        ]
    (folder.races / "r20260101-0000abcd.json").write_text(json.dumps({"rows": rows}))
    with Ledger(folder.gateway_runs) as ledger:
        book = Ratings.of_home(folder, ledger)
        assert book.races.pairs() == {("right", "capped"): 8}
        rated = book.of("general")
        assert [r.alias for r in rated.models] == ["right", "capped"]
        assert rated.of("right").wins == 8 and rated.of("capped").losses == 8
    # a row that carries only a total (no accuracy) is not a comparison
    assert (
        raceevidence.comparisons(
            {
                "rows": [
                    {"model": "a", "input": 0, "total": 9},
                    {"model": "b", "input": 0, "total": 2},
                ]
            }
        )
        == {}
    )


def test_races_count_once_their_folder_is_made(folder):
    # before any race the folder is not there: that is looked up once per look, and the first
    # report written counts at the next look
    assert not folder.races.exists()
    with Ledger(folder.gateway_runs) as ledger:
        book = Ratings.of_home(folder, ledger)
        assert book.sources("general")["races"] == {}
        assert book.sources("general")["races"] == {}
        folder.races.mkdir(parents=True)
        (folder.races / "r20260101-0000abcd.json").write_text(
            json.dumps(
                {
                    "rows": [
                        {"model": "fast", "input": 0, "accuracy": 7},
                        {"model": "slow", "input": 0, "accuracy": 3},
                    ]
                }
            )
        )
        assert book.sources("general")["races"] == {(("fast", "slow"),): 1}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ratings_on_the_command_line(folder, capsys):
    d = str(folder.root)
    code, out, _ = run(capsys, "ratings", "--data", d)
    assert code == 0 and out.startswith("no ratings yet")
    with Ledger(folder.gateway_runs) as ledger:
        for i in range(12):
            judge_panel(ledger, [("fast", True), ("mid", i % 3 == 0), ("slow", False)])
        judge_panel(ledger, [("x-one", True), ("slow", False)], shape="review")
    code, out, _ = run(capsys, "ratings", "--data", d)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "general: 24 comparisons (24 from verdicts, 0 from races)"
    assert lines[1].split() == ["ALIAS", "RATING", "INTERVAL", "WINS", "LOSSES"]
    table = [line.split() for line in lines[2:5]]
    assert [(r[0], r[3], r[4]) for r in table] == [
        ("fast", "20", "0"),
        ("mid", "4", "8"),
        ("slow", "0", "16"),
    ]
    assert float(table[0][1]) > float(table[1][1]) > float(table[2][1])
    assert "review: 1 comparisons (1 from verdicts, 0 from suite)" in out
    code, out, _ = run(capsys, "ratings", "--shape", "review", "--json", "--data", d)
    (review,) = json.loads(out)["shapes"]
    assert code == 0 and review["shape"] == "review"
    assert [(m["alias"], m["wins"], m["losses"]) for m in review["models"]] == [
        ("x-one", 1, 0),
        ("slow", 0, 1),
    ]
    for m in review["models"]:
        assert set(m) == {
            "alias",
            "rating",
            "interval",
            "strength",
            "se",
            "wins",
            "losses",
            "clusters",
        }
        assert m["interval"][0] < m["rating"] < m["interval"][1]
    code, out, _ = run(capsys, "ratings", "--shape", "vision", "--json", "--data", d)
    assert code == 0 and json.loads(out)["shapes"][0]["models"] == []
    code, _, err = run(capsys, "ratings", "--shape", "Bad Shape", "--data", d)
    assert code == 1 and "lower-case letters" in err
