"""A partition as one broker sees it, and every rule of the replica it hosts, leader or follower.

The controller decides who leads (LeaderAndIsr); a ``Partition`` applies that and enforces the
replica rules (Kafka's ``Partition``):

Epochs
- ``make_leader`` / ``make_follower`` take a controller state only if its leader epoch is above
  the one held (``_accepts``, the one fence); anything older is stale and changes nothing.
- A request naming a leader epoch (Fetch, OffsetForLeaderEpoch, ListOffsets) is checked against
  ours once (``check_leader_epoch``): older is FENCED_LEADER_EPOCH (the sender is behind), newer
  is UNKNOWN_LEADER_EPOCH (this broker is behind), -1 skips the check.
- A new leader records its epoch's start offset, its log end offset (LEO) at election, in the
  leader-epoch cache (``Log.assign_epoch_start_offset``). Followers compare their history with it
  (``last_fetched_epoch`` in Fetch): where they diverge, the fetch answers ``diverging_epoch`` and
  the follower truncates there, never to its high watermark alone.

High watermark (HW), on the leader
- HW = the smallest LEO among the leader and every replica of the *maximal* ISR: the ISR plus a
  replica being added by an ISR change in flight. A follower counts only once it has fetched under
  this leader (its LEO is the offset of its last fetch). The HW only grows while one leader leads.
- Consumers read below the HW; followers read to the LEO and learn the HW from each answer.

The ISR, on the leader (KIP-497)
- A follower out of the ISR joins once its LEO has reached the HW and this leader's epoch start.
- A follower in the ISR that has not caught up for ``replica.lag.time.max.ms`` is dropped
  (``maybe_shrink_isr``, run periodically).
- A change is only proposed (``IsrProposal``) and sent to the controller with AlterPartition; one
  is in flight at a time, and the ISR changes only once the controller committed it. Meanwhile
  the maximal ISR keeps the HW safe both ways: a shrink is not counted before it is committed, an
  expansion is counted at once. A leader whose epoch was replaced cannot commit anything: its
  AlterPartition is refused, so a zombie leader cannot shrink the ISR to itself and complete an
  ``acks=all`` write alone.

Produce
- Only the leader appends producer batches (else NOT_LEADER_OR_FOLLOWER). ``acks=all`` needs the
  ISR at ``min.insync.replicas`` or more before the append (else NOT_ENOUGH_REPLICAS, nothing
  written). Its answer waits until the HW passes the batch (``wait_for_high_watermark``); if the
  ISR is then below ``min.insync.replicas`` it is NOT_ENOUGH_REPLICAS_AFTER_APPEND, and if the
  replica stops leading meanwhile, NOT_LEADER_OR_FOLLOWER.
- With ``flush.messages`` reached, an append is answered (and its records counted for the HW) only
  after the storage flush thread fsynced it; the event loop never runs the fsync itself.
- Appends to one partition happen one at a time (``_appending``, an asyncio lock), for a leader's
  producers and a follower's fetcher alike; so do truncations.

On a follower
- The fetcher appends the leader's batches unchanged (offsets and leader epochs included),
  ``append_as_follower``, and sets the HW to min(leader's HW, own LEO).

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from odradek.broker.follower_state import FollowerState
from odradek.broker.workers import INLINE_DECOMPRESSED_MAX_BYTES, Placement, Workers
from odradek.common.clock import wall_clock_ms
from odradek.common.partitions import NO_EPOCH, NO_LEADER, TopicPartition
from odradek.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from odradek.storage.append import LogAppendInfo
from odradek.storage.compression import DecompressionLimitError
from odradek.storage.log import Log
from odradek.storage.segment import FileSlice
from odradek.storage.txn_index import AbortedTxn
from odradek.storage.validator import AppendOrigin, ValidatedRecords

log = logging.getLogger(__name__)

ACKS_ALL = -1
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
# Replication waiters whose produce request gave up are dropped once they are this many and the
# majority of those waiting.
WAITERS_PRUNE_MIN = 64


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the controller says about a partition (a LeaderAndIsr partition state)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = 0  # the state znode's version, as Kafka's zkVersion
    # Replicas a reassignment is adding (KIP-455); their catch-up is data being moved.
    adding_replicas: tuple[int, ...] = ()


NOT_HOSTED_YET = PartitionState(leader=NO_LEADER, leader_epoch=-1, isr=(), replicas=())


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An ISR change the leader asked the controller for, in flight until answered."""

    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    expanding: bool


