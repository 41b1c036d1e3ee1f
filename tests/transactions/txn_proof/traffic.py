"""Topics and records for the transaction proofs (confluent-kafka): create a topic and wait
until it is led, fill it with an idempotent ``acks=all`` producer, read a topic whole with either
isolation level, judge an output against its input (``exactly_once``), read a group's committed
offsets. Who coordinates a group or a transactional id and the end offsets of the input are
support.proof_lookups' (shared with the group proofs). Every wait is bounded."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from support.waiting import wait_until

ADMIN_TIMEOUT_S = 15.0
FLUSH_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 60.0

# Not flagged retriable by librdkafka's committed(), yet only a coordinator moving or loading.
RETRIABLE_LOOKUPS = {
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
}

Record = tuple[int, int, bytes]  # partition, offset, value


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=ADMIN_TIMEOUT_S)

    def led() -> bool:
        found = admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics.get(topic)
        return (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        )

    wait_until(led, f"{topic} led", ADMIN_TIMEOUT_S)


def fill(bootstrap: str, topic: str, count: int, partitions: int) -> dict[tuple[int, int], bytes]:
    """``count`` records ``r000000``, ``r000001``, ... round robin over the partitions with an
    idempotent ``acks=all`` producer; (partition, offset) -> value, all acknowledged."""
    acked: dict[tuple[int, int], bytes] = {}
    failed: list[str] = []

    def report(error: Any, message: Any) -> None:
        if error is None:
            acked[(message.partition(), message.offset())] = message.value()
        else:
            failed.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 30_000,
        }
    )
    for i in range(count):
        producer.produce(topic, f"r{i:06d}".encode(), partition=i % partitions, on_delivery=report)
        producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    assert remaining == 0 and not failed, f"{remaining} unacknowledged, failures {failed[:3]}"
    return acked


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> list[Record]:
    """Every record of ``topic`` from the start to the end each partition has now (with
    ``read_committed``, the end is the last stable offset), in partition order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-proof-reader",  # assign() only: never joins, never commits
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic} not read to its end: {at_end}"
            for message in consumer.consume(num_messages=500, timeout=0.5):
                error = message.error()
                if error is None:
                    records.append((message.partition(), message.offset(), message.value()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                else:
                    raise AssertionError(f"reading {topic}: {error}")
    finally:
        consumer.close()
    return sorted(records)


def source_of(value: bytes) -> tuple[int, int, bytes]:
    """(input partition, input offset, transformed value) of an output record."""
    transformed, _, where = value.rpartition(b"|")
    partition, offset = where.decode().split(":")
    return int(partition), int(offset), transformed


@dataclass
class Judgement:
    """An output topic judged against its input: exactly once means all three lists empty."""

    inputs: int
    outputs: int
    missing: list[tuple[int, int]] = field(default_factory=list)
    duplicated: dict[tuple[int, int], int] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return not (self.missing or self.duplicated or self.wrong)

    def report(self) -> str:
        return (
            f"{self.inputs} input records, {self.outputs} output records: "
            f"{len(self.missing)} missing {self.missing[:10]}, "
            f"{len(self.duplicated)} duplicated {list(self.duplicated.items())[:10]}, "
            f"{len(self.wrong)} wrong {self.wrong[:5]}"
        )


def exactly_once(inputs: dict[tuple[int, int], bytes], outputs: list[Record]) -> Judgement:
    """Every input record transformed, in the output once (and on its input's partition)."""
    seen: Counter[tuple[int, int]] = Counter()
    judgement = Judgement(len(inputs), len(outputs))
    for partition, offset, value in outputs:
        source_partition, source_offset, transformed = source_of(value)
        source = (source_partition, source_offset)
        seen[source] += 1
        expected = inputs.get(source)
        if expected is None or transformed != expected.upper() or partition != source_partition:
            judgement.wrong.append(f"{partition}@{offset}: {value!r}")
    judgement.missing = sorted(set(inputs) - set(seen))
    judgement.duplicated = {s: n for s, n in sorted(seen.items()) if n > 1}
    return judgement


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch with require_stable: a pending transactional
    offset is waited for, not read); none while the group's coordinator moves (a retriable
    error such as COORDINATOR_NOT_AVAILABLE: the caller asks again)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=ADMIN_TIMEOUT_S
        )
    except KafkaException as e:
        if e.args[0].retriable() or e.args[0].code() in RETRIABLE_LOOKUPS:
            return {}
        raise
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
