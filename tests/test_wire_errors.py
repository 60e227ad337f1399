"""The error table: every error class has a status and a body; an upstream's own status travels
on the error and never becomes the status our caller gets."""

import inspect

import pytest

from panelist.metrics import errors
from panelist.metrics.roster.roster import Roster
from panelist.metrics.seats import CallFailed, SeatResult
from panelist.metrics.upstream.sim import SimUpstream
from panelist.metrics.wire.errors import TABLE, body_of, refusal, shaped, status_of
from panelist.suite.tasks import TaskInvalid

CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.PanelistError) and cls.__module__ == errors.__name__
]
UPSTREAM = [cls for cls in CLASSES if issubclass(cls, errors.UpstreamError)]


def make(cls, **kw):
    """One error of ``cls`` with whatever its constructor needs."""
    if cls is errors.AllSeatsFailed:
        return cls("no seat answered; try again", [{"seat": "member1"}], **kw)
    if cls is errors.AtLimit:
        return cls("endpoint 'x' is at its limit; try again later", 2.5, **kw)
    if cls is errors.PromptTooLong:
        return cls(100, 330, "bench/x", "a (100 tokens)", **kw)
    return cls(f"{cls.__name__} happened; do the next thing", **kw)


def test_the_tree_is_what_the_table_is_read_against():
    assert errors.PanelistError in CLASSES and errors.AuthFailed in UPSTREAM
    assert len(CLASSES) == len(set(CLASSES)) >= 25


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_error_class_has_its_own_row_with_a_status_and_an_openai_body(cls):
    assert cls in TABLE, f"{cls.__name__} has no row in metrics.wire.errors.TABLE"
    status, kind = TABLE[cls]
    assert 400 <= status <= 599 and kind
    exc = make(cls)
    exc.param, exc.code = "p", "c"
    assert status_of(exc) == status
    body = body_of(exc)
    assert body["error"]["message"] == exc.message and body["error"]["type"] == kind
    assert (body["error"]["param"], body["error"]["code"]) == ("p", "c")


def test_the_statuses_callers_know_are_kept():
    expected = {
        errors.PanelistError: 500,
        errors.BadRequest: 400,
        errors.ConfigInvalid: 400,
        errors.Unauthorized: 401,
        errors.Forbidden: 403,
        errors.NotFound: 404,
        errors.MethodNotAllowed: 405,
        errors.RequestTimeout: 408,
        errors.Conflict: 409,
        errors.PayloadTooLarge: 413,
        errors.UnsupportedMediaType: 415,
        errors.TooManyRequests: 429,
        errors.Unavailable: 503,
        errors.AllSeatsFailed: 502,
        errors.AtLimit: 503,
        errors.KeyRefused: 400,
        errors.PromptTooLong: 400,
        errors.OutOfMemoryBudget: 503,
    }
    for cls, status in expected.items():
        assert status_of(make(cls)) == status, cls.__name__
    # calls not made (or not read) for a reason of ours: no slot, a key variable our setting
    # refuses, no room in the memory budget
    for cls in UPSTREAM:
        if cls not in (errors.AtLimit, errors.KeyRefused, errors.OutOfMemoryBudget):
            assert status_of(make(cls)) == 502, cls.__name__


@pytest.mark.parametrize("cls", UPSTREAM, ids=lambda c: c.__name__)
@pytest.mark.parametrize("said", [200, 401, 403, 404, 429, 500, 503])
def test_an_upstreams_status_never_becomes_the_callers(cls, said):
    exc = make(cls, upstream_status=said)
    assert exc.upstream_status == said
    assert status_of(exc) == status_of(make(cls)) == TABLE[cls][0]
    assert "upstream_status" not in body_of(exc)["error"]


def test_an_upstream_error_without_a_reply_has_no_upstream_status():
    assert all(make(cls).upstream_status is None for cls in UPSTREAM)


def test_classes_defined_elsewhere_are_answered_by_their_nearest_ancestor():
    result = SeatResult(
        call="c1",
        seat="member",
        alias="fast",
        served="fast",
        endpoint="sim",
        error_kind="auth",
        error="refused",
    )
    assert status_of(CallFailed(result)) == 502
    assert status_of(TaskInvalid("t", "prompt", "missing")) == 400


def test_details_ride_in_the_error_object_and_messages_get_anthropics_shape():
    exc = make(errors.AllSeatsFailed)
    body = body_of(exc)
    assert body["error"]["seats"] == [{"seat": "member1"}]
    assert shaped("/v1/chat/completions", 502, body) is body
    anthropic = shaped("/v1/messages?beta=true", status_of(exc), body)
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "api_error"
    assert anthropic["error"]["seats"] == [{"seat": "member1"}]
    assert (
        shaped("/v1/messages", 401, body_of(make(errors.Unauthorized)))["error"]["type"]
        == "authentication_error"
    )
    assert refusal("send JSON")["error"] == {
        "message": "send JSON",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_an_upstreams_401_reaches_a_caller_as_our_502(dash, home):
    # a Discover whose endpoint refuses the key: the caller's own key was fine, so no 401
    with SimUpstream({"m": {}}, listing_key="sk-elsewhere") as keyed:
        Roster(home).add_endpoint("keyed", keyed.url)
        status, body, _ = dash.get("/api/endpoints/keyed/discover")
    assert status == 502, body
    assert body["error"]["type"] == "upstream_error" and "(HTTP 401" in body["error"]["message"]


def test_a_prompt_too_long_reads_as_openai_and_anthropic_say_it():
    exc = errors.PromptTooLong(8192, 9000, "bench/x", "a (8192 tokens)")
    openai_body = shaped("/v1/chat/completions", 400, body_of(exc))["error"]
    assert openai_body["code"] == "context_length_exceeded" and openai_body["param"] == "messages"
    assert openai_body["message"].startswith(
        "This model's maximum context length is 8192 "
        "tokens. However, your messages resulted in 9000 "
        "tokens"
    )
    anthropic_body = shaped("/v1/messages", 400, body_of(exc))
    assert anthropic_body["error"]["type"] == "invalid_request_error"
    said = anthropic_body["error"]["message"]
    assert said.startswith("prompt is too long: 9000 tokens > 8192 maximum")
    assert "every seat of bench/x: a (8192 tokens)" in said
    # no window stated: the same words, without a number for it
    exc = errors.PromptTooLong(None, 9000, "bench/x", "a (said so)")
    assert body_of(exc)["error"]["message"].startswith("This model's maximum context length is")
    assert shaped("/v1/messages", 400, body_of(exc))["error"]["message"].startswith(
        "prompt is too long: 9000 tokens >"
    )
