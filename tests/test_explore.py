"""Explorer policies in process: thompson keeps the staleness bound as a hard floor whatever the
verdicts, seats the same panels under the same seed, and every seat of a reply says why it sat.
Nothing is asked of an upstream except in the reply test (the fake transport)."""

import json
import random

import pytest

from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.home import open_home
from panelist.metrics.panel import explore
from panelist.metrics.panel.panel import Panels
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.client import Upstream
from transport_fake import FakeTransport, completion

ASK = [{"role": "user", "content": "Review: x = 1"}]
CANDIDATES = [f"c{i}" for i in range(9)]


def folder(root, policy="thompson"):
    home = open_home(root)
    roster = Roster(home)
    roster.add_endpoint("fake", "http://fake.test/v1")
    for alias in ["m1", "m2"] + CANDIDATES:
        roster.add_model(alias, "fake", family=alias, context=100_000)
    Collections(home).save(roster.view(), "duo", ["m1", "m2"], explorer_policy=policy)
    return home


def seat_and_judge(panels, useful) -> list[str]:
    """Seat one panel, record each seat answered and judged ``useful(alias)``; its explorers."""
    req = panels.parse({"model": "bench/duo", "messages": ASK})
    seating = panels.seat(req)
    for seat in seating.seats:
        call = f"{seating.panel}.{seat.label}"
        panels.ledger.record_seat(
            {
                "call": call,
                "panel": seating.panel,
                "alias": seat.model.alias,
                "shape": req.shape,
                "status": "ok",
                "key": "local",
            }
        )
        panels.ledger.record_verdict(call, useful=useful(seat.model.alias))
    seating.hold.release_all()
    return [s.model.alias for s in seating.seats if s.seat == "explorer"]


def test_the_collection_keeps_its_policy_and_refuses_an_unknown_one(tmp_path):
    home = folder(tmp_path / "data")
    assert Collections(home).all()["duo"].explorer_policy == "thompson"
    with pytest.raises(ConfigInvalid, match="explorer_policy must be one of staleness, thompson"):
        Collections(home).save(Roster(home).view(), "duo", ["m1"], explorer_policy="greedy")
    Collections(home).save(Roster(home).view(), "plain", ["m1"])
    assert Collections(home).all()["plain"].explorer_policy == "staleness"


def test_thompson_keeps_the_bound_under_adversarial_verdicts(tmp_path):
    # c0 and c1 are useful every time, every other explorer never: the draws favour the two,
    # and only the floor brings the other seven back
    home = folder(tmp_path / "data")
    panels = Panels(home)
    panels.rng = random.Random(3)
    try:
        history = [
            seat_and_judge(panels, lambda a: a in ("c0", "c1", "m1", "m2")) for _ in range(80)
        ]
    finally:
        panels.close()
    explorers = panels.collections.all()["duo"].explorers(panels.collections.limits())
    bound = explore.bound(len(CANDIDATES), explorers)
    for alias in CANDIDATES:
        seated = [i for i, h in enumerate(history, 1) if alias in h]
        gaps = [b - a for a, b in zip([0] + seated, seated + [len(history) + 1])]
        assert max(gaps) <= bound, (alias, gaps, history)
    sat = {a: sum(a in h for h in history) for a in CANDIDATES}
    # the verdicts count: each favourite sits more often than any of the others
    assert min(sat["c0"], sat["c1"]) > max(sat[a] for a in CANDIDATES[2:]), sat


def test_the_same_seed_seats_the_same_panels(tmp_path):
    runs = []
    for n in range(2):
        panels = Panels(folder(tmp_path / f"data{n}"))
        panels.rng = random.Random(11)
        try:
            runs.append([seat_and_judge(panels, lambda a: a in ("c4", "c7")) for _ in range(25)])
        finally:
            panels.close()
    assert runs[0] == runs[1]


@pytest.mark.parametrize("policy", ["staleness", "thompson"])
def test_every_seat_of_a_reply_says_why_it_sat(tmp_path, policy):
    home = folder(tmp_path / "data", policy)
    panels = Panels(
        home,
        upstream=Upstream(
            transport=FakeTransport(
                lambda req: (200, completion(f"answer of {req.model}", req.model))
            )
        ),
    )
    panels.rng = random.Random(5)
    try:
        # a history first, so explorers are due or drawn rather than only never seated
        for _ in range(6):
            seat_and_judge(panels, lambda a: a != "m2")
        req = panels.parse({"model": "bench/duo", "messages": ASK, "with": ["c3"]})
        run = panels.start(req, panels.seat(req), key="local")
        reply = panels.complete(run, alive=lambda: True)
    finally:
        panels.close()
    whys = {s["seat"]: s["why"] for s in reply["bench"]["seats"]}
    assert whys["member"] == "member"
    assert whys["nominee"] == "nominated by the request"
    explorers = [s["why"] for s in reply["bench"]["seats"] if s["seat"] == "explorer"]
    assert explorers and all(explorers)
    if policy == "staleness":
        assert all(w.startswith("stale ") for w in explorers), explorers
    else:
        assert all(w.startswith(("could beat member", "due: ")) for w in explorers), explorers


def test_p_beats_reads_the_posteriors():
    class State:
        def __init__(self, useful, not_useful):
            self.useful, self.not_useful, self.last_seated = useful, not_useful, 0.0

    assert explore.p_beats(State(30, 5), State(5, 30)) > 0.99
    assert explore.p_beats(State(5, 30), State(30, 5)) < 0.01
    assert abs(explore.p_beats(State(4, 4), State(4, 4)) - 0.5) < 1e-9


