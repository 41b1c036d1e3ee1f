"""A partition as one broker sees it: its log, who leads it, and who is in sync.

The controller decides leadership (LeaderAndIsr); a ``Partition`` applies it and enforces the
rules of the data path:

- Only the leader takes produce requests; anything else answers NOT_LEADER_OR_FOLLOWER.
- A leader epoch only grows: state carrying an older epoch than the current one is ignored.
- ``acks=all`` needs at least ``min.insync.replicas`` replicas in the ISR *before* the append,
  else NOT_ENOUGH_REPLICAS and nothing is written.
- The high watermark is the smallest log end offset across the ISR. With this broker alone in
  the ISR (every partition has one replica until replication lands) it follows the log end
  offset after each append. Consumers read below it.
- Every append wakes the fetches waiting for data on this partition (``wait_for_data``).
- With ``flush.messages`` reached, an append is answered (and its records made visible) only
  after the storage flush thread fsynced it; the event loop never runs the fsync itself.
- Appends to one partition happen one at a time (``_appending``, an asyncio lock): offsets are
  assigned when an append starts and published when its bytes are written, which for a large
  record set happens on a writer thread while the loop serves everyone else; the next append
  waits for that one to be published (and fsynced, with ``flush.messages``).

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from odradek.broker.workers import INLINE_DECOMPRESSED_MAX_BYTES, Placement, Workers
from odradek.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from odradek.storage.compression import DecompressionLimitError
from odradek.storage.log import Log, LogAppendInfo
from odradek.storage.validator import AppendOrigin, ValidatedRecords

ACKS_ALL = -1


@dataclass(slots=True)
class PartitionState:
    """What the controller says about a partition (a LeaderAndIsr partition state)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = 0  # the state znode's version, as Kafka's zkVersion


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log
    state: PartitionState
    _data_arrived: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _appending: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    def apply_state(self, state: PartitionState) -> bool:
        """Take the controller's view unless it is older than ours; True if applied."""
        if state.leader_epoch < self.state.leader_epoch:
            return False
        self.state = state
        if self.is_leader:
            self._advance_high_watermark()
        return True

    async def append_as_leader(
        self, records: bytes | memoryview, acks: int, workers: Workers | None = None
    ) -> LogAppendInfo:
        """Append a producer's record set; raises the Kafka error a produce answer carries.

        Validation of a large or compressed record set runs on ``workers`` (off the event loop;
        ``Workers.placement`` decides); leadership and the ISR are checked before it and again
        after, since the controller may have moved the partition meanwhile.
        """
        self._check_can_append(acks)
        validated = await self._validate(records, workers)
        async with self._appending:
            self._check_can_append(acks)  # the controller may have moved it meanwhile
            epoch = self.state.leader_epoch
            if workers is not None and validated.size_in_bytes >= workers.write_offload_min_bytes:
                info = await self._append_on_writer_thread(validated, epoch, workers)
            else:
                info = self.log.append_validated(validated, leader_epoch=epoch)
            if info.flush_before_ack:
                # flush.messages: acknowledged means fsynced, as in Kafka; the fsync runs on a
                # storage flush thread and the loop serves others meanwhile. Consumers see the
                # records once they are durable, as Kafka's leader moves its high watermark
                # after the flush in its append path.
                await asyncio.wrap_future(self.log.flush_in_background())
            self._advance_high_watermark()
        self._wake_fetchers()
        return info

    async def _validate(
        self, records: bytes | memoryview, workers: Workers | None
    ) -> ValidatedRecords:
        """Validate where ``workers`` says: on the loop, bounded on the loop, or on a thread."""
        log, client = self.log, AppendOrigin.CLIENT
        if workers is None:
            return log.validate(records, origin=client)
        placement = workers.placement(records, log.config)
        if placement is Placement.INLINE:
            return log.validate(records, origin=client)
        if placement is Placement.INLINE_BOUNDED:
            try:
                return log.validate(
                    records, origin=client, max_decompressed_bytes=INLINE_DECOMPRESSED_MAX_BYTES
                )
            except DecompressionLimitError:
                pass  # it expands further: validated again with the real limit, off the loop
        return await workers.validate(log.validate, records, origin=client)

    async def _append_on_writer_thread(
        self, validated: ValidatedRecords, leader_epoch: int, workers: Workers
    ) -> LogAppendInfo:
        """Prepare on the loop, write the bytes on a writer thread, publish on the loop."""
        prepared = self.log.prepare_append(validated, leader_epoch=leader_epoch, writer_thread=True)
        if isinstance(prepared, LogAppendInfo):
            return prepared  # nothing to write: a producer's retry
        try:
            await workers.write(self.log.write_prepared, prepared)
        except asyncio.CancelledError:
            # Only at shutdown. The thread may still be writing past the segment's end: wait
            # for it, so that nothing else ever writes there at the same time.
            workers.wait_for_writes()
            raise
        finally:
            self.log.abandon(prepared)
        return self.log.publish_prepared(prepared)

    def _check_can_append(self, acks: int) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {self.name} "
                f"(leader {self.state.leader}, epoch {self.state.leader_epoch})"
            )
        min_isr = self.log.config.min_insync_replicas
        if acks == ACKS_ALL and len(self.state.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"{self.name} has {len(self.state.isr)} in-sync replicas "
                f"{list(self.state.isr)}, below min.insync.replicas {min_isr}"
            )

    def _advance_high_watermark(self) -> None:
        """HW = smallest LEO in the ISR; alone in the ISR, that is our own LEO."""
        if tuple(self.state.isr) == (self.broker_id,):
            self.log.update_high_watermark(self.log.log_end_offset)

    def _wake_fetchers(self) -> None:
        self._data_arrived.set()
        self._data_arrived = asyncio.Event()

    def data_arrived(self) -> asyncio.Event:
        """An event set at the next append; a waiting fetch awaits it."""
        return self._data_arrived


async def wait_for_any(partitions: Sequence[Partition], timeout_s: float) -> bool:
    """Wait until one of ``partitions`` gets an append, or the timeout; True if data came."""
    if not partitions or timeout_s <= 0:
        return False
    waiters = [asyncio.ensure_future(p.data_arrived().wait()) for p in partitions]
    try:
        done, _ = await asyncio.wait(
            waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        return bool(done)
    finally:
        for waiter in waiters:
            waiter.cancel()
