"""With one log dir offline, a broker still creates new partitions, on its healthy log dir.

A real cluster (``odradek local up``) with one broker whose second log dir is unusable from the
start (a file where the directory should be, as the storage tests simulate a dead disk). The
controller marks the replicas of a topic it creates as new (LeaderAndIsr ``is_new``), so the
broker creates them on the healthy dir instead of refusing them for fear of the offline one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from support.consuming import poll_records

pytestmark = pytest.mark.integration

WAIT_S = 30.0
PARTITIONS = 3


@pytest.fixture
def running(tmp_path, local_cluster):
    broker_dir = tmp_path / "broker-1"
    broker_dir.mkdir()
    (broker_dir / "disk-1").write_text("not a directory: this disk is gone\n")
    with local_cluster(tmp_path, brokers=1) as state:
        yield state


def test_a_new_topic_is_created_and_served_on_the_healthy_dir(running):
    state = running
    broker_dir = Path(next(m for m in state.members if m.role == "broker").data_dir)
    admin = KafkaAdminClient(bootstrap_servers=state.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("fresh", PARTITIONS, 1)])
    finally:
        admin.close()

    producer = KafkaProducer(
        bootstrap_servers=state.bootstrap_servers,
        acks="all",
        enable_idempotence=False,
        retries=5,
        max_block_ms=20_000,
    )
    sent = [b"v%d" % i for i in range(30)]
    futures = [
        producer.send("fresh", value=value, partition=i % PARTITIONS)
        for i, value in enumerate(sent)
    ]
    producer.flush(timeout=30)
    acknowledged = [f.get(timeout=10) for f in futures]
    producer.close(timeout=5)
    assert {m.partition for m in acknowledged} == set(range(PARTITIONS))

    consumer = KafkaConsumer(bootstrap_servers=state.bootstrap_servers, enable_auto_commit=False)
    consumer.assign([TopicPartition("fresh", p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    received = [r.value for r in poll_records(consumer, len(sent), WAIT_S)]
    consumer.close()
    assert sorted(received) == sorted(sent)
    assert sorted(d.name for d in (broker_dir / "disk-0").glob("fresh-*")) == [
        f"fresh-{p}" for p in range(PARTITIONS)
    ]
