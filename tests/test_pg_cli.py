"""``panelist db init / import / export`` on a real PostgreSQL: the schema is made once and
its version printed, a data folder's logs go in (resumably, checked by counts) and come back
out as logs the embedded ledger reads with the same panels and verdicts."""

import json
import shutil

from conftest import read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.store import pg, pgschema


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_db_init_twice_prints_the_version(pg_url, capsys):
    every = ", ".join(str(v) for v, _ in pgschema.MIGRATIONS)
    code, out, _ = run(capsys, "db", "init", "--database", pg_url)
    assert code == 0 and f"schema version {pgschema.VERSION} " in out
    assert f"(applied {every})" in out
    code, out, _ = run(capsys, "db", "init", "--database", pg_url)
    assert code == 0 and f"schema version {pgschema.VERSION} " in out
    assert "already up to date" in out
    code, out, _ = run(capsys, "--json", "db", "init", "--database", pg_url)
    assert code == 0 and json.loads(out)["version"] == pgschema.VERSION
    assert json.loads(out)["applied"] == []


def test_db_needs_a_database(capsys, monkeypatch):
    monkeypatch.delenv("PANELIST_DATABASE_URL", raising=False)
    code, _, err = run(capsys, "db", "init")
    assert code == 1 and "PANELIST_DATABASE_URL" in err and "--database" in err


def filled(gateway, n=4) -> list[str]:
    """``n`` panels through a gateway on JSONL, a verdict on each one's first seat."""
    calls = []
    for i in range(n):
        status, body, _ = gateway.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": f"Review {i}"}]},
        )
        assert status == 200
        call = body["bench"]["seats"][0]["call"]
        assert gateway.post("/bench/verdict", {"call": call, "useful": i % 2 == 0})[0] == 200
        calls.append(call)
    return calls


def test_import_is_resumable_and_export_round_trips(gateway, home, pg_url, tmp_path, capsys):
    calls = filled(gateway)
    gateway.close()  # the folder's logs are complete
    runs = home.gateway_runs
    evidence, panels = read_jsonl(runs / "evidence.jsonl"), read_jsonl(runs / "calls.jsonl")

    # an import cut short: only the first part of each log had been read
    part = tmp_path / "part"
    shutil.copytree(home.root, part)
    for name in ("evidence.jsonl", "calls.jsonl"):
        lines = (runs / name).read_bytes().splitlines(keepends=True)
        (part / "runs" / "gateway" / name).write_bytes(b"".join(lines[: len(lines) // 2]))
    code, out, _ = run(capsys, "db", "import", "--from", str(part), "--database", pg_url)
    assert code == 0 and "MISMATCH" not in out
    # then the whole folder: it goes on from where the first stopped, nothing twice
    code, out, _ = run(capsys, "db", "import", "--from", str(home.root), "--database", pg_url)
    assert code == 0, out
    assert f"evidence: {len(evidence)} record(s) in the file, {len(evidence)} imported: ok" in out
    assert f"panels: {len(panels)} record(s) in the file, {len(panels)} imported: ok" in out
    db = pg.Database(pg_url)
    try:
        rows = db.execute(
            "SELECT (SELECT count(*) FROM evidence) + "
            "(SELECT count(*) FROM verdicts), (SELECT count(*) FROM panels)"
        )
    finally:
        db.close()
    assert rows == [(len(evidence), len(panels))]
    # again: nothing new to read, the same counts
    code, out, _ = run(capsys, "db", "import", "--from", str(home.root), "--database", pg_url)
    assert code == 0 and f"{len(evidence)} imported: ok" in out

    # an instance on the database sees the folder's panels and verdicts, and counts on
    with Ledger(tmp_path / "instance", database=pg_url) as ledger:
        assert ledger.verdict_count() == len(calls)
        assert ledger.verdict_of(calls[0])["useful"] is True
        fresh = ledger.new_panel()
        assert int(fresh.rsplit("-", 1)[1]) > max(int(p["panel"].rsplit("-", 1)[1]) for p in panels)

    out_dir = tmp_path / "exported"
    code, out, _ = run(capsys, "db", "export", "--to", str(out_dir), "--database", pg_url)
    assert code == 0 and f"evidence: {len(evidence)} record(s)" in out
    back = out_dir / "runs" / "gateway"
    assert read_jsonl(back / "evidence.jsonl") == evidence
    assert read_jsonl(back / "calls.jsonl") == panels
    with Ledger(back) as ledger:  # the embedded backend reads it as its own
        assert ledger.verdict_count() == len(calls)
        assert [ledger.verdict_of(c)["useful"] for c in calls] == [True, False, True, False]
        assert ledger.panel(panels[-1]["panel"]) == panels[-1]
    # and refuses to mix into logs already there
    code, _, err = run(capsys, "db", "export", "--to", str(out_dir), "--database", pg_url)
    assert code == 1 and "already holds records" in err


def test_gateway_refuses_a_url_that_is_not_postgresql(capsys, tmp_path):
    from panelist.gateway import make_gateway
    from panelist.metrics.cli.main import Runtime

    code = main(
        [
            "gateway",
            "--data",
            str(tmp_path),
            "--port",
            "0",
            "--database",
            "mysql://someone:pw@db/x",
        ],
        Runtime(make_gateway=make_gateway),
    )
    err = capsys.readouterr().err
    assert code == 1 and "not a PostgreSQL URL" in err and "postgresql://USER@HOST" in err
    assert "pw@" not in err


def test_a_database_without_the_driver_says_how_to_install_it(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    code, _, err = run(capsys, "db", "init", "--database", "postgresql://u@127.0.0.1:1/x")
    assert code == 1 and "pip install 'panelist[postgres]'" in err


def _held(url) -> tuple:
    db = pg.Database(url)
    try:
        return db.execute(
            "SELECT (SELECT count(*) FROM evidence) + (SELECT count(*) FROM "
            "verdicts), (SELECT count(*) FROM panels), (SELECT count(*) FROM "
            "imported)"
        )[0]
    finally:
        db.close()


def test_import_refuses_another_folder_before_writing_anything(
    gateway, home, pg_url, tmp_path, capsys
):
    filled(gateway)
    gateway.close()
    code, out, _ = run(capsys, "db", "import", "--from", str(home.root), "--database", pg_url)
    assert code == 0, out
    before = _held(pg_url)
    # another host's folder: its own logs, from their first line on
    other = tmp_path / "other"
    shutil.copytree(home.root, other)
    for name in ("evidence.jsonl", "calls.jsonl"):
        path = other / "runs" / "gateway" / name
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[1:] + lines[:1]))
    code, _, err = run(capsys, "db", "import", "--from", str(other), "--database", pg_url)
    assert code == 1 and "another data folder" in err and "nothing was written" in err
    assert _held(pg_url) == before


def test_import_refuses_a_database_instances_wrote_to(gateway, home, pg_url, tmp_path, capsys):
    filled(gateway)
    gateway.close()
    with Ledger(tmp_path / "instance", database=pg_url) as ledger:  # a live instance's panel
        pid = ledger.new_panel()
        ledger.record_seated(pid, "code", ["m1"], 0.0)
        ledger.record_panel({"panel": pid, "shape": "code", "seats": []})
    before = _held(pg_url)
    code, _, err = run(capsys, "db", "import", "--from", str(home.root), "--database", pg_url)
    assert code == 1 and "written by running instances" in err and "nothing was written" in err
    assert _held(pg_url) == before
