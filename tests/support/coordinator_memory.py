"""The coordinator runtime's log port in memory, for unit tests of the group coordinator:
appends, a high watermark that moves (or not), and loading from the same records, with the
producer of a transactional batch and the transaction markers (``append_marker``, what
WriteTxnMarkers appends) in log order."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator

from odradek.coordinator.runtime import CoordinatorRuntime, LoggedMarker, LoggedRecord
from odradek.errors import NotLeaderOrFollowerError, RequestTimedOutError
from odradek.storage.batch import NO_PRODUCER_ID, BatchHeader
from odradek.storage.records import decode_records
from support.virtual_clock import TIMEOUT_S, on_virtual_clock
from support.waiting import wait_until_async

__all__ = ["MemoryLog", "in_loop", "in_real_loop", "loaded"]


class MemoryLog:
    """The log port in memory: a list of records per partition and a high watermark."""

    def __init__(self) -> None:
        self.records: dict[int, list[LoggedRecord | LoggedMarker]] = {}
        self.high_watermark: dict[int, int] = {}
        self.leader_epoch: dict[int, int] = {}
        self.replicate = True  # False: the HW does not move (an ISR that does not fetch)

    async def append(self, partition: int, leader_epoch: int, batch: bytes) -> int:
        if self.leader_epoch.get(partition) != leader_epoch:
            raise NotLeaderOrFollowerError("deposed")
        log = self.records.setdefault(partition, [])
        header = BatchHeader.parse(batch)
        producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
        for record in decode_records(batch):
            log.append(LoggedRecord(len(log), record.key, record.value, producer_id))
        if self.replicate:
            self.high_watermark[partition] = len(log)
        return len(log)

    def append_marker(self, partition: int, producer_id: int, committed: bool) -> int:
        """A transaction marker, as WriteTxnMarkers appends it; its offset."""
        log = self.records.setdefault(partition, [])
        log.append(LoggedMarker(len(log), producer_id, committed))
        if self.replicate:
            self.high_watermark[partition] = len(log)
        return len(log) - 1

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None:
        if self.high_watermark.get(partition, 0) < offset:
            await asyncio.sleep(timeout_ms / 1000)
            raise RequestTimedOutError("not replicated")

    def read_all(self, partition: int) -> Iterator[LoggedRecord | LoggedMarker]:
        return iter(list(self.records.get(partition, [])))


def in_loop(test):
    """Run an async test in a fresh event loop on the virtual clock (``support.virtual_clock``):
    the coordinators' timers fire at once, in order, the test's sleeps cost no real time."""
    return on_virtual_clock(test)


def in_real_loop(test):
    """``in_loop`` on the real clock, for a test that fails on the virtual one (see its comment)."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(asyncio.wait_for(test(), TIMEOUT_S))

    return run


async def loaded(runtime: CoordinatorRuntime, partition: int) -> None:
    """Until ``runtime`` has loaded ``partition`` (replayed its records) and serves it."""
    await wait_until_async(
        lambda: runtime.is_active(partition), f"partition {partition} loaded", 1.0, poll_s=0.01
    )
