"""The broker's cleaner on a compacted topic written by librdkafka's transactional producer: the
records of an aborted transaction disappear even for read_uncommitted consumers, while committed
transactional data and plain data are compacted as usual and read_committed consumers see the
same latest values before and after cleaning."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import ClusterState
from support.consuming import poll_to_partition_end
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
CLEANED_WITHIN_S = 90.0  # the cleaner thread looks every 15 s (log.cleaner.backoff.ms)
OVERRIDES = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory, local_cluster) -> Iterator[str]:
    root = tmp_path_factory.mktemp("txn-compaction")
    with local_cluster(root / "var" / "local", brokers=1, broker_overrides=OVERRIDES):
        yield ClusterState.read(root / "var" / "local").bootstrap_servers


def read_all(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        return [(m.key(), m.value()) for m in poll_to_partition_end(consumer, WAIT_S)]
    finally:
        consumer.close()


def latest(records: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return dict(records)


def test_the_cleaner_removes_aborted_transactions_and_compacts_committed_ones(bootstrap):
    topic = f"txn-compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "1000",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(WAIT_S)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"}
    )
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, key=b"k%d" % i, value=b"aborted-%d" % i, partition=0)
    producer.flush(WAIT_S)
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=b"k%d" % i, value=b"committed-%d" % i, partition=0)
    producer.commit_transaction(WAIT_S)
    # Small batches: a batch larger than segment.bytes is refused (RecordBatchTooLarge).
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all", "batch.num.messages": 5})
    failures = []
    for round_ in range(3):  # rolls segments; later rounds supersede the earlier ones
        for i in range(40):
            plain.produce(
                topic,
                key=b"f%d" % i,
                value=b"%d-" % round_ + b"x" * 100,
                partition=0,
                on_delivery=lambda error, _: error and failures.append(error),
            )
        assert plain.flush(WAIT_S) == 0
    assert failures == []
    committed_view = latest(read_all(bootstrap, topic, "read_committed"))
    assert committed_view[b"k0"] == b"committed-0" and b"k15" not in committed_view

    wait_until(
        lambda: (
            not any(
                v.startswith(b"aborted-") for _, v in read_all(bootstrap, topic, "read_uncommitted")
            )
        ),
        "the aborted transaction's records cleaned",
        CLEANED_WITHIN_S,
        poll_s=3,
    )
    assert latest(read_all(bootstrap, topic, "read_committed")) == committed_view
    assert latest(read_all(bootstrap, topic, "read_uncommitted")) == committed_view
