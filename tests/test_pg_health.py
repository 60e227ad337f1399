"""Health on a ledger in PostgreSQL: ``panelist probe`` writes its probe lines to the database,
and the sweep counts hard failures there as it counts them in evidence.jsonl: three in a row
retire the model, an answer restores it."""

from test_health import alerts, probe, retired
from panelist.metrics.store import pg


def test_hard_failures_in_the_database_retire_and_an_answer_restores(
    capsys, home, sim, pg_url, monkeypatch
):
    monkeypatch.setenv("PANELIST_DATABASE_URL", pg_url)
    sim.script("fast", fail="auth")
    for _ in (1, 2):
        assert probe(capsys, home, "fast")["fast"]["action"] == ""
    assert not retired(home, "fast")
    assert probe(capsys, home, "fast")["fast"]["action"] == "retired"
    assert retired(home, "fast")
    assert [a["kind"] for a in alerts(home)] == ["retired"]
    sim.script("fast")
    assert probe(capsys, home, "fast")["fast"]["action"] == "restored"
    assert not retired(home, "fast")
    # the probes are rows of the database, none a line of the folder's log
    db = pg.Database(pg_url)
    try:
        statuses = [
            r[0]
            for r in db.execute(
                "SELECT record->>'status' FROM evidence WHERE kind = 'probe' ORDER BY id"
            )
        ]
    finally:
        db.close()
    assert statuses == ["error"] * 3 + ["ok"]
    assert (
        not (home.gateway_runs / "evidence.jsonl").exists()
        or "probe" not in (home.gateway_runs / "evidence.jsonl").read_text()
    )
