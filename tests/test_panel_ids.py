"""Panel ids are never handed out twice, even when panels.idx is deleted; ids that are no panel of
ours (a huge sequence number, thousands of digits) are 4xx answers and one CLI line, never 500s."""

import os

from conftest import Gateway, read_jsonl
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.ledger.ids import ID_MARGIN, panel_seq
from panelist.metrics.ledger.ledger import Ledger

PROMPT = {"model": "bench/trio", "messages": [{"role": "user", "content": "review this"}]}


def ask(gw):
    status, body, _ = gw.post("/v1/chat/completions", PROMPT)
    assert status == 200, body
    return body["bench"]


def test_a_deleted_panels_idx_is_rebuilt_and_ids_are_not_reused(home):
    runs = home.gateway_runs
    gw = Gateway(make_gateway(home, env={}))
    try:
        old = [ask(gw) for _ in range(3)]
    finally:
        gw.server.close()
    old_ids = [b["panel"] for b in old]
    os.remove(runs / "panels.idx")

    gw = Gateway(make_gateway(home, env={}))
    try:
        new = ask(gw)
        assert panel_seq(new["panel"]) > max(panel_seq(p) for p in old_ids), (new["panel"], old_ids)
        # the rebuilt index still finds the old panels, and an old call id judges the old seat
        status, found, _ = gw.get(f"/bench/panels/{old_ids[0]}")
        assert status == 200 and found["panel"] == old_ids[0]
        old_call = old[0]["seats"][0]
        status, got, _ = gw.post("/bench/verdict", {"call": old_call["call"], "useful": True})
        assert status == 200 and got["written"]
    finally:
        gw.server.close()
    (verdict,) = [e for e in read_jsonl(runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert verdict["panel"] == old_ids[0] and verdict["alias"] == old_call["alias"]
    calls = [c["panel"] for c in read_jsonl(runs / "calls.jsonl")]
    assert len(calls) == len(set(calls)) == 4


def test_deleting_panels_idx_under_a_running_gateway(home):
    runs = home.gateway_runs
    gw = Gateway(make_gateway(home, env={}))
    try:
        before = ask(gw)["panel"]
        os.remove(runs / "panels.idx")
        # another process opens the folder now: it rebuilds the file from the logs
        with Ledger(runs) as other:
            theirs = other.new_panel()
        mine = ask(gw)["panel"]  # the running gateway notices the file was replaced
        ids = [panel_seq(before), panel_seq(theirs), panel_seq(mine)]
        assert len(set(ids)) == 3, ids
        assert ids[1] > ids[0] + ID_MARGIN - 1 and ids[2] > ids[1], ids
        status, found, _ = gw.get(f"/bench/panels/{mine}")
        assert status == 200 and found["panel"] == mine
    finally:
        gw.server.close()


def test_a_new_folder_still_counts_from_zero(tmp_path):
    with Ledger(tmp_path / "runs") as ledger:
        assert panel_seq(ledger.new_panel()) == 0


def test_ids_that_are_no_panel_of_ours_are_not_found(gateway):
    for seq in ("9" * 19, "18446744073709551616", "9" * 5000):
        status, body, _ = gateway.get(f"/bench/panels/p20260101-{seq}")
        assert status == 404, (seq[:20], status, body)
        assert "unknown panel" in body["error"]["message"]
    status, body, _ = gateway.post(
        "/bench/verdict", {"call": f"p20260101-{'9' * 19}.member1", "useful": True}
    )
    assert status == 404 and "unknown call" in body["error"]["message"]
    status, body, _ = gateway.post(
        "/bench/verdict", {"call": f"p20260101-{'9' * 5000}.member1", "useful": True}
    )
    assert status == 400 and body["error"]["param"] == "call"


def test_the_cli_says_one_line_for_such_ids(folder, capsys):
    for seq in ("9" * 19, "9" * 5000):
        code = main(["verdict", f"p20260101-{seq}.member1", "--useful", "--data", str(folder.root)])
        err = capsys.readouterr().err
        assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err[:300]
