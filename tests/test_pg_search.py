"""The panels page's filters on an instance whose ledger is in PostgreSQL: its local search
index follows the database's tables (``metrics.ledger.pgsearch``), so panels another instance
wrote are found by text, model and status, and a verdict given elsewhere changes what is owed."""

from conftest import Gateway, wait_until
from panelist.gateway import make_gateway
from panelist.serve import make_dashboard
from test_pg_gateway import make_home


def found(dash, query: str):
    """The panel ids of a filtered list once the index covers the tables, else None."""
    status, body, _ = dash.get(f"/api/panels?{query}")
    assert status == 200, body
    return [p["panel"] for p in body["data"]] if body["index"]["complete"] else None


def test_filters_find_panels_another_instance_wrote(tmp_path, sim, pg_url):
    with (
        Gateway(make_gateway(make_home(tmp_path / "a", sim, pg_url), env={})) as a,
        Gateway(make_dashboard(make_home(tmp_path / "b", sim, pg_url), env={})) as b,
    ):
        panels = {}
        for word in ("scheduler", "parser", "cache"):
            status, body, _ = a.post(
                "/v1/chat/completions",
                {
                    "model": "bench/trio",
                    "messages": [{"role": "user", "content": f"Review the {word} change"}],
                },
            )
            assert status == 200
            panels[word] = body["bench"]
        assert wait_until(lambda: found(b, "q=parser") == [panels["parser"]["panel"]])
        newest_first = [panels[w]["panel"] for w in ("cache", "parser", "scheduler")]
        assert found(b, "model=fast") == newest_first
        assert found(b, "status=owed") == newest_first
        # judge every answered seat of one panel through A: B's list stops owing it
        for seat in panels["parser"]["seats"]:
            if seat["status"] == "ok":
                assert a.post("/bench/verdict", {"call": seat["call"], "useful": True})[0] == 200
        want = [panels[w]["panel"] for w in ("cache", "scheduler")]
        assert wait_until(lambda: found(b, "status=owed") == want)
        # a panel written while B follows is found too
        status, body, _ = a.post(
            "/v1/chat/completions",
            {
                "model": "bench/trio",
                "messages": [{"role": "user", "content": "Review the lexer change"}],
            },
        )
        assert status == 200
        assert wait_until(lambda: found(b, "q=lexer") == [body["bench"]["panel"]])
