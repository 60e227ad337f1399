"""Cooldowns on hosts whose clocks disagree: a cooldown's end is written on the database's
clock and read back onto each host's, so a 20 s rest asked by an upstream is a 20 s rest on
every host, whether the host that wrote it runs 300 s fast or 300 s slow."""

import time

import pytest

from panelist.metrics.ledger.ledger import Ledger


@pytest.mark.parametrize("skew", [300.0, -300.0])
def test_a_cooldown_lasts_what_was_asked_on_every_host(tmp_path, pg_url, skew):
    with (
        Ledger(tmp_path / "skewed", database=pg_url, clock=lambda: time.time() + skew) as off,
        Ledger(tmp_path / "right", database=pg_url) as right,
    ):
        off.cool_down("m1", 20, "rate_limit: 429")
        for ledger, clock in ((right, time.time), (off, lambda: time.time() + skew)):
            ledger.catch_up()
            until = ledger.states(["m1"], "code", now=clock())["m1"].cooling_until
            # on each host's own clock, the rest ends about 20 s from now (not 20 ± 300)
            assert 10 < until - clock() <= 21, (skew, until - clock())


def test_a_cooldown_written_before_the_shared_clock_is_taken_as_it_was(tmp_path, pg_url):
    with Ledger(tmp_path / "a", database=pg_url) as ledger:
        ends = time.time() + 30
        ledger._logs.append(
            {
                "v": 1,
                "kind": "cooldown",
                "ts": "2026-01-01T00:00:00Z",
                "alias": "m2",
                "until": ends,
                "seconds": 30,
                "reason": "old",
            }
        )
        ledger.catch_up()
        assert ledger.states(["m2"], "code")["m2"].cooling_until == pytest.approx(ends)
