"""confluent-kafka-python's own ``test_delete_records`` and
``test_delete_records_multiple_topics_and_partitions`` against Odradek: DeleteRecords moves the
log start offset, and ListOffsets' earliest offset follows it.

Upstream: confluentinc/confluent-kafka-python, tests/integration/admin/test_delete_records.py,
both functions. Read at v2.15.0; the module is ours, not a copy.

- one partition, three records: earliest is 0; DeleteRecords before offset 2 is sent, then
  ListOffsets(earliest) at once, before the deletion's answer is awaited (as upstream); the
  deletion's ``low_watermark`` equals the offset listed;
- two topics of three partitions, three records in each: every earliest is 0; then three
  DeleteRecords (one partition before 0; two partitions of a topic before 1; a partition of one
  topic and the three of the other before 2), each followed by ListOffsets(earliest) of the same
  partitions: each ``low_watermark`` equals the listed offset and the offset asked (0, 1, 2).

Both delete their topics at the end. One local cluster of ZooKeeper, a controller and one
broker, as upstream's, shared with the suite's other unchanged steps (conftest.py).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import SerializingProducer, TopicPartition
from confluent_kafka.admin import AdminClient, DeletedRecords, NewTopic, OffsetSpec

pytestmark = pytest.mark.integration

WAIT_S = 30.0


@pytest.fixture(scope="module")
def bootstrap(one_broker_cluster) -> str:
    return one_broker_cluster.bootstrap_servers


@pytest.fixture(scope="module")
def admin(bootstrap) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(admin: AdminClient, prefix: str, partitions: int) -> str:
    name = f"{prefix}-{uuid.uuid1()}"
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=WAIT_S)
    return name


def produce_three(bootstrap: str, topic: str, partitions: range) -> None:
    producer = SerializingProducer({"bootstrap.servers": bootstrap})
    for partition in partitions:
        for value in ("Message-1", "Message-2", "Message-3"):
            producer.produce(topic, value, partition=partition)
    assert producer.flush(WAIT_S) == 0


def delete_topics(admin: AdminClient, topics: list[str]) -> None:
    for future in admin.delete_topics(topics).values():
        future.result(timeout=WAIT_S)


def test_delete_records(admin, bootstrap):
    topic = create_topic(admin, "test-del-records", 1)
    produce_three(bootstrap, topic, range(1))
    earliest = {TopicPartition(topic, 0): OffsetSpec.earliest()}
    [listed] = admin.list_offsets(earliest).values()
    assert listed.result(timeout=WAIT_S).offset == 0

    [deleting] = admin.delete_records([TopicPartition(topic, 0, 2)]).values()
    [listed] = admin.list_offsets(earliest).values()  # sent before the deletion is awaited
    deleted = deleting.result(timeout=WAIT_S)
    assert isinstance(deleted, DeletedRecords)
    assert deleted.low_watermark == listed.result(timeout=WAIT_S).offset
    delete_topics(admin, [topic])


def test_delete_records_multiple_topics_and_partitions(admin, bootstrap):
    partitions = range(3)
    topic = create_topic(admin, "test-del-records", len(partitions))
    topic2 = create_topic(admin, "test-del-records2", len(partitions))
    for t in (topic, topic2):
        produce_three(bootstrap, t, partitions)
    everything = {
        TopicPartition(t, p): OffsetSpec.earliest() for t in (topic, topic2) for p in partitions
    }
    assert all(
        f.result(timeout=WAIT_S).offset == 0 for f in admin.list_offsets(everything).values()
    )

    rounds = [
        [TopicPartition(topic, 0, 0)],
        [TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 1)],
        [
            TopicPartition(topic, 2, 2),
            TopicPartition(topic2, 0, 2),
            TopicPartition(topic2, 1, 2),
            TopicPartition(topic2, 2, 2),
        ],
    ]
    for before, deletions in enumerate(rounds):
        deleted = {
            part: future.result(timeout=WAIT_S)
            for part, future in admin.delete_records(deletions).items()
        }
        assert len(deleted) == len(deletions)
        earliest = {part: OffsetSpec.earliest() for part in deletions}
        listed = {
            part: future.result(timeout=WAIT_S)
            for part, future in admin.list_offsets(earliest).items()
        }
        for part, result in deleted.items():
            assert isinstance(result, DeletedRecords)
            assert result.low_watermark == listed[part].offset, part
            assert result.low_watermark == before, part
    delete_topics(admin, [topic, topic2])
