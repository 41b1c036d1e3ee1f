"""Unmodified Kafka clients produce to and consume from the broker's server over loopback.

The broker's servers (a client listener and the control-plane listener, as a broker process
runs them), handlers, replica manager and logs are the real ones, on their own event loop
thread; only leadership is handed out by the test, as the controller does through LeaderAndIsr
and UpdateMetadata.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import generate_latest

from support.consuming import poll_messages, poll_records

pytestmark = pytest.mark.integration


def _messages(n: int) -> list[tuple[bytes, bytes]]:
    return [(b"key-%d" % i, b"value-%d" % i) for i in range(n)]


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_produces_and_consumes(broker, compression):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        acks="all",
        enable_idempotence=False,
        compression_type=compression,
        linger_ms=5,
    )
    sent = _messages(300)
    futures = [producer.send(broker.topic, key=k, value=v, headers=[("h", b"1")]) for k, v in sent]
    producer.flush(timeout=20)
    offsets = [f.get(timeout=10) for f in futures]
    producer.close(timeout=5)
    assert {m.partition for m in offsets} <= set(range(broker.partitions))

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    consumer.assign([TopicPartition(broker.topic, p) for p in range(broker.partitions)])
    received = poll_records(consumer, len(sent), 20)
    consumer.close()
    assert sorted((r.key, r.value) for r in received) == sorted(sent)
    assert all(r.headers == [("h", b"1")] for r in received)
    per_partition = {}
    for r in received:
        per_partition.setdefault(r.partition, []).append(r.offset)
    for offsets_seen in per_partition.values():
        assert offsets_seen == list(range(len(offsets_seen)))


def test_confluent_kafka_produces_and_consumes_with_null_values(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "compression.type": "lz4"}
    )
    delivered = []
    for i in range(500):
        value = None if i % 10 == 0 else b"v%d" % i
        producer.produce(
            broker.topic,
            key=b"k%d" % i,
            value=value,
            partition=i % broker.partitions,
            on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())),
        )
    assert producer.flush(20) == 0
    assert all(err is None for err, _, _ in delivered) and len(delivered) == 500

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",  # assign() needs no coordinator
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(broker.topic, p, 0) for p in range(broker.partitions)])
    received = [(m.key(), m.value()) for m in poll_messages(consumer, 500, 20)]
    consumer.close()
    assert len(received) == 500
    assert sum(1 for _, value in received if value is None) == 50


def test_list_offsets_by_time_and_metadata_for_unknown_topics(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        producer.send(broker.topic, value=b"%d" % i, partition=0, timestamp_ms=base + i * 1000)
        producer.flush()
    producer.close(timeout=5)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(broker.topic, 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 10}
    found = consumer.offsets_for_times({tp: base + 4500})[tp]
    assert (found.offset, found.timestamp) == (5, base + 5000)
    assert not consumer.partitions_for_topic("no-such-topic")  # UNKNOWN_TOPIC_OR_PARTITION
    assert consumer.partitions_for_topic(broker.topic) == set(range(broker.partitions))
    consumer.close()


def test_metrics_count_what_clients_did(broker):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    for _ in range(20):
        producer.send(broker.topic, value=b"x" * 100, partition=1)
    producer.flush()
    producer.close(timeout=5)
    text = generate_latest(broker.registry).decode()
    assert 'odradek_broker_messages_in_total{topic="events"} 20.0' in text
    assert 'api="Produce"' in text


def test_aiokafka_produces_and_consumes(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(100):
                await producer.send(broker.topic, key=b"k%d" % i, value=b"v%d" % i, partition=2)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(broker.topic, 2)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            received = []
            async with asyncio.timeout(20):
                while len(received) < 100:
                    batches = await consumer.getmany(tp, timeout_ms=500)
                    received.extend(batches.get(tp, []))
            return received
        finally:
            await consumer.stop()

    received = asyncio.run(scenario())
    assert [(r.offset, r.value) for r in received] == [(i, b"v%d" % i) for i in range(100)]


def test_kcat_lists_produces_and_consumes(broker):
    import shutil
    import subprocess

    kcat = shutil.which("kcat")
    assert kcat, "scripts/setup.sh installs kcat"
    listing = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0, listing.stderr
    assert f'topic "{broker.topic}" with {broker.partitions} partitions' in listing.stdout

    lines = "".join(f"line {i}\n" for i in range(50))
    produced = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-P", "-t", broker.topic, "-p", "1"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [
            kcat,
            "-b",
            broker.bootstrap,
            "-C",
            "-t",
            broker.topic,
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == lines
