"""Test doubles for the worker around one connector task: the contexts of ``connect.api``.

They stand in for the runtime at the task level only (what a task asks of its worker); the
worker's own behaviour is tested with the real worker elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.connect.api import SinkRecord, SourceRecord, TopicPartition


def partition_key(partition: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(partition.items()))


@dataclass
class MemoryOffsets:
    """Source offsets as the worker keeps them: the latest offset per source partition."""

    stored: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = field(default_factory=dict)

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.stored.get(partition_key(partition))

    def offsets(self, partitions: Sequence[Mapping[str, Any]]):
        found = {}
        for p in partitions:
            if partition_key(p) in self.stored:
                found[partition_key(p)] = self.stored[partition_key(p)]
        return found

    def commit(self, records: Sequence[SourceRecord]) -> None:
        """What the worker does once ``records`` are acknowledged."""
        for r in records:
            self.stored[partition_key(r.source_partition)] = dict(r.source_offset)


@dataclass
class SourceContext:
    configs: dict[str, str]
    offset_storage_reader: MemoryOffsets = field(default_factory=MemoryOffsets)


@dataclass
class SinkContext:
    """Records the rewinds a sink task asks for in ``open``."""

    configs: dict[str, str] = field(default_factory=dict)
    rewinds: dict[TopicPartition, int] = field(default_factory=dict)
    assigned: frozenset[TopicPartition] = frozenset()
    errant_record_reporter: Any = None

    def offset(self, partition: TopicPartition, offset: int) -> None:
        self.rewinds[partition] = offset

    def timeout(self, timeout_ms: int) -> None:
        pass

    def assignment(self) -> frozenset[TopicPartition]:
        return self.assigned

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass


def sink_record(
    topic: str,
    partition: int,
    offset: int,
    value: Any,
    *,
    value_schema=None,
    key: Any = None,
    key_schema=None,
    timestamp: int | None = None,
) -> SinkRecord:
    return SinkRecord(
        topic=topic,
        partition=partition,
        key_schema=key_schema,
        key=key,
        value_schema=value_schema,
        value=value,
        timestamp=timestamp,
        kafka_offset=offset,
    )


def drain(task, offsets: MemoryOffsets | None = None, polls_max: int = 50) -> list[SourceRecord]:
    """Poll ``task`` until a poll returns nothing (at most ``polls_max`` polls), committing
    each batch's offsets to ``offsets`` as the worker would once the brokers acknowledge it."""
    records: list[SourceRecord] = []
    for _ in range(polls_max):
        batch = task.poll()
        if not batch:
            return records
        records.extend(batch)
        if offsets is not None:
            offsets.commit(batch)
    raise AssertionError(f"the task still had records after {polls_max} polls")


@dataclass
class ConnectorContext:
    """Counts the reconfiguration requests of a connector (they may come from its threads)."""

    reconfigurations: int = 0
    errors: list[Exception] = field(default_factory=list)

    def request_task_reconfiguration(self) -> None:
        self.reconfigurations += 1

    def raise_error(self, error: Exception) -> None:
        self.errors.append(error)
