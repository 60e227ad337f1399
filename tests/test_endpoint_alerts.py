"""An endpoint failing as a whole (its key refused, its address unreachable) is one
``endpoint_failing`` alert naming the endpoint, not one ``failing`` alert per model; its models
are alerted one by one again once it is not. In process: the seats are written through the
ledger's own write path, with the error texts a seat logs, and the server's watch looks."""

from panelist.metrics.ledger.ledger import Ledger
from apikit import covers


def alerts(api) -> list[dict]:
    status, body, _ = api.get("/api/alerts?limit=200")
    assert status == 200, body
    return body["data"][::-1]  # oldest first


def said(api) -> list[tuple[str, str]]:
    return [(a["kind"], a["subject"]) for a in alerts(api)]


def seats(folder, alias: str, status: str, error: str = "", n: int = 3) -> None:
    with Ledger(folder.gateway_runs) as ledger:
        for _ in range(n):
            pid = ledger.new_panel()
            ledger.record_seat(
                {
                    "call": f"{pid}.member1",
                    "panel": pid,
                    "alias": alias,
                    "shape": "general",
                    "status": status,
                    "error": error,
                    "seconds": 0.5,
                }
            )


def test_an_unreachable_endpoint_is_one_alert_and_its_models_none(api, folder):
    watch = api.server.parts.failures
    for alias in ("fast", "mid"):
        seats(folder, alias, "error", "connection: [Errno -2] Name or service not known")
    watch.check()
    watch.check()  # looked at again: nothing new to say
    assert said(api) == [("endpoint_failing", "sim")]
    alert = alerts(api)[0]
    assert alert["models"] == ["fast", "mid"] and alert["error_kind"] == "connection"
    assert "endpoint sim is failing as a whole" in alert["message"]
    assert "press Test" in alert["message"]

    # one of its models answers: the endpoint is no longer failing as a whole, and the model
    # still failing is said on its own
    seats(folder, "fast", "ok")
    watch.check()
    assert said(api) == [
        ("endpoint_failing", "sim"),
        ("endpoint_recovered", "sim"),
        ("failing", "mid"),
    ]


def test_models_failing_each_their_own_way_are_alerted_one_by_one(api, folder):
    seats(folder, "fast", "error", "server_error: (500) overloaded")
    seats(folder, "mid", "error", "server_error: (500) overloaded")
    api.server.parts.failures.check()
    assert sorted(said(api)) == [("failing", "fast"), ("failing", "mid")]


def test_a_refused_key_on_every_model_asked_is_one_alert(api, folder):
    for alias in ("fast", "mid", "slow"):
        seats(folder, alias, "error", "auth: (401) invalid api key")
    api.server.parts.failures.check()
    assert said(api) == [("endpoint_failing", "sim")]
    assert alerts(api)[0]["models"] == ["fast", "mid", "slow"]


@covers("GET", "/api/endpoints/{name}/health")
def test_the_endpoint_page_shows_its_models_limits_and_whole_failure(api, folder):
    from panelist.metrics.roster.roster import Roster

    Roster(folder).set_limits("endpoint", "sim", {"rpm": 60, "max_concurrent": 4}, by="test")
    seats(folder, "fast", "ok")
    status, body, _ = api.get("/api/endpoints/sim/health")
    assert status == 200, body
    assert body["failing"] is None and body["base_url"]
    assert body["limits"]["rpm"] == 60 and body["limits"]["max_concurrent"] == 4
    assert body["limits"]["running"] == 0 and body["limits"]["paused"] is None
    rows = {m["alias"]: m for m in body["models"]}
    assert set(rows) >= {"fast", "mid", "slow"}
    assert rows["fast"]["seats"] == 3 and rows["fast"]["error_rate"] == 0
    assert rows["mid"]["seats"] == 0 and rows["mid"]["p50"] is None

    for alias in ("mid", "slow"):
        seats(folder, alias, "error", "auth: (401) invalid api key", n=5)
    seats(folder, "fast", "error", "auth: (401) invalid api key", n=5)
    body = api.get("/api/endpoints/sim/health")[1]
    assert body["failing"]["kind"] == "auth" and "its key is refused" in body["failing"]["why"]
    assert body["failing"]["models"] == ["fast", "mid", "slow"]
    assert {m["alias"]: m for m in body["models"]}["mid"]["failing"]["kind"] == "auth"

    status, body, _ = api.get("/api/endpoints/nowhere/health")
    assert status == 404 and "GET /api/endpoints" in body["error"]["message"]
