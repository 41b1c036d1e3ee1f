"""``time_slices``: a long list is worked through with a turn of the loop at least every slice,
each distinct key answered once (distinct filters too), generator steps run in slices, and
the time a ``TimedHandler`` charges is still all of it; with one element per check (a
connection's requests) the clock is read every element."""

from __future__ import annotations

import asyncio
import time

from odradek.broker.quotas import TimedHandler
from odradek.time_slices import (
    CHECK_EVERY,
    TimeSlices,
    answer_each,
    converted,
    distinct,
    run_at_once,
    run_sliced,
    sliced,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_slice_gives_the_loop_a_turn_once_it_has_lasted_its_time():
    clock = FakeClock()
    others: list[int] = []

    async def work() -> int:
        slices = TimeSlices(slice_s=0.003, clock=clock)
        count = 0
        async for _ in sliced(range(CHECK_EVERY * 10), slices):
            clock.now += 0.001  # each element costs 1 ms
            count += 1
        return slices.yields

    async def main() -> int:
        loop = asyncio.get_running_loop()
        for i in range(50):
            loop.call_soon(others.append, i)
        return await work()

    yields = asyncio.run(main())
    assert yields == 10  # every CHECK_EVERY elements the slice (3 ms) was over
    assert others == list(range(50))  # the loop ran its other callbacks meanwhile


def test_one_element_per_check_yields_as_soon_as_the_slice_is_over_and_restart_begins_anew():
    # A connection's requests: each is an element (check_every=1); a wait of its own restarts.
    clock = FakeClock()

    async def main() -> list[int]:
        slices = TimeSlices(slice_s=0.003, clock=clock, check_every=1)
        seen = []
        for cost_s in (0.002, 0.002, 0.001, 0.001):
            clock.now += cost_s
            await slices.tick()
            seen.append(slices.yields)
        clock.now += 0.01  # idle: the connection waited for its next request (a turn)
        slices.restart()
        clock.now += 0.001
        await slices.tick()
        seen.append(slices.yields)
        return seen

    assert asyncio.run(main()) == [0, 1, 1, 1, 1]


def test_a_cheap_list_does_not_yield_at_all():
    async def main() -> int:
        slices = TimeSlices(slice_s=60.0)
        async for _ in sliced(range(10_000), slices):
            pass
        return slices.yields

    assert asyncio.run(main()) == 0


def test_each_distinct_key_is_answered_once_in_request_order():
    asked: list[str] = []

    async def answer(key: str) -> str:
        asked.append(key)
        return key.upper()

    keys = ["a", "", "a", "b", ""] * 1000
    answers = asyncio.run(answer_each(keys, answer))
    assert answers == [k.upper() for k in keys]
    assert asked == ["a", "", "b"]


def test_the_time_charged_to_a_request_includes_every_slice():
    async def handler() -> None:
        slices = TimeSlices(slice_s=0.001)
        async for _ in sliced(range(CHECK_EVERY * 20), slices):
            started = time.perf_counter()
            while time.perf_counter() - started < 0.0001:
                pass
        assert slices.yields > 5

    async def main() -> int:
        timed = TimedHandler(handler())
        await timed
        return timed.elapsed_ns

    elapsed_s = asyncio.run(main()) / 1e9
    assert elapsed_s >= CHECK_EVERY * 20 * 0.0001


def test_a_chunk_counts_as_its_elements():
    clock = FakeClock()

    async def main() -> int:
        slices = TimeSlices(slice_s=0.003, clock=clock)
        for _ in range(10):
            clock.now += 0.001 * CHECK_EVERY  # a chunk of CHECK_EVERY elements, 1 ms each
            await slices.tick(CHECK_EVERY)
        return slices.yields

    assert asyncio.run(main()) == 10


def test_distinct_keeps_the_first_order_and_yields_as_it_goes():
    clock = FakeClock()

    async def main() -> tuple[list[str], int]:
        slices = TimeSlices(slice_s=0.003, clock=clock)

        def names():
            for i in range(CHECK_EVERY * 10):
                clock.now += 0.001
                yield "b" if i % 2 else "a"

        return await distinct(names(), slices), slices.yields

    assert asyncio.run(main()) == (["a", "b"], 10)


def test_steps_run_in_slices_or_at_once_to_the_same_value():
    clock = FakeClock()

    def steps():
        total = 0
        for i in range(CHECK_EVERY * 10):
            clock.now += 0.001
            total += i
            yield
        return total

    async def main() -> tuple[int, int]:
        slices = TimeSlices(slice_s=0.003, clock=clock)
        return await run_sliced(steps(), slices), slices.yields

    expected = sum(range(CHECK_EVERY * 10))
    assert asyncio.run(main()) == (expected, 10)
    assert run_at_once(steps()) == expected


def test_converted_slices_a_long_array_and_converts_a_short_one_at_once():
    clock = FakeClock()

    def cost(x: int) -> int:
        clock.now += 0.001  # each element costs 1 ms
        return x * 2

    async def main() -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
        short_slices = TimeSlices(slice_s=0.003, clock=clock)
        short = await converted(range(CHECK_EVERY), cost, short_slices)
        long_slices = TimeSlices(slice_s=0.003, clock=clock)
        long = await converted(range(CHECK_EVERY * 4), cost, long_slices)
        return short, long, short_slices.yields, long_slices.yields

    short, long, short_yields, long_yields = asyncio.run(main())
    assert short == tuple(x * 2 for x in range(CHECK_EVERY)) and short_yields == 0
    assert long == tuple(x * 2 for x in range(CHECK_EVERY * 4)) and long_yields == 4
