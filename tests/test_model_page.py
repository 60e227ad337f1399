"""The model page's data: ``GET /api/models/{alias}`` through a real dashboard server, after real
panels, verdicts, a probe and a retirement, the simulator playing the models."""

from conftest import set_limits, wait_until


def ask(client, content, collection="bench/trio"):
    status, body, _ = client.post(
        "/v1/chat/completions",
        {"model": collection, "messages": [{"role": "user", "content": content}]},
    )
    assert status == 200, body
    return body["bench"]


def model_page(dash, alias):
    def complete():
        status, body, _ = dash.get(f"/api/models/{alias}")
        assert status == 200, body
        complete.body = body
        return body["index"]["complete"]

    assert wait_until(complete), complete.body["index"]
    return complete.body


def test_a_model_page_holds_what_is_known_of_the_model(dash, home, sim):
    set_limits(home, max_explorers=0)
    made = [ask(dash, f"Review change {i}") for i in range(3)]
    sim.script("fast", fail="server_error")
    failed = ask(dash, "Review change 3")
    sim.script("fast")
    judged = made[0]["seats"][0]
    assert judged["alias"] == "fast"
    dash.post("/api/verdict", {"call": judged["call"], "useful": True})
    page = model_page(dash, "fast")

    assert page["alias"] == "fast"
    _, listed, _ = dash.get("/api/models")
    row = next(m for m in listed["data"] if m["alias"] == "fast")
    assert page["model"] == row
    assert page["collections"] == ["trio"]
    assert page["facts"]["context"] == {
        "value": 100_000,
        "source": "typed",
        "at": None,
        "from": "roster",
    }
    [general] = page["shapes"]
    assert general["shape"] == "general" and general["seats"] == 4 and general["ok"] == 3
    assert general["useful"] == 1 and general["not_useful"] == 0 and general["rate"] == 1.0
    assert 0 < general["interval"][0] < general["interval"][1] == 1.0
    assert general["failures"] == {"server_error": 1}
    # latency: its seats oldest first, [start, seconds, status]
    assert [point[2] for point in page["latency"]] == ["ok", "ok", "ok", "error"]
    assert all(isinstance(t, float) and s >= 0 for t, s, _ in page["latency"])
    # newest panels first; its failed seat with the kind and message
    assert [p["panel"] for p in page["panels"]] == [b["panel"] for b in [failed, *made[::-1]]]
    [failure] = page["failures"]
    assert failure["panel"] == failed["panel"] and failure["call"].startswith(failed["panel"])
    assert failure["kind"] == "server_error" and failure["error"] and failure["status"] == "error"
    assert page["suite"] is None and page["races"] == [] and page["alerts"] == []

    # its retirement is an alert on its page, and its status says so
    status, body, _ = dash.post("/api/models/fast/retire", {})
    assert status == 200, body
    page = model_page(dash, "fast")
    assert page["model"]["status"] == "retired"
    assert [a["kind"] for a in page["alerts"]] == ["retired"]


def test_a_model_page_for_a_model_with_no_history(api):
    page = model_page(api, "x-three")
    assert page["shapes"] == [] and page["latency"] == [] and page["panels"] == []
    assert page["failures"] == [] and page["collections"] == []
    assert page["model"]["status"] == "untested"


def test_an_unknown_model_has_no_page(api):
    status, body, _ = api.get("/api/models/nobody")
    assert status == 404 and "unknown model 'nobody'" in body["error"]["message"], body
