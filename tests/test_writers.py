"""Every writer survives a lone surrogate: the record is written with U+FFFD, never lost."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import read_jsonl
from panelist.metrics.store import configfile, jsonwire
from panelist.metrics.store.jsonl import Appender
from panelist.metrics.ledger.ledger import Ledger

# every code point, lone surrogates included (st.text() leaves them out by default)
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=40)


def test_a_seat_and_a_panel_with_a_surrogate_are_written(tmp_path):
    with Ledger(tmp_path / "runs") as ledger:
        panel = ledger.new_panel()
        ledger.record_seat(
            {
                "call": f"{panel}.member1",
                "panel": panel,
                "alias": "m",
                "shape": "general",
                "status": "error",
                "error": "server_error: bad \ud800 byte",
            }
        )
        ledger.record_panel({"panel": panel, "prompt": "review \udcff this", "seats": []})
        assert ledger.panel(panel)["prompt"] == "review \ufffd this"
    (seat,) = read_jsonl(tmp_path / "runs" / "evidence.jsonl")
    assert seat["error"] == "server_error: bad \ufffd byte"


def test_a_config_change_with_a_surrogate_is_written(tmp_path):
    path = tmp_path / "config" / "x.json"
    path.parent.mkdir()

    def change(doc):
        doc["note"] = "odd \ud800"
        return "note", None, "odd \ud800"

    configfile.update(path, change, by="test")
    assert configfile.read(path)["note"] == "odd \ufffd"
    assert read_jsonl(path.with_name("changes.jsonl"))[0]["new"] == "odd \ufffd"


@settings(max_examples=200, deadline=None)
@given(key=ANY_TEXT, value=ANY_TEXT)
def test_any_text_round_trips_through_the_boundary(tmp_path_factory, key, value):
    raw = json.dumps({key: [value, {"n": value}]}).encode()  # surrogates as \u escapes
    data = jsonwire.loads(raw)
    ((k, v),) = data.items()
    assert k == jsonwire.clean(key) and v == [jsonwire.clean(value), {"n": jsonwire.clean(value)}]
    text = jsonwire.dumps(data)
    text.encode("utf-8")  # never raises
    assert (
        jsonwire.encode({key: value})
        == json.dumps({jsonwire.clean(key): jsonwire.clean(value)}, ensure_ascii=False).encode()
    )
    path = tmp_path_factory.mktemp("log") / "x.jsonl"
    log = Appender(path)
    try:
        log.append({"k": key, "v": value})
    finally:
        log.close()
    # split on "\n" alone, as the contract says: str.splitlines() also breaks at U+0085 and U+2028
    (line,) = path.read_bytes().split(b"\n")[:-1]
    assert json.loads(line) == {"k": jsonwire.clean(key), "v": jsonwire.clean(value)}


def test_nesting_past_the_bound_is_refused_not_a_recursion_error():
    import pytest

    for depth in (jsonwire.MAX_DEPTH + 1, 5000):
        with pytest.raises(jsonwire.JSONRefused, match="nests deeper"):
            jsonwire.loads(b"[" * depth + b"]" * depth)
    assert jsonwire.loads(b"[" * jsonwire.MAX_DEPTH + b"]" * jsonwire.MAX_DEPTH) is not None


def test_each_set_of_options_is_encoded_with_its_own_options():
    # the encoders are kept per set of options: one set's must never serve another's
    value = {"b": [1, {"é": None}], "a": "x"}
    for kw in (
        {},
        {"indent": 1},
        {"separators": (",", ":")},
        {"sort_keys": True},
        {"ensure_ascii": True},
        {"indent": 1},
        {},
        {"sort_keys": True, "indent": 2},
    ):
        want = json.dumps(value, **{"ensure_ascii": False, **kw})
        assert jsonwire.dumps(value, **kw) == want, kw
    assert jsonwire.dumps({"s": "odd \ud800"}, separators=(",", ":")) == '{"s":"odd \ufffd"}'


def test_a_line_s_timestamp_is_its_own_second_and_millisecond():
    import time
    from panelist.metrics.store.jsonl import utc_iso

    # the formatted second is kept between lines: a new second, or an older one, is its own
    for t in (
        1796239927.998,
        1796239927.999,
        1796239928.0,
        1796239928.5,
        1796239927.001,
        0.25,
        1796239999.0,
    ):
        s, ms = divmod(int(t * 1000), 1000)
        assert utc_iso(t) == time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{ms:03d}Z"