def test_the_api_and_the_command_line_set_the_policy(tmp_path, capsys):
    from inprocess import call
    from panelist.metrics.cli.main import main
    from panelist.serve import make_dashboard

    home = folder(tmp_path / "data", "staleness")
    server = make_dashboard(home, env={})
    try:
        status, _, row = call(
            server,
            "POST",
            "/api/collections",
            {"name": "learner", "members": ["m1"], "explorer_policy": "thompson"},
        )
        assert status == 200 and row["explorer_policy"] == "thompson", row
        status, _, body = call(
            server,
            "POST",
            "/api/collections",
            {"name": "other", "members": ["m1"], "explorer_policy": "greedy"},
        )
        assert status == 400 and body["error"]["param"] == "explorer_policy", body
    finally:
        server.close()
    assert (
        main(
            [
                "--data",
                str(home.root),
                "collection",
                "save",
                "duo",
                "--members",
                "m1,m2",
                "--explorer-policy",
                "thompson",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert Collections(home).all()["duo"].explorer_policy == "thompson"
    assert Collections(home).all()["learner"].explorer_policy == "thompson"
    with pytest.raises(SystemExit):
        main(
            [
                "--data",
                str(home.root),
                "collection",
                "save",
                "duo",
                "--members",
                "m1",
                "--explorer-policy",
                "greedy",
            ]
        )
    assert "invalid choice: 'greedy'" in capsys.readouterr().err


def test_replay_prints_one_line_per_policy(capsys):
    from panelist.metrics.cli.main import main

    assert (
        main(
            [
                "replay",
                "--trials",
                "2",
                "--budget",
                "200",
                "--equal-budget",
                "200",
                "--candidates",
                "6",
            ]
        )
        == 0
    )
    *lines, ratio = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "staleness+oldest",
        "thompson+oldest",
        "thompson+value",
    ]
    for line in lines:
        assert "verdicts_to_decision=" in line and " regret=" in line
        assert " bound_broken=0/4 " in line, line
    # 200 verdicts decide nothing: every median is censored, so no ratio can be given
    assert all("verdicts_to_decision=>200 " in line for line in lines), lines
    assert ratio.startswith("ratio thompson+value / staleness+oldest: unknown"), ratio
    assert main(["replay", "--trials", "0"]) == 1
    assert "--trials must be at least 1" in capsys.readouterr().err


def answered(ledger, alias, useful=None) -> str:
    """One answered seat of ``alias`` on bench/duo, judged ``useful`` unless None (then owed)."""
    panel = ledger.new_panel()
    call = f"{panel}.{alias}"
    ledger.record_seat(
        {
            "call": call,
            "panel": panel,
            "alias": alias,
            "shape": "general",
            "status": "ok",
            "key": "local",
            "collection": "bench/duo",
            "seat": "member" if alias.startswith("m") else "explorer",
        }
    )
    if useful is not None:
        ledger.record_verdict(call, useful=useful)
    return call


def test_value_order_ranks_a_verdict_that_can_decide_a_swap_first(tmp_path, capsys):
    from inprocess import call
    from panelist.metrics.cli.main import main
    from panelist.metrics.ledger.ledger import Ledger
    from panelist.serve import make_dashboard

    home = folder(tmp_path / "data", "thompson")
    with Ledger.of_home(home) as ledger:
        # m2 is the weaker member; c0 has beaten it so far, c1 has never been useful
        for i in range(10):
            answered(ledger, "m1", useful=True)
            answered(ledger, "m2", useful=i < 4)
            answered(ledger, "c0", useful=i < 8)
            answered(ledger, "c1", useful=False)
        hopeless = answered(ledger, "c1")  # owed first: oldest first lists it first
        deciding = answered(ledger, "c0")
    server = make_dashboard(home, env={})
    try:
        status, _, oldest = call(server, "GET", "/api/owed")
        assert status == 200 and oldest["order"] == "oldest"
        assert [r["call"] for r in oldest["data"]] == [hopeless, deciding]
        status, _, valued = call(server, "GET", "/api/owed?order=value")
        assert status == 200 and valued["order"] == "value", valued
        assert [r["call"] for r in valued["data"]] == [deciding, hopeless]
        first, second = valued["data"]
        assert first["value"] > second["value"]
        assert first["reason"].startswith("could decide a swap for m2 (p=")
        # c1 matters only if it could overtake c0, the candidate the swap hinges on
        assert second["reason"].startswith("could overtake c0 as the candidate for m2 (p="), second
        status, _, body = call(server, "GET", "/api/owed?order=loudest")
        assert status == 400 and body["error"]["param"] == "order", body
    finally:
        server.close()
    from panelist.gateway import make_gateway

    gateway = make_gateway(home, env={})
    try:
        status, _, pending = call(gateway, "GET", "/bench/pending?order=value")
        assert status == 200 and pending["order"] == "value", pending
        assert [r["call"] for r in pending["data"]] == [deciding, hopeless]
        status, _, pending = call(gateway, "GET", "/bench/pending")
        assert pending["order"] == "newest"
        assert [r["call"] for r in pending["data"]] == [deciding, hopeless]
    finally:
        gateway.close()
    assert main(["--data", str(home.root), "--json", "pending", "--order", "value"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["call"] for r in listed] == [deciding, hopeless]
