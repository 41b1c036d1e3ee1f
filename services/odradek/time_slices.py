"""Work on a long list in time slices, so one request never holds an event loop for long.

A service serves every client from one asyncio event loop (``observability.loop_monitor``
measures how late it runs). A request made of a huge array of tiny elements (a million empty
group ids fit in 1 MB) would otherwise be handled in one go: each element costs microseconds,
all of them seconds, and every other client of that process waits as long. Kafka runs such
requests on request handler threads beside its network threads; here the handler gives the loop
back every ``SLICE_S`` of its own time instead (``await asyncio.sleep(0)``: one turn of the loop,
in which other connections are read and answered).

``TimeSlices`` is the one home of that rule; ``sliced``, ``answer_each`` and ``converted`` are the
shapes the handlers use. A slice's time is measured (``time.perf_counter``), checked every
``CHECK_EVERY`` elements so the clock is not read per element. The CPU time a request is charged for
(``broker.quotas.TimedHandler``, ``request_percentage``) is still the whole of it: that wrapper
adds up every step of the handler coroutine, and yielding only splits the work into more steps.

Not thread-safe: one ``TimeSlices`` per request, used on the event loop running it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Sequence
from typing import TypeVar

__all__ = ["CHECK_EVERY", "SLICE_S", "TimeSlices", "answer_each", "converted", "sliced"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

SLICE_S = 0.003  # the longest stretch of one request's work on the loop between two yields
CHECK_EVERY = 32  # elements between two reads of the clock


class TimeSlices:
    """Counts a request's elements and yields to the loop once its slice is used up."""

    __slots__ = ("slice_s", "clock", "_started", "_count", "yields")

    def __init__(self, slice_s: float = SLICE_S, clock: Callable[[], float] = time.perf_counter):
        self.slice_s = slice_s
        self.clock = clock
        self._started = clock()
        self._count = 0
        self.yields = 0  # how many times it gave the loop back (tests and logs)

    async def tick(self) -> None:
        """One element done: give the loop a turn if this slice has lasted ``slice_s``."""
        self._count += 1
        if self._count % CHECK_EVERY:
            return
        if self.clock() - self._started >= self.slice_s:
            await asyncio.sleep(0)
            self.yields += 1
            self._started = self.clock()


async def sliced(items: Iterable[T], slices: TimeSlices | None = None) -> AsyncIterator[T]:
    """``items``, one by one, yielding to the loop between elements every slice."""
    slices = slices if slices is not None else TimeSlices()
    for item in items:
        yield item
        await slices.tick()


async def answer_each(
    keys: Iterable[K],
    answer: Callable[[K], Awaitable[R]],
    slices: TimeSlices | None = None,
) -> list[R]:
    """``[await answer(k) for k in keys]`` in time slices, each distinct key answered once.

    For the APIs whose answer to an element depends on that element alone (describe a group,
    find a coordinator): a request naming one id a million times costs one look-up and a million
    copies of its answer, in request order, as Kafka answers each occurrence."""
    slices = slices if slices is not None else TimeSlices()
    answered: dict[K, R] = {}
    results: list[R] = []
    for key in keys:
        if key in answered:
            result = answered[key]
        else:
            result = answered[key] = await answer(key)
        results.append(result)
        await slices.tick()
    return results


async def converted(
    items: Sequence[T], convert: Callable[[T], R], slices: TimeSlices | None = None
) -> tuple[R, ...]:
    """``tuple(convert(x) for x in items)``, in time slices when ``items`` is long.

    For the arrays inside each element of a request's array (a resource's configs): most are
    short, and an async generator for each of 142,000 short arrays costs more than they do."""
    if len(items) <= CHECK_EVERY:
        return tuple(convert(x) for x in items)
    return tuple([convert(x) async for x in sliced(items, slices)])
