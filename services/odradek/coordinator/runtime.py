"""Kafka's ``CoordinatorRuntime``: the shards this broker leads, loading, writes and timers,
for either coordinator: the group coordinator's shards of ``__consumer_offsets``
(``groups.shard``, built by ``groups.coordinator.group_runtime``) and the transaction
coordinator's of ``__transaction_state`` (``transactions.shard``).

**Ownership.** A shard exists while this broker leads its partition of the internal topic: the
broker calls ``on_elected(partition, leader_epoch)`` when it becomes leader and ``on_resigned``
when it stops (follower, StopReplica, a dead log dir). Electing loads the shard: every record of
the partition's log is read (in a thread) and replayed in log order; until that is done every
operation on it is COORDINATOR_LOAD_IN_PROGRESS, and on a partition not led here
NOT_COORDINATOR. Resigning cancels the shard's timers, answers what waits in it
(``on_unloaded``) and drops its state. A newer leader epoch of a shard already loaded or loading
changes nothing but the epoch its writes are fenced with (the log it read is still its log).

**Writes.** ``write`` runs an operation on the shard under the shard's lock (one at a time, in
the order asked); the operation returns a ``Result``: records to append, the response, and
whether the records are replayed (the default) or already applied by the operation. The records
are appended to the local log as leader, with the shard's leader epoch (a deposed leader's append
fails: NOT_COORDINATOR), and only then replayed, still under the lock: the next operation sees
them, and a record that failed to append was never applied. The answer waits, outside the lock,
until the high watermark passes the records (``offsets.commit.timeout.ms``): a commit is
acknowledged only once the ISR has it. A failed wait answers COORDINATOR_NOT_AVAILABLE; the
records stay in the log, as in Kafka, and count once replicated (or vanish with a truncation,
which only a leader change can bring, and that unloads the shard).

**Reads** (``read``) wait until what was written before them is replicated, then run on the
shard: an OffsetFetch never returns an offset that a failover could lose.

**Transactions.** A ``Result`` with a ``producer`` is appended as that producer's
transactional batch (base sequence -1) and replayed as the producer's records. A shard that
replays transactions (``TransactionalShard``: the group coordinator's) gets every data record
with its offset and producer id (``replay_at``) and every transaction marker of its partition
(``replay_end_transaction_marker``), in log order, when loading; live, the markers another path
appended (WriteTxnMarkers) are handed to it by ``complete_transaction``. Replaying a marker is
idempotent (a producer's pending records are gone after the first), so a marker both read by a
load and handed over live is applied once in effect. Other shards get ``replay(record)`` and
their logs hold no markers (a marker there fails the load).

**Timers** (the ``timer`` handed to ``new_context``) run their operation as a write of the
shard; resigning cancels them.

**Which coordinator's shards.** The runtime knows a shard by what it calls (``CoordinatorShard``:
``replay``, ``on_loaded``, ``on_unloaded``, ``context.log_end_offset``) and its topic by its
``record_format``: the group coordinator's shards run on it with ``__consumer_offsets``'s
format, the transaction coordinator's with ``__transaction_state``'s, their outcomes handed over
as ``Result`` (markers sent from ``on_written``). It imports neither coordinator.

Runs on the broker's event loop. Loading reads the log in a worker thread.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from odradek.coordinator import records
from odradek.coordinator.errors import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    coordinator_error_of,
)
from odradek.coordinator.records import RecordFormat
from odradek.coordinator.result import Result
from odradek.storage.batch import NO_PRODUCER_ID, NO_SEQUENCE
from odradek.storage.records import Record, encode_batch

__all__ = [
    "CoordinatorLog",
    "LoggedRecord",
    "LoggedMarker",
    "CoordinatorShard",
    "TransactionalShard",
    "CoordinatorRuntime",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
REPLAY_CHUNK_RECORDS = 2000  # records replayed per turn of the event loop while loading


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """A data record of the log, with its batch's producer (-1: none) if the batch is
    transactional (a producer's records not committed until its marker)."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = NO_PRODUCER_ID  # set only for a transactional batch


@dataclass(frozen=True, slots=True)
class LoggedMarker:
    """A transaction marker (control batch) of the log: how ``producer_id``'s transaction in
    this partition ended."""

    offset: int
    producer_id: int
    committed: bool


class ShardState(Protocol):
    """What the runtime keeps up to date in a shard's context."""

    log_end_offset: int


class CoordinatorShard(Protocol):
    """A shard as the runtime drives it (``groups.shard.GroupCoordinatorShard``,
    ``transactions.shard.TransactionCoordinatorShard``)."""

    @property
    def context(self) -> ShardState: ...

    def replay(self, record: records.CoordinatorRecord) -> None:
        """Replay ``record`` (outside any transaction), in log order."""
        ...

    def on_loaded(self) -> None: ...

    def on_unloaded(self) -> None: ...


@runtime_checkable
class TransactionalShard(Protocol):
    """A shard whose records may belong to transactions (the group coordinator's)."""

    def replay_at(self, offset: int, producer_id: int, record: records.CoordinatorRecord) -> None:
        """Replay ``record``, written at ``offset`` by ``producer_id`` (-1: no transaction)."""
        ...

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction in this partition ended (a marker in the log)."""
        ...


class CoordinatorLog(Protocol):
    """The internal topic's partitions as the runtime uses them (the broker's replicas)."""

    async def append(self, partition: int, leader_epoch: int, batch: bytes) -> int:
        """Append ``batch`` as leader in ``leader_epoch``; the offset after its last record.
        Raises an ``OdradekError`` (NOT_LEADER_OR_FOLLOWER when not leader in that epoch)."""
        ...

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None:
        """Return once the high watermark reached ``offset``; raise on timeout or failure."""
        ...

    def read_all(self, partition: int) -> Iterator[LoggedRecord | LoggedMarker]:
        """Every data record and transaction marker of the partition's log, in order (called in
        a worker thread)."""
        ...


class _State(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class _ShardTimer:
    """``Timer`` of one shard: ``loop.call_later`` handles that run a write of the shard."""

    def __init__(self, runtime: CoordinatorRuntime, partition: int):
        self._runtime = runtime
        self._partition = partition
        self._handles: dict[str, asyncio.TimerHandle] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any]) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._handles.pop(key, None)
            self._runtime._spawn(self._runtime._fire(self._partition, key, operation))

        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, fire)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


@dataclass(slots=True)
class _Slot:
    """One partition this broker leads: its shard and what guards it."""

    partition: int
    leader_epoch: int
    shard: Any  # a CoordinatorShard
    timer: _ShardTimer
    state: _State = _State.LOADING
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    written_offset: int = 0  # the offset after the last record this shard appended
    load_task: asyncio.Task[None] | None = None
    transactional: bool = False  # the shard is a TransactionalShard

    def replay(
        self, offset: int, producer_id: int, entry: records.CoordinatorRecord | bool
    ) -> None:
        """One entry of the log, in order: a data record, or a marker (``entry`` its outcome)."""
        if self.transactional:
            if isinstance(entry, bool):
                self.shard.replay_end_transaction_marker(producer_id, entry)  # type: ignore[attr-defined]
            else:
                self.shard.replay_at(offset, producer_id, entry)  # type: ignore[attr-defined]
        elif isinstance(entry, bool) or producer_id != NO_PRODUCER_ID:
            raise ValueError(f"a transactional entry at offset {offset}: this shard has none")
        else:
            self.shard.replay(entry)


class CoordinatorRuntime:
    """See the module docstring. ``new_context(partition, timer)`` makes a shard's context,
    ``new_shard(context)`` its shard; ``record_format`` is the internal topic's."""

    def __init__(
        self,
        coordinator_log: CoordinatorLog,
        new_context: Callable[[int, _ShardTimer], Any],
        *,
        new_shard: Callable[[Any], CoordinatorShard],
        record_format: RecordFormat,
        write_timeout_ms: int = 5000,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ):
        self.log = coordinator_log
        self._new_context = new_context
        self._new_shard = new_shard
        # The internal topic's record types (another coordinator's shards bring their own).
        self.record_format = record_format
        self.topic = record_format.topic
        self.write_timeout_ms = write_timeout_ms
        self.clock_ms = clock_ms
        self._slots: dict[int, _Slot] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- ownership -----------------------------------------------------------------------

    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker leads ``partition`` in ``leader_epoch``: load it unless it is loaded."""
        slot = self._slots.get(partition)
        if slot is not None and slot.state is not _State.CLOSED:
            slot.leader_epoch = max(slot.leader_epoch, leader_epoch)
            return
        timer = _ShardTimer(self, partition)
        shard = self._new_shard(self._new_context(partition, timer))
        slot = _Slot(partition, leader_epoch, shard, timer)
        slot.transactional = isinstance(shard, TransactionalShard)
        self._slots[partition] = slot
        slot.load_task = self._spawn(self._load(slot))

    def on_resigned(self, partition: int, leader_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition`` (from ``leader_epoch`` on, if known)."""
        slot = self._slots.get(partition)
        if slot is None or (leader_epoch is not None and leader_epoch < slot.leader_epoch):
            return
        del self._slots[partition]
        self._close(slot)

    def _close(self, slot: _Slot) -> None:
        was_active = slot.state is _State.ACTIVE
        slot.state = _State.CLOSED
        slot.timer.cancel_all()
        if slot.load_task is not None:
            slot.load_task.cancel()
        if was_active:
            try:
                slot.shard.on_unloaded()
            except Exception:
                log.exception("unloading %s-%d failed", self.topic, slot.partition)
        log.info("coordinator: unloaded %s-%d", self.topic, slot.partition)

    async def _load(self, slot: _Slot) -> None:
        started = time.monotonic()
        try:
            loaded = await asyncio.to_thread(self._read, slot.partition)
            count = 0
            for chunk in _chunks(loaded, REPLAY_CHUNK_RECORDS):
                if slot.state is _State.CLOSED:
                    return
                for offset, producer_id, record in chunk:
                    slot.replay(offset, producer_id, record)
                    slot.written_offset = offset + 1
                    count += 1
                await asyncio.sleep(0)  # let requests be served while a big log is replayed
            if slot.state is _State.CLOSED:
                return
            slot.shard.context.log_end_offset = slot.written_offset
            slot.shard.on_loaded()
            slot.state = _State.ACTIVE
            log.info(
                "coordinator: loaded %s-%d (epoch %d): %d records in %.0f ms",
                self.topic,
                slot.partition,
                slot.leader_epoch,
                count,
                (time.monotonic() - started) * 1000,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            # A partition that cannot be loaded serves nothing (NOT_COORDINATOR) rather than
            # groups without their history; its log is kept for a look.
            log.exception("coordinator: loading %s-%d failed", self.topic, slot.partition)
            if self._slots.get(slot.partition) is slot:
                del self._slots[slot.partition]
            slot.state = _State.CLOSED
            slot.timer.cancel_all()

    def _read(self, partition: int) -> list[tuple[int, int, records.CoordinatorRecord | bool]]:
        """(offset, producer id, record) of each data record; (offset, producer id, committed)
        of each marker."""
        decoded: list[tuple[int, int, records.CoordinatorRecord | bool]] = []
        for logged in self.log.read_all(partition):
            if isinstance(logged, LoggedMarker):
                decoded.append((logged.offset, logged.producer_id, logged.committed))
                continue
            if logged.key is None:
                raise ValueError(f"a record without a key at offset {logged.offset}")
            record = self.record_format.decode(logged.key, logged.value)
            decoded.append((logged.offset, logged.producer_id, record))
        return decoded

    # -- operations ----------------------------------------------------------------------

    def _slot(self, partition: int) -> _Slot:
        slot = self._slots.get(partition)
        if slot is None or slot.state is _State.CLOSED:
            raise NotCoordinatorError(f"this broker does not lead {self.topic}-{partition}")
        if slot.state is _State.LOADING:
            raise CoordinatorLoadInProgressError(f"{self.topic}-{partition} is loading")
        return slot

    def is_active(self, partition: int) -> bool:
        slot = self._slots.get(partition)
        return slot is not None and slot.state is _State.ACTIVE

    def is_loading(self, partition: int) -> bool:
        slot = self._slots.get(partition)
        return slot is not None and slot.state is _State.LOADING

    def active_partitions(self) -> list[int]:
        return sorted(p for p, slot in self._slots.items() if slot.state is _State.ACTIVE)

    async def write(
        self,
        partition: int,
        operation: Callable[[Any], Result[T]],
        *,
        timeout_ms: int | None = None,
    ) -> T:
        """Run ``operation`` on the shard, write its records, answer once they are replicated."""
        slot = self._slot(partition)
        async with slot.lock:
            slot = self._slot(partition)  # it may have been unloaded while this waited
            result = operation(slot.shard)
            written = await self._append(slot, result) if result.records else None
        if written is not None:
            timeout = self.write_timeout_ms if timeout_ms is None else timeout_ms
            try:
                await self.log.wait_replicated(partition, written, timeout)
            except Exception as e:
                _written(result, e)
                raise coordinator_error_of(e) from e
        _written(result, None)
        if result.deferred is not None:
            return await result.deferred
        return result.response  # type: ignore[return-value]

    async def _append(self, slot: _Slot, result: Result[Any]) -> int:
        now_ms = self.clock_ms()
        producer = result.producer
        if producer is not None and not slot.transactional:
            raise TypeError(f"{self.topic}'s shards do not replay transactional records")
        batch = encode_batch(
            [
                Record(
                    offset=i,
                    timestamp=now_ms,
                    key=records.encode_key(r.key),
                    value=records.encode_value(r.value),
                )
                for i, r in enumerate(result.records)
            ],
            base_offset=0,
            **(
                {}
                if producer is None
                else {
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.producer_epoch,
                    "base_sequence": NO_SEQUENCE,
                    "is_transactional": True,
                }
            ),
        )
        try:
            written = await self.log.append(slot.partition, slot.leader_epoch, batch)
        except Exception as e:
            _written(result, e)
            raise coordinator_error_of(e) from e
        if slot.state is _State.CLOSED:  # resigned while appending: nobody replays it here
            _written(result, NotCoordinatorError("resigned while writing"))
            raise NotCoordinatorError(f"{self.topic}-{slot.partition} moved")
        slot.written_offset = written
        slot.shard.context.log_end_offset = written
        if result.replay:
            producer_id = NO_PRODUCER_ID if producer is None else producer.producer_id
            first = written - len(result.records)
            for i, record in enumerate(result.records):
                slot.replay(first + i, producer_id, record)
        return written

    async def read(
        self,
        partition: int,
        operation: Callable[[Any], T],
        *,
        timeout_ms: int | None = None,
    ) -> T:
        """Run ``operation`` once what the shard wrote so far is replicated."""
        slot = self._slot(partition)
        if slot.written_offset > 0:
            timeout = self.write_timeout_ms if timeout_ms is None else timeout_ms
            try:
                await self.log.wait_replicated(partition, slot.written_offset, timeout)
            except Exception as e:
                raise coordinator_error_of(e) from e
        return operation(self._slot(partition).shard)

    async def complete_transaction(
        self, partition: int, producer_id: int, committed: bool, *, timeout_ms: int | None = None
    ) -> bool:
        """Replay a transaction marker that was appended to ``partition`` (by WriteTxnMarkers),
        under the shard's lock. Whether a shard here applied it: a partition not led here, or
        whose load fails, has nothing to apply (its next leader reads the marker from the log);
        a loading one is waited for (``timeout_ms``), as its load may have read the log before
        the marker, and replaying the marker again is harmless."""
        timeout = self.write_timeout_ms if timeout_ms is None else timeout_ms
        slot = self._slots.get(partition)
        if slot is None or slot.state is _State.CLOSED:
            return False
        if slot.state is _State.LOADING and slot.load_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(slot.load_task), timeout / 1000)
            except TimeoutError as e:
                raise CoordinatorLoadInProgressError(f"{self.topic}-{partition} is loading") from e
            except asyncio.CancelledError:
                if not slot.load_task.cancelled():
                    raise  # this call is cancelled, not the load
                return False  # resigned while loading: the next leader reads the marker
        if self._slots.get(partition) is not slot or slot.state is not _State.ACTIVE:
            return False
        async with slot.lock:
            if slot.state is not _State.ACTIVE:
                return False
            slot.replay(-1, producer_id, committed)
        return True

    async def _fire(self, partition: int, key: str, operation: Callable[[], Any]) -> None:
        def run(_shard: Any) -> Result[None]:
            outcome = operation()
            return outcome if isinstance(outcome, Result) else Result()

        try:
            await self.write(partition, run)
        except (NotCoordinatorError, CoordinatorLoadInProgressError):
            pass  # the shard went away: its timers went with it
        except Exception:
            log.exception("timer %s of %s-%d failed", key, self.topic, partition)

    def _spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        for partition in list(self._slots):
            self.on_resigned(partition)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _written(result: Result[Any], error: BaseException | None) -> None:
    if result.on_written is not None:
        try:
            result.on_written(error)
        except Exception:
            log.exception("a coordinator write callback failed")


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
