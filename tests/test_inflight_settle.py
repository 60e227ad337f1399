"""The in-flight memory budget's grants (``InFlight``): a grant whose request is answered is
*settling*; a request that fits once the settling grants are back waits for them instead of
being refused, and one that would not fit even then is refused at once. In process, threads
and events only."""

import threading

from panelist.metrics.server.front.memory import InFlight


def test_a_grant_that_does_not_fit_is_refused_at_once_when_none_is_settling():
    budget = InFlight(100)
    assert budget.take(80)
    assert not budget.fits(30) and not budget.fits(30, soon=True)
    assert not budget.take(30, wait=3600)  # nothing answered: waiting could not help
    assert budget.held == 80


def test_a_grant_waits_for_an_answered_request_s_grant_to_come_back():
    budget = InFlight(100)
    assert budget.take(80)
    budget.settle(80)  # its reply is written; the collection and give are still to come
    assert not budget.fits(30) and budget.fits(30, soon=True)
    got, started = [], threading.Event()

    def second():
        started.set()
        got.append(budget.take(30, wait=3600))

    thread = threading.Thread(target=second)
    thread.start()
    try:
        assert started.wait(10)
        budget.give(80, settled=80)
    finally:
        thread.join(10)
    assert got == [True]
    assert (budget.held, budget.settling) == (30, 0)


def test_a_grant_larger_than_what_settles_is_still_refused_at_once():
    budget = InFlight(100)
    assert budget.take(50) and budget.take(40)
    budget.settle(40)  # only 40 will come back soon; 50 stay held by a request in progress
    assert not budget.fits(60, soon=True)
    assert not budget.take(60, wait=3600)
    assert budget.take(50, wait=0) is False  # fits soon, but told not to wait
    assert (budget.held, budget.settling) == (90, 40)
