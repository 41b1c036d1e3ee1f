"""aiokafka, the asyncio client, administers, produces to and consumes from 3 brokers."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import TopicPartition

pytestmark = pytest.mark.integration

TIMEOUT_S = 20
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def run(coroutine):
    """Run a scenario with a bound, so a client that hangs fails the test instead."""

    async def bounded():
        async with asyncio.timeout(TIMEOUT_S * 2):
            return await coroutine

    return asyncio.run(bounded())


async def create_topic(bootstrap, name, partitions, configs=None):
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, partitions, 1, topic_configs=configs or {})]
        )
        assert [error_code for _, error_code, *_ in response.topic_errors] == [0]
    finally:
        await admin.close()


def records(n: int) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]:
    """Keys carry the send index; every 7th value is null; headers vary (none, one, two)."""
    out = []
    for i in range(n):
        value = None if i % 7 == 3 else b"value-%d-" % i + b"z" * (i % 50)
        headers = [("index", b"%d" % i), ("two", b"2")][: i % 3]
        out.append((b"key-%05d" % i, value, headers))
    return out


async def produce(bootstrap, topic, sent, **config):
    """Send everything, then wait for every acknowledgement: (partition, offset) per record."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=k, value=v, headers=h or None) for k, v, h in sent
        ]
        metadata = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in metadata]


async def consume(bootstrap, topic, partitions, expected):
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        received = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(received) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                received.extend(batch)
        for batch in (await consumer.getmany(timeout_ms=300)).values():
            received.extend(batch)
        return received
    finally:
        await consumer.stop()


def check_order(received):
    per_partition = {}
    for r in received:
        per_partition.setdefault(r.partition, []).append(r)
    for partition, rs in per_partition.items():
        assert [r.offset for r in rs] == list(range(len(rs))), partition
        indexes = [int(r.key.split(b"-")[1]) for r in rs]
        assert indexes == sorted(indexes), partition
    return per_partition


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_produce_and_consume_each_codec_with_keys_headers_and_nulls(
    bootstrap, wait_for_topic, topic_name, codec
):
    topic = topic_name()
    run(create_topic(bootstrap, topic, 3))
    wait_for_topic(topic, 3)
    sent = records(300)
    placed = run(produce(bootstrap, topic, sent, compression_type=codec))
    received = run(consume(bootstrap, topic, 3, len(sent)))

    assert len(received) == len(sent)
    by_key = {r.key: r for r in received}
    for (key, value, headers), where in zip(sent, placed, strict=True):
        r = by_key[key]
        assert (r.value, list(r.headers)) == (value, headers)
        assert (r.partition, r.offset) == where
    assert set(check_order(received)) == {0, 1, 2}


def test_many_partitions(bootstrap, wait_for_topic, topic_name):
    topic = topic_name()
    run(create_topic(bootstrap, topic, 24))
    wait_for_topic(topic, 24)
    sent = records(24 * 25)
    placed = run(produce(bootstrap, topic, sent, compression_type="snappy"))
    assert {p for p, _ in placed} == set(range(24))
    received = run(consume(bootstrap, topic, 24, len(sent)))
    assert sorted((r.key, r.value) for r in received) == sorted((k, v) for k, v, _ in sent)
    assert set(check_order(received)) == set(range(24))


def test_idempotent_producer(bootstrap, wait_for_topic, topic_name):
    """aiokafka's opt-in idempotence (InitProducerId v0, acks=all): offsets are contiguous."""
    topic = topic_name()
    run(create_topic(bootstrap, topic, 1))
    wait_for_topic(topic, 1)
    sent = [(b"k%d" % i, b"v%d" % i, []) for i in range(500)]
    placed = run(produce(bootstrap, topic, sent, enable_idempotence=True, acks="all"))
    assert placed == [(0, o) for o in range(500)]
    received = run(consume(bootstrap, topic, 1, 500))
    assert [(r.offset, r.value) for r in received] == [(i, b"v%d" % i) for i in range(500)]


def test_offsets_by_time_earliest_and_latest(bootstrap, wait_for_topic, topic_name):
    topic = topic_name()
    run(create_topic(bootstrap, topic, 2))
    wait_for_topic(topic, 2)
    base = int(time.time() * 1000) - 600_000

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(
                    topic, value=b"%d" % i, partition=1, timestamp_ms=base + i * 1000
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp, empty = TopicPartition(topic, 1), TopicPartition(topic, 0)
            return (
                await consumer.beginning_offsets([tp, empty]),
                await consumer.end_offsets([tp, empty]),
                await consumer.offsets_for_times({tp: base + 4500, empty: base}),
                await consumer.offsets_for_times({tp: base + 60_000}),
            )
        finally:
            await consumer.stop()

    beginning, end, by_time, too_late = run(scenario())
    tp, empty = TopicPartition(topic, 1), TopicPartition(topic, 0)
    assert beginning == {tp: 0, empty: 0}
    assert end == {tp: 10, empty: 0}
    assert (by_time[tp].offset, by_time[tp].timestamp) == (5, base + 5000)
    assert by_time[empty] is None
    assert too_late == {tp: None}


def test_topic_admin(bootstrap, wait_for_topic, wait_for_topic_gone, topic_name):
    topic = topic_name()

    run(create_topic(bootstrap, topic, 2, {"retention.ms": "3600000"}))
    wait_for_topic(topic, 2)

    async def configure():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await admin.start()
        try:
            assert topic in await admin.list_topics()
            resource = ConfigResource(ConfigResourceType.TOPIC, topic)
            [described] = await admin.describe_configs([resource])
            before = _configs(described)
            [altered] = await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "60000"})]
            )
            assert [r[0] for r in altered.resources] == [0]
            [described] = await admin.describe_configs([resource])
            return before, _configs(described)
        finally:
            await admin.close()

    before, after = run(configure())
    assert before["retention.ms"] == ("3600000", False)
    assert after["retention.ms"] == ("60000", False)

    async def grow():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await admin.start()
        try:
            response = await admin.create_partitions({topic: NewPartitions(total_count=3)})
            assert [r[1] for r in response.topic_errors] == [0]
        finally:
            await admin.close()

    run(grow())
    wait_for_topic(topic, 3)

    async def delete_records_then_topic():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, value=b"%d" % i, partition=2)
        finally:
            await producer.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await admin.start()
        try:
            tp = TopicPartition(topic, 2)
            low = await admin.delete_records({tp: RecordsToDelete(before_offset=4)})
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                beginning = await consumer.beginning_offsets([tp])
            finally:
                await consumer.stop()
            response = await admin.delete_topics([topic])
            return low, beginning, response
        finally:
            await admin.close()

    low, beginning, response = run(delete_records_then_topic())
    tp = TopicPartition(topic, 2)
    assert low == {tp: 4}
    assert beginning == {tp: 4}
    assert [e for _, e, *_ in response.topic_error_codes] == [0]
    wait_for_topic_gone(topic)


def _configs(described) -> dict[str, tuple[str, bool]]:
    """DescribeConfigs v1/v2 response -> {name: (value, read_only)} of its one resource."""
    [resource] = described.resources
    error_code, _message, _type, _name, entries = resource[:5]
    assert error_code == 0
    return {entry[0]: (entry[1], entry[2]) for entry in entries}
