"""One partition of ``__consumer_offsets`` as state: its groups and their committed offsets.

Kafka's ``GroupCoordinatorShard``. Every group whose id hashes to the partition
(``partitioner``) lives here, in one namespace (``groups``), with three managers:

- ``offsets``: committed offsets (OffsetCommit, OffsetFetch, OffsetDelete, expiry);
- ``classic``: classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup);
- ``consumer``: KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

**One code path for recovery and live traffic.** A manager's state is what ``replay`` made of
the partition's records. An operation either returns records that the runtime appends and then
replays through the same ``replay`` a loading coordinator uses (``Result.replay``, the default),
or, for what Kafka's classic groups keep outside the log (members waiting in JoinGroup, their
timers), changes its state itself and writes records only to persist it (``replay=False``).
``replay`` must accept any record the log may hold, in log order, and never fail on a record
for a group it does not know (a tombstone may follow the group's deletion).

**Transactions.** The runtime replays each record with its offset and producer id
(``replay_at``: -1 outside a transaction) and each transaction marker of the partition
(``replay_end_transaction_marker``), in log order, loading or live. Only offset commits are
written in transactions (TxnOffsetCommit); the offsets manager keeps them pending per producer
until the marker. The other managers ignore the producer, as Kafka's.

Runs on the broker's event loop, one operation at a time per shard (the runtime's lock).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from odradek.groups.classic.manager import ClassicGroupManager
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.consumer.manager import ConsumerGroupManager
from odradek.groups.group import Group
from odradek.groups.limits import GroupLimits
from odradek.groups.offsets import OffsetMetadataManager
from odradek.groups.records.base import CoordinatorRecord
from odradek.storage.batch import NO_PRODUCER_ID

__all__ = [
    "Manager",
    "TransactionalManager",
    "ShardContext",
    "Timer",
    "Topics",
    "GroupCoordinatorShard",
]

log = logging.getLogger(__name__)


class Timer(Protocol):
    """Timers of one shard; each fires as an operation of the shard, never concurrently."""

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any]) -> None:
        """Run ``operation`` (returning a ``Result``, or None) in ``delay_ms``; replaces the
        timer of the same key."""
        ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


class Topics(Protocol):
    """What the coordinator may know of topics: the broker's metadata cache."""

    def partition_count(self, topic: str) -> int | None:
        """The partitions of ``topic``, None when the topic does not exist."""
        ...

    def topic_id(self, topic: str) -> Any | None: ...

    def topic_names(self) -> list[str]: ...


@dataclass(slots=True)
class ShardContext:
    partition: int
    config: GroupCoordinatorConfig
    timer: Timer
    topics: Topics
    clock_ms: Callable[[], int]
    # The offset the next written record gets (advanced by the runtime at each append; used by
    # state that remembers where a record was written).
    log_end_offset: int = field(default=0)
    # The broker-wide memory account, shared by every shard of the broker (``groups.limits``);
    # None: one of this shard's own (tests).
    limits: GroupLimits = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.limits is None:
            self.limits = GroupLimits(self.config)


class Manager(Protocol):
    RECORD_KEYS: tuple[type, ...]  # the key classes whose records it replays

    def replay(self, record: CoordinatorRecord) -> None: ...

    def on_loaded(self) -> None:
        """The whole log was replayed: start what runs on time (session timers, expiry)."""
        ...

    def on_unloaded(self) -> None:
        """The shard goes away: answer what waits (NOT_COORDINATOR); timers are cancelled."""
        ...


@runtime_checkable
class TransactionalManager(Protocol):
    """A manager whose records may be written in transactions (the offsets manager)."""

    def replay_at(self, offset: int, producer_id: int, record: CoordinatorRecord) -> None: ...

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None: ...


class GroupCoordinatorShard:
    def __init__(self, context: ShardContext):
        self.context = context
        self.groups: dict[str, Group] = {}
        self._managers: list[Manager] = []
        self._replayers: dict[type, Callable[[int, int, CoordinatorRecord], None]] = {}
        self.offsets = OffsetMetadataManager(context, self.groups)
        self._add(self.offsets)
        self.classic = ClassicGroupManager(context, self.groups)
        self._add(self.classic)
        self.consumer = ConsumerGroupManager(context, self.groups)
        self._add(self.consumer)

    def _add(self, manager: Manager) -> None:
        self._managers.append(manager)
        if isinstance(manager, TransactionalManager):
            replayer = manager.replay_at
        else:

            def replayer(_offset: int, _producer_id: int, record: CoordinatorRecord) -> None:
                manager.replay(record)

        for key_type in manager.RECORD_KEYS:
            if key_type in self._replayers:
                raise RuntimeError(f"two managers replay {key_type.__name__}")
            self._replayers[key_type] = replayer

    def replay(self, record: CoordinatorRecord) -> None:
        """A record outside any transaction, at no known offset (tests, tools)."""
        self.replay_at(-1, NO_PRODUCER_ID, record)

    def replay_at(self, offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        replayer = self._replayers.get(type(record.key))
        if replayer is None:
            raise RuntimeError(f"no manager replays {type(record.key).__name__}")
        replayer(offset, producer_id, record)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        for manager in self._managers:
            if isinstance(manager, TransactionalManager):
                manager.replay_end_transaction_marker(producer_id, committed)

    def on_loaded(self) -> None:
        for manager in self._managers:
            manager.on_loaded()

    def on_unloaded(self) -> None:
        for manager in self._managers:
            manager.on_unloaded()
