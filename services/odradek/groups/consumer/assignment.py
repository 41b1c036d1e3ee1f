"""Assignments of a KIP-848 group: topic id -> the partitions of it, as plain immutable values.

An ``Assignment`` never holds an empty partition set (``normalized``), so two assignments are
equal exactly when they name the same partitions; the records carry them as Kafka's
``TopicPartitions`` (topic id, sorted partitions). Pure functions; no state.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from odradek.groups.records.consumer import TopicPartitions

__all__ = [
    "Assignment",
    "EMPTY",
    "normalized",
    "of_records",
    "to_records",
    "union",
    "minus",
    "intersect",
    "partitions_of",
    "size",
]

Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Assignment = {}


def normalized(assignment: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def of_records(topics: Iterable[TopicPartitions] | None) -> dict[uuid.UUID, frozenset[int]]:
    result: dict[uuid.UUID, set[int]] = {}
    for topic in topics or ():
        result.setdefault(topic.topic_id, set()).update(topic.partitions)
    return normalized(result)


def to_records(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(topic_id, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
    )


def union(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return normalized({t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in {*a, *b}})


def minus(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return normalized({t: ps - b.get(t, frozenset()) for t, ps in a.items()})


def intersect(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return normalized({t: ps & b.get(t, frozenset()) for t, ps in a.items()})


def partitions_of(assignment: Assignment) -> Iterable[tuple[uuid.UUID, int]]:
    for topic_id, partitions in assignment.items():
        for partition in partitions:
            yield topic_id, partition


def size(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())
