"""A reassignment plan, and the JSON files of kafka-reassign-partitions that carry one.

A ``Plan`` says, per partition, its current replicas and its target replicas (in order: the
first is the preferred leader). It reads and writes Kafka's reassignment JSON exactly as
``kafka-reassign-partitions.sh`` does, so a plan made here runs with Kafka's tool and back:

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}

``to_json()`` writes the targets, ``rollback_json()`` the current assignment (what Kafka prints
as "Current partition replica assignment ... Save this to use as the --reassignment-json-file
option during rollback"). Partitions are sorted by topic, then partition, as Kafka sorts them.

Reading follows Kafka's ``parsePartitionReassignmentData`` checks, with its messages: version 1
only; a non-empty partition list; no partition twice; no broker twice in one replica list;
``log_dirs``, when given, as long as ``replicas``. A log dir other than ``"any"`` asks for a move
between the disks of a broker (AlterReplicaLogDirs), which this tool does not do: it is refused,
never dropped. The topics-to-move file of ``--generate`` is read by ``parse_topics_to_move``.

Pure values and functions; frozen, so any thread may share them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.common.partitions import TopicPartition
from odradek.ops.errors import PlanFormatError, PlanMismatchError
from odradek.ops.model import ClusterView

__all__ = [
    "ANY_LOG_DIR",
    "PartitionMove",
    "Plan",
    "parse_reassignment_json",
    "format_reassignment_json",
    "parse_topics_to_move",
]

ANY_LOG_DIR = "any"  # Kafka's AnyLogDir: the broker chooses the disk
REASSIGNMENT_JSON_VERSION = 1


@dataclass(frozen=True, slots=True)
class PartitionMove:
    """One partition: where its replicas are, and where the plan puts them."""

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def adding(self) -> tuple[int, ...]:
        """Brokers that get a new replica (a data copy)."""
        return tuple(b for b in self.target if b not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.current if b not in self.target)

    @property
    def reorder_only(self) -> bool:
        """Same brokers in another order: only the preferred leader changes, no data moves."""
        return set(self.current) == set(self.target)


@dataclass(frozen=True)
class Plan:
    """Moves sorted by topic and partition; at most one per partition."""

    moves: tuple[PartitionMove, ...]

    def __post_init__(self) -> None:
        moves = tuple(sorted(self.moves, key=lambda m: (m.topic, m.partition)))
        tps = [m.tp for m in moves]
        if len(set(tps)) != len(tps):
            raise PlanFormatError("Reassignment data contains duplicate partitions")
        object.__setattr__(self, "moves", moves)

    def __len__(self) -> int:
        return len(self.moves)

    def __iter__(self):
        return iter(self.moves)

    @property
    def replica_moves(self) -> int:
        """Replicas copied to a new broker (reorders move nothing)."""
        return sum(len(m.adding) for m in self.moves)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({m.topic for m in self.moves}))

    def targets(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {m.tp: m.target for m in self.moves}

    def currents(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {m.tp: m.current for m in self.moves}

    def bytes_to_move(self, partition_bytes: Mapping[TopicPartition, int]) -> int:
        """Bytes copied: each added replica copies its partition (sizes from DescribeLogDirs)."""
        return sum(len(m.adding) * partition_bytes.get(m.tp, 0) for m in self.moves)

    def to_json(self) -> str:
        return format_reassignment_json(self.targets())

    def rollback_json(self) -> str:
        return format_reassignment_json(self.currents())

    @classmethod
    def from_json(cls, text: str, view: ClusterView, *, check_brokers: bool = True) -> Plan:
        """The plan a reassignment JSON file asks for, from the cluster as ``view`` shows it.

        Raises ``PlanFormatError`` for a malformed file and ``PlanMismatchError`` when it names a
        partition or (with ``check_brokers``) a broker the cluster does not have, as Kafka's
        execute does; following or cancelling a plan skips the broker check, since a target
        broker may have died since.
        """
        return cls.from_targets(parse_reassignment_json(text), view, check_brokers=check_brokers)

    @classmethod
    def from_targets(
        cls,
        targets: Mapping[TopicPartition, Iterable[int]],
        view: ClusterView,
        *,
        check_brokers: bool = True,
    ) -> Plan:
        missing = sorted(tp for tp in targets if tp not in view.partitions)
        if missing:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            raise PlanMismatchError(f"Topic partitions not found in the cluster: {names}")
        unknown = sorted({b for r in targets.values() for b in r} - set(view.brokers))
        if unknown and check_brokers:
            raise PlanMismatchError(f"Unknown broker id(s) {','.join(map(str, unknown))}")
        return cls(
            tuple(
                PartitionMove(tp.topic, tp.partition, view.partitions[tp].replicas, tuple(r))
                for tp, r in targets.items()
            )
        )


def format_reassignment_json(assignment: Mapping[TopicPartition, Iterable[int]]) -> str:
    """Kafka's ``formatAsReassignmentJson``: compact, sorted, every log dir ``"any"``."""
    partitions = []
    for tp in sorted(assignment):
        replicas = [int(b) for b in assignment[tp]]
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": replicas,
                "log_dirs": [ANY_LOG_DIR] * len(replicas),
            }
        )
    document = {"version": REASSIGNMENT_JSON_VERSION, "partitions": partitions}
    return json.dumps(document, separators=(",", ":"))


