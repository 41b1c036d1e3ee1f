"""pipelined.for_each: several steps in flight, results in order, the first error last."""

from __future__ import annotations

import asyncio

import pytest

from odradek.controller.pipelined import for_each


def test_steps_overlap_up_to_the_bound_and_results_keep_their_order():
    running = 0
    most = 0

    async def step(n: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (5 - n % 5))  # later ones finish first
        running -= 1
        return n * n

    assert asyncio.run(for_each(range(20), step, in_flight=4)) == [n * n for n in range(20)]
    assert most == 4


def test_every_step_finishes_before_the_first_error_is_raised():
    finished = []

    async def step(n: int) -> int:
        await asyncio.sleep(0.001 * n)
        if n in (1, 3):
            raise KeyError(n)
        finished.append(n)
        return n

    with pytest.raises(KeyError) as raised:
        asyncio.run(for_each(range(6), step))
    assert raised.value.args == (1,)  # the first by position
    assert sorted(finished) == [0, 2, 4, 5]  # the others still wrote and recorded


def test_a_bound_below_one_is_refused():
    async def step(n: int) -> int:
        return n

    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(for_each([1], step, in_flight=0))
