"""ZooKeeper writes of one controller event, pipelined: several in flight, not one at a time.

An event that moves thousands of partitions (a broker lost, a controlled shutdown, a topic of
many partitions created) writes one state znode per partition. Awaited one after another, each
write costs a ZooKeeper round trip and its log's fsync, so 3,000 partitions took seconds;
Kafka's ZooKeeper-mode controller sends them asynchronously with up to
``zookeeper.max.in.flight.requests`` (10) outstanding (``ZooKeeperClient.handleRequests``).
``for_each`` does the same for any per-partition step of an event, and the ZooKeeper client
pipelines the requests on its one session.

What stays as it was: every write is still its own fenced, conditional transaction
(``store``), so a failure touches only its partition. A step records its own outcome (the
model after its write, the requests in the event's batch), so what succeeded is recorded
whatever the others do; the first error (by position) is raised once every step has finished,
as a sequential loop would have raised it, only later. Results come back in the order of the
inputs. Callers give each step its own partition (or one partition's replicas one after
another), never the same partition to two steps at once.

Runs on the controller's event loop, inside one event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

ZK_WRITES_IN_FLIGHT = 10  # Kafka's zookeeper.max.in.flight.requests default

T = TypeVar("T")
R = TypeVar("R")


async def for_each(
    items: Iterable[T],
    step: Callable[[T], Awaitable[R]],
    *,
    in_flight: int = ZK_WRITES_IN_FLIGHT,
) -> list[R]:
    """``step`` for each of ``items``, at most ``in_flight`` at once; their results in order.

    If steps raised, the first of them (by position) is raised after every step has finished.
    """
    if in_flight < 1:
        raise ValueError("in_flight must be at least 1")
    slots = asyncio.Semaphore(in_flight)

    async def bounded(item: T) -> R:
        async with slots:
            return await step(item)

    results = await asyncio.gather(*(bounded(item) for item in items), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)  # type: ignore[arg-type]