def parse_reassignment_json(text: str) -> dict[TopicPartition, tuple[int, ...]]:
    """Target replicas per partition, checked as Kafka's ``parsePartitionReassignmentData``."""
    document = _load(text)
    version = document.get("version", REASSIGNMENT_JSON_VERSION)
    if version != REASSIGNMENT_JSON_VERSION:
        raise PlanFormatError(f"Not supported version field value {version}")
    entries = document.get("partitions")
    if not isinstance(entries, list):
        raise PlanFormatError('"partitions" must be a list of {"topic","partition","replicas"}')
    if not entries:
        raise PlanFormatError("Partition reassignment list cannot be empty")
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in entries:
        tp, replicas = _partition_entry(entry)
        if tp in targets:
            raise PlanFormatError(
                f"Reassignment data contains duplicate partitions: {tp.topic}-{tp.partition}"
            )
        targets[tp] = replicas
    return targets


def _partition_entry(entry: Any) -> tuple[TopicPartition, tuple[int, ...]]:
    if not isinstance(entry, dict):
        raise PlanFormatError(f"a partition entry must be an object, not {entry!r}")
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    if not isinstance(topic, str) or not topic:
        raise PlanFormatError(f'partition entry without a "topic": {entry!r}')
    if not _is_int(partition) or partition < 0:
        raise PlanFormatError(f'partition entry without a valid "partition": {entry!r}')
    where = f"{topic}-{partition}"
    if not isinstance(replicas, list) or not replicas:
        raise PlanFormatError(f'{where}: "replicas" must be a non-empty list of broker ids')
    if not all(_is_int(b) and b >= 0 for b in replicas):
        raise PlanFormatError(f'{where}: "replicas" must be broker ids, not {replicas!r}')
    if len(set(replicas)) != len(replicas):
        raise PlanFormatError(
            f"Partition replica lists may not contain duplicate entries: {where} has {replicas}"
        )
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None:
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise PlanFormatError(
                f"Size of replicas list {replicas} is different from size of log dirs list "
                f"{log_dirs} for partition {where}"
            )
        chosen = [d for d in log_dirs if d != ANY_LOG_DIR]
        if chosen:
            raise PlanFormatError(
                f"{where}: log_dirs {chosen} name a disk; moving replicas between the disks of "
                f'a broker is not done by this tool: use "{ANY_LOG_DIR}"'
            )
    return TopicPartition(topic, partition), tuple(replicas)


def parse_topics_to_move(text: str) -> list[str]:
    """``{"version":1,"topics":[{"topic":"a"},...]}`` (``--topics-to-move-json-file``)."""
    document = _load(text)
    version = document.get("version", REASSIGNMENT_JSON_VERSION)
    if version != REASSIGNMENT_JSON_VERSION:
        raise PlanFormatError(f"Not supported version field value {version}")
    entries = document.get("topics")
    if not isinstance(entries, list) or not entries:
        raise PlanFormatError('"topics" must be a non-empty list of {"topic": NAME}')
    topics = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise PlanFormatError(f'a topics entry must be {{"topic": NAME}}, not {entry!r}')
        if topic in topics:
            raise PlanFormatError(f"Duplicate topic entries: {topic}")
        topics.append(topic)
    return topics


def _load(text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError as e:
        raise PlanFormatError(f"not valid JSON: {e}") from e
    if not isinstance(document, dict):
        raise PlanFormatError("the JSON document must be an object")
    return document


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
