"""A slow ratings fit (a large roster) never runs on a caller's thread once the shape has a fit:
callers read the last one while a newer one is made on a thread of its own, and a reply's
``bench.suggest`` never waits for the first. Slowness is counted (players² + pairs), not timed,
so 40 judged models make a fit "slow" here while it still takes milliseconds."""

import pytest

from panelist.metrics.home import open_home
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.ratings import Ratings, slow
from test_ratings import judge_panel

MODELS = [f"m{i:02d}" for i in range(40)]  # 40² > SLOW_WORK


@pytest.fixture()
def books(tmp_path):
    """``(ledger, ratings)`` over a fresh data folder: verdicts alone, no suite, no races; a
    slow fit may be redone as soon as it is asked for (``rest=0``)."""
    home = open_home(tmp_path / "data")
    ledger = Ledger.of_home(home)
    book = Ratings.of_home(home, ledger, rest=0)
    try:
        yield ledger, book
    finally:
        book.close()
        ledger.close()


def judged_round(ledger, shift: int = 0) -> None:
    """One panel per model, each judged better than the next model on the list."""
    for i, alias in enumerate(MODELS):
        other = MODELS[(i + 1 + shift) % len(MODELS)]
        judge_panel(ledger, [(alias, True), (other, False)])


def test_a_slow_first_fit_is_made_behind_a_reply_and_then_served(books):
    ledger, book = books
    judged_round(ledger)
    # a reply may not wait: none yet, and the first fit is being made
    assert book.ready("general") is None
    assert book.idle()
    fitted = book.ready("general")
    assert fitted is not None and slow(fitted) and len(fitted.models) == len(MODELS)
    assert book.of("general") is fitted  # unchanged counts: the same fit, no refit


def test_after_new_verdicts_the_last_fit_is_served_while_a_newer_one_is_made(books):
    ledger, book = books
    judged_round(ledger)
    first = book.of("general")  # the page may wait for the first fit
    assert not book.refitting("general")
    judged_round(ledger, shift=1)
    # changed counts: the last fit at once, the newer one behind it
    assert book.of("general") is first
    assert book.idle()
    newer = book.of("general")
    assert newer is not first
    assert sum(r.wins for r in newer.models) == 2 * sum(r.wins for r in first.models)
    assert not book.refitting("general")


def test_a_reply_s_suggestions_allow_a_recent_fit_and_refit_after_max_age(books):
    ledger, book = books
    judged_round(ledger)
    first = book.of("general")
    judged_round(ledger, shift=1)
    # within max_age no refit starts: the last fit is enough for a reply
    assert book.ready("general", max_age=3600) is first
    assert not book.refitting("general")
    assert book.ready("general", max_age=0) is first  # past it: one starts behind
    assert book.idle()
    assert book.ready("general", max_age=3600) is not first


def test_a_quick_fit_is_still_made_at_once(books):
    ledger, book = books
    judge_panel(ledger, [("fast", True), ("slow", False)])
    first = book.ready("general")
    assert first is not None and not slow(first)
    judge_panel(ledger, [("fast", True), ("slow", False)])
    again = book.ready("general")  # a quick refit: no stale figures, no thread
    assert again is not first and again.of("fast").wins == 2
    assert not book.refitting("general")


def test_a_slow_fit_rests_a_multiple_of_its_own_length_before_it_is_redone(tmp_path):
    # verdicts that never stop would otherwise keep a fit of seconds running back to back
    home = open_home(tmp_path / "data")
    ledger = Ledger.of_home(home)
    book = Ratings.of_home(home, ledger, rest=1e9)  # a rest of a billion fits' lengths
    try:
        judged_round(ledger)
        first = book.of("general")
        judged_round(ledger, shift=1)
        assert book.ready("general", max_age=0) is first
        assert not book.refitting("general"), "no refit before the rest after the last one"
    finally:
        book.close()
        ledger.close()


def test_the_ratings_page_is_told_a_first_slow_fit_is_being_made_not_made_to_wait(api, folder):
    with Ledger.of_home(folder) as ledger:  # another process's verdicts, followed by the page
        judged_round(ledger)
    status, body, _ = api.get("/api/ratings")
    assert status == 200 and body["shapes"] == ["general"]
    [general] = body["data"]
    assert general["fitting"] is True and general["models"] == []
    assert api.server.parts.panels.ratings.idle()
    status, body, _ = api.get("/api/ratings")
    [general] = body["data"]
    assert general["fitting"] is False and general["refitting"] is False
    assert len(general["models"]) == len(MODELS)
