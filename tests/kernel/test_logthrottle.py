"""A warning that can repeat for every message is written once per kind and interval, and what it left out is counted."""

import logging

import pytest

from mnemobus.shared.logthrottle import ThrottledLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def throttled(clock: Clock) -> ThrottledLog:
    return ThrottledLog(logging.getLogger("test.throttle"), interval_s=10, clock=clock)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.throttle"]


def test_the_first_occurrence_is_written_at_once(throttled, caplog):
    throttled.warning("timeout", "recall for %s timed out", "user_a")
    assert _lines(caplog) == ["recall for user_a timed out"]


def test_repeats_within_the_interval_are_not_written(throttled, clock, caplog):
    for i in range(50):
        throttled.warning("timeout", "recall %d timed out", i)
        clock.now += 0.1
    assert _lines(caplog) == ["recall 0 timed out"]


def test_the_next_line_after_the_interval_says_how_many_were_left_out(throttled, clock, caplog):
    for i in range(5):
        throttled.warning("timeout", "recall %d timed out", i)
        clock.now += 1
    clock.now += 10
    throttled.warning("timeout", "recall %d timed out", 99)
    assert _lines(caplog)[-1] == "recall 99 timed out (and 4 more like it in the last 15 s)"


def test_each_kind_has_its_own_interval(throttled, caplog):
    throttled.warning("timeout", "timed out")
    throttled.warning("error", "failed")
    throttled.warning("timeout", "timed out again")
    assert _lines(caplog) == ["timed out", "failed"]
