"""Work on a long list in time slices, so one request never holds an event loop for long.

A service serves every client from one asyncio event loop (``observability.loop_monitor``
measures how late it runs). A request made of a huge array of tiny elements (a million empty
group ids fit in 1 MB) would otherwise be handled in one go: each element costs microseconds,
all of them seconds, and every other client of that process waits as long. Kafka runs such
requests on request handler threads beside its network threads; here the handler gives the loop
back every ``SLICE_S`` of its own time instead (``await asyncio.sleep(0)``: one turn of the loop,
in which other connections are read and answered).

``TimeSlices`` is the one home of that rule; ``sliced``, ``answer_each``, ``distinct``,
``converted`` and ``run_sliced`` are the shapes the handlers use. A broker connection uses it
too, one request per element: requests pipelined on one connection are handled one after the
other without any of them waiting (each cheap, its answer written at once), so without it a
thousand of them would hold the loop as one. A slice's time is measured (``time.perf_counter``),
checked every ``check_every`` elements (``CHECK_EVERY`` by default) so the clock is not read per
element. The CPU time a request is charged for
(``broker.quotas.TimedHandler``, ``request_percentage``) is still the whole of it: that wrapper
adds up every step of the handler coroutine, and yielding only splits the work into more steps.

Not thread-safe: one ``TimeSlices`` per request (or connection), used on the event loop running
it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Hashable,
    Iterable,
    Sequence,
)
from typing import TypeVar

__all__ = [
    "CHECK_EVERY",
    "SLICE_S",
    "TimeSlices",
    "answer_each",
    "converted",
    "distinct",
    "run_at_once",
    "run_sliced",
    "sliced",
]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

SLICE_S = 0.003  # the longest stretch of one request's work on the loop between two yields
CHECK_EVERY = 32  # elements between two reads of the clock


class TimeSlices:
    """Counts a request's elements and yields to the loop once its slice is used up."""

    __slots__ = ("slice_s", "clock", "check_every", "_started", "_count", "yields")

    def __init__(
        self,
        slice_s: float = SLICE_S,
        clock: Callable[[], float] = time.perf_counter,
        check_every: int = CHECK_EVERY,  # 1 where an element is a whole request
    ):
        self.slice_s = slice_s
        self.clock = clock
        self.check_every = check_every
        self._started = clock()
        self._count = 0
        self.yields = 0  # how many times it gave the loop back (tests and logs)

    def restart(self) -> None:
        """A new slice from now: the caller just gave the loop a turn of its own (it waited)."""
        self._started = self.clock()

    async def tick(self, elements: int = 1) -> None:
        """``elements`` done (one, or a chunk a domain call took at once): give the loop a
        turn if this slice has lasted ``slice_s``."""
        self._count += elements
        if self._count < self.check_every:
            return
        self._count = 0
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


async def distinct(items: Iterable[K], slices: TimeSlices | None = None) -> list[K]:
    """The distinct elements of ``items`` in the order first seen, in time slices.

    For filters a request lists (ListGroups' states, ListTransactions' states): what they
    admit depends on the distinct names only, so each shard is handed those, not a million
    repeats of one name to go through again."""
    slices = slices if slices is not None else TimeSlices()
    seen: dict[K, None] = {}
    for item in items:
        seen[item] = None
        await slices.tick()
    return list(seen)


async def run_sliced(steps: Generator[None, None, R], slices: TimeSlices | None = None) -> R:
    """What the generator ``steps`` returns, run in time slices: it ``yield``s after each
    element. For work a plain function must also be able to do at once (``run_at_once``): an
    ``error_response`` that another module calls synchronously builds the same answer."""
    slices = slices if slices is not None else TimeSlices()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await slices.tick()


def run_at_once(steps: Generator[None, None, R]) -> R:
    """What the generator ``steps`` returns, run to its end without yielding to the loop."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


async def converted(
    items: Sequence[T], convert: Callable[[T], R], slices: TimeSlices | None = None
) -> tuple[R, ...]:
    """``tuple(convert(x) for x in items)``, in time slices when ``items`` is long.

    For the arrays inside each element of a request's array (a resource's configs): most are
    short, and an async generator for each of 142,000 short arrays costs more than they do."""
    if len(items) <= CHECK_EVERY:
        return tuple(convert(x) for x in items)
    return tuple([convert(x) async for x in sliced(items, slices)])
