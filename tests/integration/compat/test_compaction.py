"""Consumers read the right record timestamps from batches compaction gave a delete horizon."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from odradek.errors import CorruptRecordError
from odradek.storage.batch import DELETE_HORIZON_MASK, BatchHeader, iter_batches
from support.consuming import poll_messages, poll_records
from support.waiting import wait_until

pytestmark = pytest.mark.integration

TIMEOUT_S = 20
# The broker's cleaner looks for work every 15 s (log.cleaner.backoff.ms): one wait covers it.
CLEANED_WITHIN_S = 60
DELETE_RETENTION_MS = 86_400_000  # the tombstone stays for the whole test
T0_MS = 1_600_000_000_000  # CreateTime of the records: long ago, as when replaying old data

# (key, value, timestamp); each inner list is sent as one batch.
BATCHES = [
    [(b"a", b"a-1", T0_MS), (b"b", b"b-1", T0_MS + 1_000)],
    [(b"c", b"c-1", T0_MS + 5_000), (b"a", None, T0_MS + 2_000), (b"d", b"d-1", T0_MS + 9_000)],
] + [[(b"filler-%d" % n, b"f" * 300, T0_MS + 10_000 + n)] for n in range(8)]


def cleaned_batches(leader_dir: Path, topic: str) -> list[BatchHeader] | None:
    """Headers of the inactive segments' batches, once one carries a delete horizon."""
    segments = sorted(leader_dir.glob(f"disk-*/{topic}-0/*.log"))
    headers = []
    for segment in segments[:-1]:  # the active one is being written
        try:
            headers += [h for _, h in iter_batches(segment.read_bytes())]
        except (CorruptRecordError, FileNotFoundError):  # swapped while we read: next time
            return None
    return headers if any(h.attributes & DELETE_HORIZON_MASK for h in headers) else None


def test_consumers_read_record_timestamps_from_a_batch_with_a_delete_horizon(
    bootstrap, wait_for_topic, leader_of, topic_name
):
    topic = topic_name()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": "1024",
            "delete.retention.ms": str(DELETE_RETENTION_MS),
        }
        spec = {"num_partitions": 1, "replication_factor": 1, "configs": configs}
        admin.create_topics({topic: spec})
    finally:
        admin.close()
    wait_for_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=100)
    try:
        for batch in BATCHES:
            for key, value, timestamp_ms in batch:
                producer.send(topic, key=key, value=value, partition=0, timestamp_ms=timestamp_ms)
            producer.flush(TIMEOUT_S)  # one batch per flush
    finally:
        producer.close()

    leader_dir = Path(leader_of(topic, 0).data_dir)
    headers = wait_until(
        lambda: cleaned_batches(leader_dir, topic),
        "the cleaner to keep the tombstone with a delete horizon",
        CLEANED_WITHIN_S,
        poll_s=0.1,
    )
    [horizon_batch] = [h for h in headers if h.attributes & DELETE_HORIZON_MASK]
    assert horizon_batch.records_count == 3  # the tombstone's batch, kept whole
    assert horizon_batch.base_timestamp > time.time() * 1000  # now + delete.retention.ms

    # Offset 0 (a's first value) was superseded by the tombstone; everything else stays.
    expected = [
        (offset, key, value, timestamp_ms)
        for offset, (key, value, timestamp_ms) in enumerate(r for b in BATCHES for r in b)
        if offset != 0
    ]

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        read = poll_records(consumer, len(expected), TIMEOUT_S, poll_ms=200)
        received = [(r.offset, r.key, r.value, r.timestamp) for r in read]
    finally:
        consumer.close()
    assert received == expected

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        read = poll_messages(consumer, len(expected), TIMEOUT_S, poll_s=0.2, raise_errors=True)
        received = [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in read]
    finally:
        consumer.close()
    assert received == expected
