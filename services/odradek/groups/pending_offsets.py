"""Pending transactional offsets of one shard: Kafka's ``pendingTransactionalOffsets`` and
``OpenTransactions`` (``OffsetMetadataManager``).

A TxnOffsetCommit's offsets are written in a transactional batch of the producer and count only
once the producer's transaction commits (its marker in the partition). Until then they are kept
here, by producer id, then group id, then (topic, partition); and, per group and partition, the
set of producers that have one (so OffsetFetch require_stable and a tombstone find them without
a scan). Invariants: a producer is in ``producers_of(group, tp)`` exactly when it has a pending
offset for them; no map here holds an empty entry (a group without pending offsets is absent).

Changed only by the offsets manager's replay; one shard's event loop, no locking.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from odradek.common.partitions import TopicPartition

__all__ = ["PendingOffsets", "remove_entry"]

V = TypeVar("V")


class PendingOffsets(Generic[V]):
    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[TopicPartition, V]]] = {}
        self._open: dict[str, dict[TopicPartition, set[int]]] = {}

    def add(self, producer_id: int, group_id: str, tp: TopicPartition, offset: V) -> None:
        """The producer's latest pending offset of ``tp`` (replaces an earlier one)."""
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = offset
        self._open.setdefault(group_id, {}).setdefault(tp, set()).add(producer_id)

    def drop_partition(self, group_id: str, tp: TopicPartition) -> None:
        """A tombstone of ``tp``: every producer's pending offset of it goes."""
        for producer_id in self._open.get(group_id, {}).get(tp, ()):
            offsets = self._by_producer.get(producer_id)
            if offsets is not None:
                remove_entry(offsets, group_id, tp)
                if not offsets:
                    del self._by_producer[producer_id]
        remove_entry(self._open, group_id, tp)

    def end(self, producer_id: int) -> list[tuple[str, TopicPartition, V]]:
        """The producer's transaction ended: its pending offsets, removed from here."""
        ended = []
        for group_id, partitions in self._by_producer.pop(producer_id, {}).items():
            for tp, offset in partitions.items():
                producers = self._open.get(group_id, {}).get(tp)
                if producers is not None:
                    producers.discard(producer_id)
                    if not producers:
                        remove_entry(self._open, group_id, tp)
                ended.append((group_id, tp, offset))
        return ended

    def of_producer(self, producer_id: int) -> dict[str, dict[TopicPartition, V]]:
        return {g: dict(o) for g, o in self._by_producer.get(producer_id, {}).items()}

    def has(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        """Whether a producer has a pending offset of the group (of ``tp``, if given)."""
        partitions = self._open.get(group_id)
        return partitions is not None and (tp is None or tp in partitions)

    def partitions(self, group_id: str) -> Mapping[TopicPartition, set[int]]:
        """The group's partitions with a pending offset, and whose."""
        return self._open.get(group_id, {})

    def group_ids(self) -> set[str]:
        return set(self._open)


def remove_entry(
    by_group: dict[str, dict[TopicPartition, Any]], group_id: str, tp: TopicPartition
) -> None:
    """Remove ``tp`` of ``group_id``, and the group's entry once it has none left (the invariant
    above: no empty entry; the offsets manager keeps its committed offsets by the same rule)."""
    entries = by_group.get(group_id)
    if entries is not None:
        entries.pop(tp, None)
        if not entries:
            del by_group[group_id]
