"""The shared waits of ``support.waiting`` end in time, by the clock and by a count of polls, and
their failures name what was awaited and the last value seen."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from support import waiting
from support.waiting import polls_max, wait_equal, wait_until, wait_until_async


def test_wait_until_returns_the_first_truthy_result():
    values = iter([0, None, [], "ready"])
    assert wait_until(lambda: next(values), "ready", 5.0, poll_s=0.001) == "ready"


def test_a_failure_names_what_was_awaited_the_last_value_and_the_explanation():
    counter = itertools.count()
    with pytest.raises(AssertionError) as failed:
        wait_until(
            lambda: next(counter) > 10**9 and "never",
            "the impossible",
            0.05,
            poll_s=0.01,
            explain=lambda: "the process log",
        )
    message = str(failed.value)
    assert "waiting for the impossible; last seen: False" in message
    assert message.endswith("\nthe process log")


def test_wait_equal_shows_the_last_value_read():
    with pytest.raises(AssertionError, match=r"rates == 7; last seen: 3"):
        wait_equal(lambda: 3, 7, "rates", 0.05, poll_s=0.01)
    assert wait_equal(iter([1, 2, 7]).__next__, 7, "rates", 5.0, poll_s=0.001) == 7


def test_a_clock_that_does_not_move_still_ends_the_wait(monkeypatch):
    monkeypatch.setattr(waiting.time, "monotonic", lambda: 0.0)
    monkeypatch.setattr(waiting.time, "sleep", lambda _s: None)
    polls = []
    with pytest.raises(AssertionError, match=r"\(12 polls\)"):
        wait_until(lambda: polls.append(1), "a frozen clock", 1.0, poll_s=0.1)
    assert len(polls) == polls_max(1.0, 0.1) == 12


def test_the_count_bound_never_ends_a_wait_before_the_time_bound_on_a_real_clock():
    # Polls at least poll_s apart: the deadline passes within ceil(timeout / poll) + 1 polls.
    for timeout_s, poll_s in [(1.0, 0.2), (0.3, 0.1), (10.0, 3.0), (0.05, 0.05)]:
        assert (polls_max(timeout_s, poll_s) - 1) * poll_s > timeout_s


def test_wait_until_async_polls_between_sleeps_of_the_loop():
    async def scenario() -> str:
        state = {"n": 0}

        async def bump() -> None:
            for _ in range(3):
                await asyncio.sleep(0.001)
                state["n"] += 1

        task = asyncio.ensure_future(bump())
        result = await wait_until_async(
            lambda: state["n"] == 3 and "done", "three", 5.0, poll_s=0.001
        )
        await task
        return result

    assert asyncio.run(scenario()) == "done"
    with pytest.raises(AssertionError, match="waiting for nothing; last seen: None"):
        asyncio.run(wait_until_async(lambda: None, "nothing", 0.02, poll_s=0.005))


def test_a_wait_without_a_pause_between_polls_is_refused_not_divided_by_zero():
    with pytest.raises(ValueError, match="poll_s must be positive"):
        wait_until(lambda: True, "anything", 1.0, poll_s=0.0)
