"""Committed offsets of one shard: Kafka's ``OffsetMetadataManager``.

State: for each group id, the committed ``OffsetAndMetadata`` of each (topic, partition), made
only by ``replay`` of OffsetCommit records (``records.offsets``); a tombstone removes one. A
group id may have offsets without a group object (a *simple* consumer's group: ``assign()`` and
commit, generation -1, no member id); ``group_ids()`` lists both kinds.

Operations return a ``Result`` whose records the runtime appends, replays, then acknowledges
once replicated; a ``GroupError`` raised by an operation is a whole-request answer and changed
nothing.

- ``commit_offsets`` (OffsetCommit): the group, if one exists, validates the member
  (``Group.validate_offset_commit``); without a group only generation -1 is accepted (a simple
  consumer's commit; no group object is created). Each partition is checked on its own: its
  topic and partition must exist (UNKNOWN_TOPIC_OR_PARTITION), its metadata fit
  ``offset.metadata.max.bytes`` (OFFSET_METADATA_TOO_LARGE).
- ``fetch_offsets`` (OffsetFetch): what is committed, -1 for what is not; a KIP-848 member
  naming itself is validated by its group (``Group.validate_offset_fetch``).
- ``delete_offsets`` (OffsetDelete): refused for a non-empty group that is not a consumer group
  (NON_EMPTY_GROUP) and per topic while a member consumes it (GROUP_SUBSCRIBED_TO_TOPIC).
- ``expire`` (every ``offsets.retention.check.interval.ms``): deletes offsets older than
  ``offsets.retention.minutes`` (or past the expire timestamp an OffsetCommit v2-v4 set): for a
  simple group counted from the commit, for an empty group from the moment it was first seen
  empty (Kafka: since it became empty; after a reload: since the reload, never earlier), for a
  group with members only the offsets of topics it no longer consumes (a consumer group, or a
  Stable classic group of the consumer protocol; other groups with members keep all). An empty
  group left without offsets is deleted (``Group.tombstones()``).

Transactional offsets (Kafka's pending transactional offsets, KIP-98):

- ``commit_transactional_offsets`` (TxnOffsetCommit): validated as an OffsetCommit, except that
  a classic group accepts an empty member id with generation -1 even with members (the
  producer's older requests carry none) and does not refuse while CompletingRebalance; a group
  that does not exist accepts only generation -1 (else ILLEGAL_GENERATION), and a consumer
  group's stale epoch is ILLEGAL_GENERATION. Its records are written in a transactional batch
  of the producer (``Result.producer``).
- Replay (``replay_at``): an offset commit of a producer (a transactional batch) goes to that
  producer's *pending* offsets (``pending_offsets``), not to the committed ones. A tombstone
  removes the committed offset and every producer's pending one of that partition.
- ``replay_end_transaction_marker``: COMMIT moves the producer's pending offsets to the
  committed ones, each only if its record is later in the log than the committed one's
  (``record_offset``: a plain commit written after the transactional one, before the marker,
  wins, as it would after compaction); ABORT drops them. A marker of a producer without pending
  offsets changes nothing, so replaying one twice is harmless.
- ``fetch_offsets(require_stable=True)``: a partition with a pending offset of the group is
  UNSTABLE_OFFSET_COMMIT (the client retries); without it, the committed offset only.
- OffsetDelete and DeleteGroups write a tombstone for a partition with a pending offset too;
  expiry keeps an offset that has a pending one, and a group with pending offsets.

For the other managers and the admin APIs: ``committed``, ``group_ids``,
``delete_group_offsets``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.common.partitions import TopicPartition
from odradek.coordinator.result import Result, TxnProducer
from odradek.errors import ErrorCode
from odradek.groups.errors import GroupError
from odradek.groups.group import Group, GroupType
from odradek.groups.pending_offsets import PendingOffsets, remove_entry
from odradek.groups.records.base import CoordinatorRecord
from odradek.groups.records.offsets import (
    LegacyOffsetCommitKey,
    OffsetCommitKey,
    expire_timestamp_of,
    leader_epoch_of,
    offset_value,
)
from odradek.storage.batch import NO_PRODUCER_ID

if TYPE_CHECKING:  # the shard imports this module
    from odradek.groups.shard import ShardContext

__all__ = [
    "OffsetAndMetadata",
    "PartitionCommit",
    "FetchedPartition",
    "OffsetMetadataManager",
    "EXPIRY_TIMER",
]

EXPIRY_TIMER = "offsets-expiry"
# The most tombstones one expiry run writes (one batch), unless one group alone has more.
MAX_EXPIRED_RECORDS = 1000
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # -1: the broker's retention applies
    record_offset: int = -1  # where its record is in the log (-1: unknown)


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: int
    offset: OffsetAndMetadata | None  # None: nothing committed (answered as -1)
    unstable: bool = False  # a transaction of the group's has an offset for it pending


class OffsetMetadataManager:
    RECORD_KEYS = (OffsetCommitKey, LegacyOffsetCommitKey)

    def __init__(self, context: ShardContext, groups: Mapping[str, Group]):
        self.context = context
        self._groups = groups
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._pending: PendingOffsets[OffsetAndMetadata] = PendingOffsets()
        # Groups seen empty by the expiry check, and when (not replayed: after a reload the
        # clock starts again, so offsets expire late, never early).
        self._empty_since: dict[str, int] = {}

    # -- replay ---------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        self.replay_at(-1, NO_PRODUCER_ID, record)

    def replay_at(self, offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        key = record.key
        group_id = key.group
        tp = (key.topic, key.partition)
        if record.value is None:
            remove_entry(self._offsets, group_id, tp)
            self._pending.drop_partition(group_id, tp)
            return
        value = record.value
        offset_and_metadata = OffsetAndMetadata(
            committed_offset=value.offset,
            leader_epoch=leader_epoch_of(value),
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=expire_timestamp_of(value),
            record_offset=offset,
        )
        if producer_id == NO_PRODUCER_ID:
            self._offsets.setdefault(group_id, {})[tp] = offset_and_metadata
            return
        self._pending.add(producer_id, group_id, tp, offset_and_metadata)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        for group_id, tp, offset in self._pending.end(producer_id):
            if not committed:
                continue
            existing = self._offsets.get(group_id, {}).get(tp)
            if existing is None or offset.record_offset > existing.record_offset:
                self._offsets.setdefault(group_id, {})[tp] = offset

    def on_loaded(self) -> None:
        self._schedule_expiry()

    def on_unloaded(self) -> None:
        self._empty_since.clear()  # the runtime cancels the timer

    # -- for the other managers and the admin APIs -----------------------------------------

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    def pending(self, producer_id: int) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """The producer's pending transactional offsets, by group."""
        return self._pending.of_producer(producer_id)

    def has_pending(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        """Whether a transaction has a pending offset of the group (for ``tp``, if given)."""
        return self._pending.has(group_id, tp)

    def group_ids(self) -> set[str]:
        """Groups with committed or pending offsets (Kafka creates a simple group for both)."""
        return set(self._offsets) | self._pending.group_ids()

    def delete_group_offsets(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones of the group's committed offsets and of its pending ones (Kafka's
        ``deleteAllOffsets``: a tombstone drops every producer's pending offset there)."""
        partitions = set(self._offsets.get(group_id, {})) | set(self._pending.partitions(group_id))
        return [_tombstone(group_id, topic, partition) for topic, partition in sorted(partitions)]

    # -- OffsetCommit -----------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_or_epoch: int,
        partitions: Sequence[PartitionCommit],
        retention_ms: int = -1,
    ) -> Result[dict[TopicPartition, ErrorCode]]:
        """Per partition its error; raises ``GroupError`` for the whole request."""
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id, "the group id is empty")
        group = self._groups.get(group_id)
        if group is not None:
            group.validate_offset_commit(member_id, group_instance_id, generation_or_epoch)
        elif generation_or_epoch >= 0:
            # Kafka: ILLEGAL_GENERATION before OffsetCommit v9 (the handler maps it).
            raise GroupError(ErrorCode.group_id_not_found, f"no group {group_id}")
        errors, records = self._commit_records(group_id, partitions, retention_ms)
        return Result(records=records, response=errors)

    # -- TxnOffsetCommit ---------------------------------------------------------------------

    def commit_transactional_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        producer: TxnProducer,
        partitions: Sequence[PartitionCommit],
    ) -> Result[dict[TopicPartition, ErrorCode]]:
        """Per partition its error; raises ``GroupError`` for the whole request. The records
        are the producer's (pending until its transaction's marker)."""
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id, "the group id is empty")
        group = self._groups.get(group_id)
        if group is not None:
            try:
                group.validate_offset_commit(
                    member_id, group_instance_id, generation_id, is_transactional=True
                )
            except GroupError as e:
                if e.error_code != ErrorCode.stale_member_epoch:
                    raise
                raise GroupError(ErrorCode.illegal_generation, str(e)) from e
        elif generation_id >= 0:
            raise GroupError(ErrorCode.illegal_generation, f"no group {group_id}")
        errors, records = self._commit_records(group_id, partitions, -1)
        return Result(records=records, response=errors, producer=producer)

    def _commit_records(
        self, group_id: str, partitions: Sequence[PartitionCommit], retention_ms: int
    ) -> tuple[dict[TopicPartition, ErrorCode], list[CoordinatorRecord]]:
        now = self.context.clock_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        max_metadata = self.context.config.offset_metadata_max_bytes
        errors: dict[TopicPartition, ErrorCode] = {}
        records = []
        for commit in partitions:
            tp = (commit.topic, commit.partition)
            if not self._partition_exists(commit.topic, commit.partition):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif commit.metadata is not None and len(commit.metadata) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                errors[tp] = ErrorCode.none
                value = offset_value(
                    commit.offset, commit.leader_epoch, commit.metadata or "", now, expire
                )
                records.append(
                    CoordinatorRecord(
                        OffsetCommitKey(group_id, commit.topic, commit.partition), value
                    )
                )
        return errors, records

    def _partition_exists(self, topic: str, partition: int) -> bool:
        count = self.context.topics.partition_count(topic)
        return count is not None and 0 <= partition < count

    # -- OffsetFetch ------------------------------------------------------------------------

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> list[tuple[str, list[FetchedPartition]]]:
        """The committed offsets of ``topics`` (None: every topic the group committed);
        ``require_stable``: a partition with a pending transactional offset is unstable."""
        group = self._groups.get(group_id)
        if group is not None and (member_id is not None or member_epoch >= 0):
            group.validate_offset_fetch(member_id, member_epoch)
        offsets = self._offsets.get(group_id, {})
        open_partitions = self._pending.partitions(group_id) if require_stable else {}

        def fetched(tp: TopicPartition) -> FetchedPartition:
            if tp in open_partitions:
                return FetchedPartition(tp[1], None, unstable=True)
            return FetchedPartition(tp[1], offsets.get(tp))

        if topics is None:  # Kafka's fetchAllOffsets: the partitions with a committed offset
            by_topic: dict[str, list[FetchedPartition]] = {}
            for tp in sorted(offsets):
                by_topic.setdefault(tp[0], []).append(fetched(tp))
            return list(by_topic.items())
        return [(topic, [fetched((topic, p)) for p in partitions]) for topic, partitions in topics]

    # -- OffsetDelete -----------------------------------------------------------------------

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> Result[dict[TopicPartition, ErrorCode]]:
        group = self._groups.get(group_id)
        if group is None and group_id not in self._offsets and not self.has_pending(group_id):
            raise GroupError(ErrorCode.group_id_not_found, f"no group {group_id}")
        if group is not None and not group.is_empty() and group.protocol_type() != "consumer":
            raise GroupError(ErrorCode.non_empty_group, f"group {group_id} has members")
        offsets = self._offsets.get(group_id, {})
        errors: dict[TopicPartition, ErrorCode] = {}
        records = []
        for topic, partitions in topics:
            if self.context.topics.partition_count(topic) is None:
                error = ErrorCode.unknown_topic_or_partition
            elif group is not None and group.is_subscribed_to(topic):
                error = ErrorCode.group_subscribed_to_topic
            else:
                error = ErrorCode.none
            for partition in partitions:
                errors[(topic, partition)] = error
                tp = (topic, partition)
                if error == ErrorCode.none and (tp in offsets or self.has_pending(group_id, tp)):
                    records.append(_tombstone(group_id, topic, partition))
        return Result(records=records, response=errors)

    # -- expiry -----------------------------------------------------------------------------

    def _schedule_expiry(self) -> None:
        interval = self.context.config.offsets_retention_check_interval_ms
        self.context.timer.schedule(EXPIRY_TIMER, interval, self.expire)

    def expire(self) -> Result[None]:
        """The timer's operation: expired offsets, and empty groups left without offsets; at
        most about ``MAX_EXPIRED_RECORDS`` records a run, the next run at once if more are due."""
        records, more = self.expired_records()
        if more:
            self.context.timer.schedule(EXPIRY_TIMER, 0, self.expire)
        else:
            self._schedule_expiry()
        return Result(records=records)

    def expired_records(self) -> tuple[list[CoordinatorRecord], bool]:
        """The tombstones due now, group by group, and whether groups were left for later."""
        now = self.context.clock_ms()
        retention = self.context.config.offsets_retention_ms
        records: list[CoordinatorRecord] = []
        for group_id in sorted(set(self._offsets) | set(self._groups)):
            group = self._groups.get(group_id)
            offsets = self._offsets.get(group_id, {})
            since: int | None = None
            if group is not None and group.is_empty():
                since = self._empty_since.setdefault(group_id, now)
            else:
                self._empty_since.pop(group_id, None)
            if len(records) >= MAX_EXPIRED_RECORDS:
                return records, True
            busy = group is not None and not group.is_empty()
            if busy and not _expires_while_busy(group):
                continue
            expired = []
            for (topic, partition), offset in sorted(offsets.items()):
                if busy and group.is_subscribed_to(topic):
                    continue
                if self.has_pending(group_id, (topic, partition)):
                    continue  # Kafka: not while a transaction has an offset for it pending
                if offset.expire_timestamp_ms >= 0:
                    due = now >= offset.expire_timestamp_ms
                else:
                    base = offset.commit_timestamp_ms if since is None else since
                    due = now - base >= retention
                if due:
                    expired.append(_tombstone(group_id, topic, partition))
            records.extend(expired)
            if (
                group is not None
                and group.is_empty()
                and len(expired) == len(offsets)
                and not self.has_pending(group_id)
            ):
                records.extend(group.tombstones())
                self._empty_since.pop(group_id, None)
        for group_id in set(self._empty_since) - set(self._groups):
            del self._empty_since[group_id]
        return records, False


def _expires_while_busy(group: Group) -> bool:
    """Whether a group with members has offsets that may expire (of topics it does not consume):
    Kafka's ``offsetExpirationCondition``: a consumer group (KIP-848) always, a classic group
    only if it uses the consumer protocol and is Stable (it knows its members' subscriptions)."""
    if group.protocol_type() != "consumer":
        return False
    return group.type is GroupType.CONSUMER or group.state_name() == "Stable"


def _tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group_id, topic, partition), None)
