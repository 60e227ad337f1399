"""The Collections page's use figures: ``GET /api/collections`` gives each collection its
panels, seats and verdicts from the ledger's index, and its spend today and this month against
its caps where a cap counts it (none where no cap does: never a zero made up). In process, over
the simulated upstream."""

from apikit import ask
from test_budgets import price


def row(dash, name):
    status, body, _ = dash.get("/api/collections")
    assert status == 200, body
    return next(c for c in body["data"] if c["name"] == name)


def test_each_collection_has_its_panels_seats_verdicts_and_capped_spend(dash, home):
    fresh = row(dash, "trio")["use"]
    assert fresh == {"panels": 0, "seats": 0, "useful": 0, "not_useful": 0, "spend": None}

    price(home)
    bench = ask(dash)
    ask(dash)
    status, said, _ = dash.post("/api/verdict", {"call": bench["seats"][0]["call"], "useful": True})
    assert status == 200, said
    use = row(dash, "trio")["use"]
    assert use["panels"] == 2 and use["useful"] == 1 and use["not_useful"] == 0
    assert use["seats"] >= 2 * 3, use  # three members each time, and any explorers
    assert use["spend"] is None  # no cap: nothing counts its spend

    status, capped, _ = dash.request("PUT", "/api/budgets/collection/trio", {"day": 1000})
    assert status == 200, capped
    ask(dash)
    use = row(dash, "trio")["use"]
    assert use["panels"] == 3
    day = use["spend"]["day"]
    assert day["cap"] == 1000 and day["spent"] > 0 and day["resets"], use["spend"]
    assert use["spend"]["currency"]
