"""What a coordinator operation returns to the runtime (``runtime.write``): records to append,
the answer, and how the answer and the records relate. Its own module so the group
coordinator's managers (``groups.offsets``, ``.classic``, ``.consumer``, ``.admin``) and the
transaction coordinator's shard build one without importing the runtime.

A ``Result`` with a ``producer`` (TxnOffsetCommit) is written as a transactional batch of that
producer (its id and epoch, base sequence -1, as Kafka's coordinators write them): the partition
then has an open transaction of the producer until its marker, and the records are replayed as
that producer's (pending until the marker). Without one, the batch has no producer.

Plain values, built and read on the event loop that runs the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from odradek.coordinator.records import CoordinatorRecord

__all__ = ["Result", "TxnProducer"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer whose batch the records are written in."""

    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class Result(Generic[T]):
    """What an operation did: records to write, and the answer."""

    records: Sequence[CoordinatorRecord] = ()
    response: T | None = None
    # The answer comes later (a JoinGroup waiting for the rebalance): awaited after the write.
    deferred: Awaitable[T] | None = None
    # False: the operation applied its change itself; the records only persist it.
    replay: bool = True
    # Called with None once the records are replicated, or with the error that failed them.
    on_written: Callable[[BaseException | None], None] | None = None
    # Write the records in a transactional batch of this producer (None: no producer).
    producer: TxnProducer | None = None
