"""What a verdict may carry: bounded claims, plain text, and no character that could cost a record."""

import pytest

from conftest import read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.ledger.verdict import MAX_CLAIM, MAX_CLAIMS, MAX_CLAIMS_TOTAL


@pytest.fixture()
def call(gateway):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "review this"}]},
    )
    assert status == 200
    return body["bench"]["seats"][0]["call"]


@pytest.mark.parametrize(
    "claims, fragment",
    [
        ({"real": ["x"] * (MAX_CLAIMS + 1)}, f"at most {MAX_CLAIMS} strings"),
        ({"false": ["y" * (MAX_CLAIM + 1)]}, f"at most {MAX_CLAIM} characters"),
        ({"real": ["r" * 450] * 5, "false": ["f" * 450] * 5}, f"the limit is {MAX_CLAIMS_TOTAL}"),
    ],
)
def test_claims_are_bounded(gateway, home, call, claims, fragment):
    evidence = home.gateway_runs / "evidence.jsonl"
    before = evidence.read_bytes()
    status, body, _ = gateway.post("/bench/verdict", {"call": call, "useful": True, **claims})
    assert status == 400, body
    assert fragment in body["error"]["message"]
    assert evidence.read_bytes() == before  # nothing written


def test_claims_within_the_bounds_are_kept(gateway, home, call):
    claims = {"real": ["r" * MAX_CLAIM] * 4, "false": ["f" * MAX_CLAIM] * 4}
    status, body, _ = gateway.post("/bench/verdict", {"call": call, "useful": True, **claims})
    assert status == 200 and body["written"]
    (v,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert v["real"] == claims["real"] and v["false"] == claims["false"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("note", "looks fine \x1b[2J\x1b[Hnothing to see"),
        ("note", "bidi \u202e trick"),
        ("real", ["a claim\x07"]),
        ("false", ["two\nlines"]),
    ],
)
def test_control_characters_are_refused(gateway, call, field, value):
    status, body, _ = gateway.post("/bench/verdict", {"call": call, "useful": False, field: value})
    assert status == 400, body
    assert "control character" in body["error"]["message"]
    assert body["error"]["param"].startswith(field)


def test_a_note_keeps_its_lines(gateway, home, call):
    note = "first line\r\n\tsecond line"
    status, body, _ = gateway.post("/bench/verdict", {"call": call, "useful": True, "note": note})
    assert status == 200
    assert body["verdict"]["note"] == "first line\n\tsecond line"


def test_a_lone_surrogate_in_a_verdict_becomes_a_replacement_character(gateway, home, call):
    # the conftest client sends "\ud800" as a JSON escape, as a fuzzer or a broken client would
    status, body, _ = gateway.post(
        "/bench/verdict",
        {"call": call, "useful": True, "note": "bad \ud800 byte", "real": ["claim \udfff"]},
    )
    assert status == 200, body
    (v,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert v["note"] == "bad \ufffd byte" and v["real"] == ["claim \ufffd"]


def test_the_cli_takes_a_note_that_is_not_utf8(home, call, capsys):
    # a shell passes bytes; Python hands over the ones that are not UTF-8 as lone surrogates
    note = b"caf\xe9".decode("utf-8", "surrogateescape")
    code = main(["verdict", call, "--not-useful", "--note", note, "--data", str(home.root)])
    out, err = capsys.readouterr()
    assert code == 0, err
    (v,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert v["note"] == "caf\ufffd"