class IsrChangeSender(Protocol):
    """Sends a proposal to the controller; later calls ``isr_change_committed`` or ``_failed``."""

    def submit(self, partition: Partition, proposal: IsrProposal) -> None: ...


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """What one partition answers a fetch: records (a file region) and its offsets."""

    records: FileSlice | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) the follower must check
    # read_committed: the aborted transactions overlapping the records sent
    aborted_transactions: tuple[AbortedTxn, ...] = ()


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log
    state: PartitionState = NOT_HOSTED_YET
    replica_lag_time_max_ms: int = 30_000
    isr_changes: IsrChangeSender | None = None
    # Called with True when a committed ISR grew, False when it shrank (the metrics).
    on_isr_change: Callable[[bool], None] | None = None
    clock_ms: Callable[[], int] = wall_clock_ms
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: IsrProposal | None = None
    leader_epoch_start_offset: int = -1
    # Fetches long-polling here (``wait_for_any``): a follower's until the log grows, a
    # consumer's until the HW moves. Each wake-up answers all of them and empties the set.
    _log_grew: set[FetchWakeUp] = field(default_factory=set, repr=False)
    _high_watermark_moved: set[FetchWakeUp] = field(default_factory=set, repr=False)
    _appending: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _waiters: list[tuple[int, int, asyncio.Future[Exception | None]]] = field(
        default_factory=list, repr=False
    )
    _waiter_ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    # -- leadership, from the controller -------------------------------------------------

    def _accepts(self, state: PartitionState) -> bool:
        return state.leader_epoch > self.state.leader_epoch

    def make_leader(self, state: PartitionState) -> bool:
        """Lead from ``state`` (its leader is this broker); False if its epoch is stale."""
        if not self._accepts(state):
            return False
        now_ms = self.clock_ms()
        was_leader = self.is_leader
        self.state = state
        self.pending_isr = None
        # A leader that stays leader (a new epoch after the controller changed the ISR) keeps
        # what it knows of its followers; a new leader knows nothing yet, as Kafka's makeLeader.
        known = self.followers if was_leader else {}
        self.followers = {}
        for replica in state.replicas:
            if replica == self.broker_id:
                continue
            follower = known.get(replica)
            if follower is None:
                follower = FollowerState(replica)
                follower.reset(now_ms, in_isr=replica in state.isr)
            self.followers[replica] = follower
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.assign_epoch_start_offset(state.leader_epoch, self.leader_epoch_start_offset)
        self._maybe_increment_high_watermark()
        return True

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state``'s leader; False if its epoch is stale. Waiting produces fail."""
        if not self._accepts(state):
            return False
        was_leader = self.is_leader
        self.state = state
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = -1
        if was_leader:
            self._fail_waiters(
                NotLeaderOrFollowerError(
                    f"broker {self.broker_id} stopped leading {self.name} "
                    f"(leader {state.leader}, epoch {state.leader_epoch})"
                )
            )
        return True

    def stop(self) -> None:
        """No longer hosted here (StopReplica): whoever waits on it gives up."""
        self._fail_waiters(
            NotLeaderOrFollowerError(f"broker {self.broker_id} stopped hosting {self.name}")
        )
        self.state = replace(self.state, leader=NO_LEADER)

    def check_leader_epoch(self, requested: int) -> None:
        if requested == NO_EPOCH:
            return
        if requested < self.state.leader_epoch:
            raise FencedLeaderEpochError(
                f"leader epoch {requested} of {self.name} is older than {self.state.leader_epoch}"
            )
        if requested > self.state.leader_epoch:
            raise UnknownLeaderEpochError(
                f"leader epoch {requested} of {self.name} is newer than "
                f"{self.state.leader_epoch} on broker {self.broker_id}"
            )

    def check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {self.name} "
                f"(leader {self.state.leader}, epoch {self.state.leader_epoch})"
            )

    # -- produce (leader) ----------------------------------------------------------------

    async def append_as_leader(
        self,
        records: bytes | memoryview,
        acks: int,
        workers: Workers | None = None,
        *,
        origin: str = AppendOrigin.CLIENT,
        wake_fetches: bool = True,
    ) -> LogAppendInfo:
        """Append a producer's record set; raises the Kafka error a produce answer carries.

        ``wake_fetches=False``: the followers' fetches waiting here are woken by the caller's
        ``wake_follower_fetches`` once it has appended every partition of its request (as
        Kafka completes delayed fetches after a produce request's appends), so a fetch woken
        reads many partitions, not the first one appended.

        ``origin`` is ``AppendOrigin.COORDINATOR`` only for the broker's own coordinators (the
        transaction coordinator's markers, WriteTxnMarkers); a client's produce never passes it.

        Validation of a large or compressed record set runs on ``workers`` (off the event loop;
        ``Workers.placement`` decides); leadership and the ISR are checked before it and again
        after, since the controller may have moved the partition meanwhile. For ``acks=all`` the
        caller then awaits ``wait_for_high_watermark(info.last_offset + 1)``.
        """
        self._check_can_append(acks)
        validated = await self._validate(records, workers, origin)
        async with self._appending:
            self._check_can_append(acks)  # the controller may have moved it meanwhile
            epoch = self.state.leader_epoch
            if workers is not None and validated.size_in_bytes >= workers.write_offload_min_bytes:
                info = await self._append_on_writer_thread(validated, epoch, workers)
            else:
                info = self.log.append_validated(validated, leader_epoch=epoch)
            if info.flush_before_ack:
                # flush.messages: acknowledged means fsynced, as in Kafka; the fsync runs on a
                # storage flush thread and the loop serves others meanwhile. The records count
                # for the high watermark once they are durable here.
                await asyncio.wrap_future(self.log.flush_in_background())
        if wake_fetches:
            self._wake(self._log_grew)
        if self.is_leader:
            self._maybe_increment_high_watermark()
        return info

    def wake_follower_fetches(self) -> None:
        """Wake the followers' fetches waiting for this log to grow (after appends made with
        ``wake_fetches=False``)."""
        self._wake(self._log_grew)

    def _check_can_append(self, acks: int) -> None:
        self.check_leader()
        min_isr = self.log.config.min_insync_replicas
        if acks == ACKS_ALL and len(self.state.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"{self.name} has {len(self.state.isr)} in-sync replicas "
                f"{list(self.state.isr)}, below min.insync.replicas {min_isr}"
            )

    async def _validate(
        self, records: bytes | memoryview, workers: Workers | None, origin: str
    ) -> ValidatedRecords:
        """Validate where ``workers`` says: on the loop, bounded on the loop, or on a thread."""
        log_ = self.log
        if workers is None:
            return log_.validate(records, origin=origin)
        placement = workers.placement(records, log_.config)
        if placement is Placement.INLINE:
            return log_.validate(records, origin=origin)
        if placement is Placement.INLINE_BOUNDED:
            try:
                return log_.validate(
                    records, origin=origin, max_decompressed_bytes=INLINE_DECOMPRESSED_MAX_BYTES
                )
            except DecompressionLimitError:
                pass  # it expands further: validated again with the real limit, off the loop
        return await workers.validate(log_.validate, records, origin=origin)

    async def _append_on_writer_thread(
        self, validated: ValidatedRecords, leader_epoch: int | None, workers: Workers
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

    def wait_for_high_watermark(self, required_offset: int) -> asyncio.Future[Exception | None]:
        """A future done once the HW reaches ``required_offset`` (Kafka's DelayedProduce).

        Its result is None, or the error the produce answer carries: the ISR below
        ``min.insync.replicas`` by then, or leadership lost. The error is the future's *result*,
        never its exception: a producer that went away (its delayed produce cancelled) leaves
        its waiter behind, and an exception set there would never be retrieved (asyncio logs
        that as a bug). Cancel it to give up waiting.
        """
        waiter: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (required_offset, next(self._waiter_ids), waiter))
        self._complete_waiters()
        if len(self._waiters) >= WAITERS_PRUNE_MIN:
            self._prune_waiters()
        return waiter

    @property
    def waiting_produces(self) -> int:
        return sum(1 for _, _, waiter in self._waiters if not waiter.done())

    def _complete_waiters(self) -> None:
        high_watermark = self.log.high_watermark
        min_isr = self.log.config.min_insync_replicas
        while self._waiters and self._waiters[0][0] <= high_watermark:
            _, _, waiter = heapq.heappop(self._waiters)
            if waiter.done():
                continue
            if len(self.state.isr) < min_isr:
                waiter.set_result(
                    NotEnoughReplicasAfterAppendError(
                        f"{self.name}: written, but its ISR {list(self.state.isr)} is below "
                        f"min.insync.replicas {min_isr}"
                    )
                )
            else:
                waiter.set_result(None)

    def _fail_waiters(self, error: Exception) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, waiter in waiters:
            if not waiter.done():
                waiter.set_result(error)  # a result, not an exception: see wait_for_high_watermark

    def _prune_waiters(self) -> None:
        live = [entry for entry in self._waiters if not entry[2].done()]
        if len(live) * 2 <= len(self._waiters):
            heapq.heapify(live)
            self._waiters = live

    # -- high watermark and ISR (leader) -------------------------------------------------

    def maximal_isr(self) -> Collection[int]:
        """The ISR, with the members of a pending expansion (Kafka's ``maximalIsr``)."""
        if self.pending_isr is None:
            return self.state.isr
        return frozenset(self.state.isr) | frozenset(self.pending_isr.isr)

    def _maybe_increment_high_watermark(self) -> bool:
        """Move the HW to the smallest LEO of the maximal ISR if that is higher; True if moved."""
        new_high_watermark = self.log.log_end_offset
        for replica in self.maximal_isr():
            if replica == self.broker_id:
                continue
            follower = self.followers.get(replica)
            if follower is None or follower.log_end_offset < 0:
                return False  # not fetched under this leader yet
            new_high_watermark = min(new_high_watermark, follower.log_end_offset)
        if new_high_watermark <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_high_watermark)
        self._complete_waiters()
        self._wake(self._high_watermark_moved)
        return True

    def _record_follower_fetch(
        self, replica_id: int, fetch_offset: int, leader_log_end_offset: int
    ) -> None:
        follower = self.followers[replica_id]
        previous_log_end_offset = follower.log_end_offset
        follower.record_fetch(fetch_offset, leader_log_end_offset, self.clock_ms())
        self._maybe_expand_isr(follower)
        # As Kafka's updateFollowerFetchState: the HW can only move if this follower's LEO did
        # (every other change that may move it calls _maybe_increment_high_watermark itself).
        if follower.log_end_offset != previous_log_end_offset:
            self._maybe_increment_high_watermark()

    def _maybe_expand_isr(self, follower: FollowerState) -> None:
        if self.pending_isr is not None or follower.replica_id in self.state.isr:
            return
        if (
            follower.log_end_offset >= self.log.high_watermark
            and follower.log_end_offset >= self.leader_epoch_start_offset
        ):
            self._propose((*self.state.isr, follower.replica_id), expanding=True)

    def maybe_shrink_isr(self) -> None:
        """Drop ISR followers that have not caught up for ``replica.lag.time.max.ms``."""
        if not self.is_leader or self.pending_isr is not None:
            return
        now_ms = self.clock_ms()
        leader_log_end_offset = self.log.log_end_offset
        lagging = {
            replica
            for replica in self.state.isr
            if replica != self.broker_id
            and (follower := self.followers.get(replica)) is not None
            and follower.log_end_offset != leader_log_end_offset
            and not follower.is_caught_up(now_ms, self.replica_lag_time_max_ms)
        }
        if lagging:
            log.info(
                "%s: shrinking ISR %s, out of sync: %s",
                self.name,
                list(self.state.isr),
                sorted(lagging),
            )
            self._propose(tuple(r for r in self.state.isr if r not in lagging), expanding=False)

    def _propose(self, isr: tuple[int, ...], *, expanding: bool) -> None:
        if self.isr_changes is None:
            return  # no controller to ask (a broker without a cluster, in tests)
        proposal = IsrProposal(
            isr=isr,
            leader_epoch=self.state.leader_epoch,
            partition_epoch=self.state.partition_epoch,
            expanding=expanding,
        )
        self.pending_isr = proposal
        self.isr_changes.submit(self, proposal)

    def isr_change_committed(
        self, proposal: IsrProposal, isr: tuple[int, ...], leader_epoch: int, partition_epoch: int
    ) -> bool:
        """The controller committed an ISR; True if this leader took it."""
        if self.pending_isr is not proposal:
            return False  # a LeaderAndIsr replaced the state meanwhile
        self.pending_isr = None
        if leader_epoch != self.state.leader_epoch or not self.is_leader:
            return False
        if partition_epoch < self.state.partition_epoch:
            return False
        self._take_isr(tuple(isr), partition_epoch, "committed")
        return True

    def _take_isr(self, isr: tuple[int, ...], partition_epoch: int, how: str) -> None:
        before = set(self.state.isr)
        self.state = replace(self.state, isr=isr, partition_epoch=partition_epoch)
        log.info(
            "%s: ISR is now %s (%s, partition epoch %d)", self.name, list(isr), how, partition_epoch
        )
        if self.on_isr_change is not None and set(isr) != before:
            self.on_isr_change(set(isr) > before)
        self._maybe_increment_high_watermark()
        self._complete_waiters()

    def adopt_committed_isr(
        self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int
    ) -> bool:
        """The controller's state for this leader's own epoch, from UpdateMetadata: taken if its
        partition epoch is newer. Within one leader epoch only this leader's AlterPartition
        changes the ISR, so this is a commit whose answer never arrived (a lost connection);
        without it the leader's next proposal would carry a stale partition epoch forever."""
        if (
            not self.is_leader
            or leader_epoch != self.state.leader_epoch
            or partition_epoch <= self.state.partition_epoch
            or self.broker_id not in isr
        ):
            return False
        self.pending_isr = None
        self._take_isr(tuple(isr), partition_epoch, "from the controller's metadata")
        return True

    def isr_change_failed(self, proposal: IsrProposal, reason: str) -> None:
        """The controller refused it or could not be reached: the next check proposes again."""
        if self.pending_isr is proposal:
            self.pending_isr = None
            log.info("%s: ISR change to %s not made: %s", self.name, list(proposal.isr), reason)

    # -- reading -------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int = -1,
        current_leader_epoch: int = NO_EPOCH,
        last_fetched_epoch: int = NO_EPOCH,
        isolation_level: int = READ_UNCOMMITTED,
        min_one_message: bool = True,
    ) -> PartitionRead:
        """Serve one partition of a fetch: a consumer's (``replica_id`` -1) or a follower's.

        Only the leader serves reads. A consumer reads below the HW (read_committed: below the
        last stable offset, and is told the aborted transactions overlapping what it gets, so it
        can drop their records); a follower reads to the LEO and
        its fetch offset becomes its LEO here. If the follower's ``last_fetched_epoch`` ends
        elsewhere in this log than where it fetches, nothing is read and ``diverging_epoch``
        tells it where to truncate (KIP-320, KIP-595).
        """
        self.check_leader_epoch(current_leader_epoch)
        self.check_leader()
        log_ = self.log
        if replica_id >= 0 and replica_id not in self.followers:
            raise NotLeaderOrFollowerError(
                f"broker {replica_id} is not a replica of {self.name} {list(self.state.replicas)}"
            )
        if last_fetched_epoch >= 0:
            if last_fetched_epoch == log_.latest_epoch:  # the common case: no lookup
                epoch, end_offset = last_fetched_epoch, log_.log_end_offset
            else:
                epoch, end_offset = log_.end_offset_for_epoch(last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
                raise OffsetOutOfRangeError(
                    f"{self.name} holds no leader epoch at or below {last_fetched_epoch}"
                )
            if fetch_offset < log_.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"offset {fetch_offset} is below the log start {log_.log_start_offset} "
                    f"of {self.name}"
                )
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return PartitionRead(
                    None,
                    log_.high_watermark,
                    log_.last_stable_offset,
                    log_.log_start_offset,
                    diverging_epoch=(epoch, end_offset),
                )
        if replica_id >= 0:
            leader_log_end_offset = log_.log_end_offset
            info = log_.read(fetch_offset, max_bytes, min_one_message=min_one_message)
            self._record_follower_fetch(replica_id, fetch_offset, leader_log_end_offset)
        else:
            last_stable_offset = log_.last_stable_offset
            committed = isolation_level == READ_COMMITTED
            info = log_.read(
                fetch_offset,
                max_bytes,
                max_offset=last_stable_offset if committed else log_.high_watermark,
                min_one_message=min_one_message,
            )
            if committed and info.records is not None:
                end = info.records.next_offset
                aborted = log_.collect_aborted_transactions(
                    fetch_offset, end if end >= 0 else last_stable_offset
                )
                return PartitionRead(
                    info.records,
                    log_.high_watermark,
                    last_stable_offset,
                    info.log_start_offset,
                    aborted_transactions=tuple(aborted),
                )
        return PartitionRead(
            info.records, log_.high_watermark, log_.last_stable_offset, info.log_start_offset
        )

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest epoch <= ``leader_epoch`` here and its end offset."""
        self.check_leader_epoch(current_leader_epoch)
        self.check_leader()
        return self.log.end_offset_for_epoch(leader_epoch)

    def fetch_waiters(self, *, for_follower: bool) -> set[FetchWakeUp]:
        """The futures of the fetches waiting for more: a follower's are done when the log
        grows, a consumer's when the HW moves (``wait_for_any`` adds and removes its own)."""
        return self._log_grew if for_follower else self._high_watermark_moved

    def _wake(self, waiters: set[FetchWakeUp]) -> None:
        key = (self.topic, self.index)
        for waiter in waiters:
            waiter.wake(key)
        waiters.clear()

    # -- follower ------------------------------------------------------------------------

    async def append_as_follower(
        self, records: bytes | memoryview, workers: Workers | None = None
    ) -> LogAppendInfo | None:
        """Append the leader's batches as they are; None if this replica leads meanwhile."""
        validated = await self._validate(records, workers, AppendOrigin.REPLICATION)
        async with self._appending:
            if self.is_leader or self.state.leader == NO_LEADER:
                return None
            if workers is not None and validated.size_in_bytes >= workers.write_offload_min_bytes:
                info = await self._append_on_writer_thread(validated, None, workers)
            else:
                info = self.log.append_validated(validated)
            if info.flush_before_ack:
                await asyncio.wrap_future(self.log.flush_in_background())
        self._wake(self._log_grew)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW: the leader's, within its own log."""
        if not self.is_leader:
            self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))

    async def replace_log(
        self, catch_up: Callable[[], Awaitable[None]], replace: Callable[[], Log]
    ) -> None:
        """The end of a move between log dirs (KIP-113): with appends and truncations held back,
        ``catch_up`` makes the future log equal to the current one, then ``replace`` swaps it
        in; reads go on meanwhile (from the current log, which does not change)."""
        async with self._appending:
            await catch_up()
            self.log = replace()
        self._wake(self._log_grew)
        self._wake(self._high_watermark_moved)

    async def truncate_to(self, offset: int) -> None:
        """Cut the log back to ``offset`` (a follower diverging from its leader)."""
        async with self._appending:
            if self.is_leader:
                return
            if offset < self.log.log_end_offset:
                # Inside a batch (a leader's history batched differently): the whole batch goes,
                # and is fetched again from the leader.
                offset = max(self.log.batch_start_at_or_below(offset), self.log.log_start_offset)
                log.info("%s: truncating from %d to %d", self.name, self.log.log_end_offset, offset)
            self.log.truncate_to(offset)  # at the end: only epochs the leader never saw go

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and continue at ``offset`` (the leader's log start is beyond)."""
        async with self._appending:
            if not self.is_leader:
                log.info("%s: emptying the log, to continue at %d", self.name, offset)
                self.log.truncate_fully_and_start_at(offset)


class FetchWakeUp:
    """One waiting fetch: done at the first partition that may have more to read, and the set
    of every partition that woke it until the fetch reads again (it re-reads only those)."""

    __slots__ = ("future", "woken")

    def __init__(self, future: asyncio.Future[None]):
        self.future = future
        self.woken: set[TopicPartition] = set()

    def wake(self, partition: TopicPartition) -> None:
        self.woken.add(partition)
        if not self.future.done():
            self.future.set_result(None)


async def wait_for_any(
    partitions: Sequence[Partition], timeout_s: float, *, for_follower: bool
) -> set[TopicPartition]:
    """Wait until one of ``partitions`` may have more to read, or the timeout; the partitions
    that woke the wait (every one that did before the caller runs again), empty at the timeout.

    One ``FetchWakeUp``, registered with every partition (no task per partition: a follower's
    fetch session holds every partition it follows from this leader, and it long-polls after
    each answer). Registered before the first await, so no wake-up between a read and the wait
    is missed; removed from every partition on the way out."""
    if not partitions or timeout_s <= 0:
        return set()
    wake_up = FetchWakeUp(asyncio.get_running_loop().create_future())
    registered = [p.fetch_waiters(for_follower=for_follower) for p in partitions]
    for waiters in registered:
        waiters.add(wake_up)
    try:
        await asyncio.wait_for(wake_up.future, timeout_s)
        return wake_up.woken
    except TimeoutError:
        return set()
    finally:
        for waiters in registered:
            waiters.discard(wake_up)
