"""kafka-python 3.x, with its defaults, administers, produces to and consumes from 3 brokers."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from support.consuming import poll_records

pytestmark = pytest.mark.integration

TIMEOUT_S = 20
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def admin(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    yield client
    client.close()


def create_topic(admin, wait_for_topic, name, partitions, configs=None):
    spec = {"num_partitions": partitions, "replication_factor": 1}
    if configs:
        spec["configs"] = configs
    admin.create_topics({name: spec})
    return wait_for_topic(name, partitions)


def records(n: int) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]:
    """Keys carry the send index; every 7th value is null; headers vary (none, one, two)."""
    out = []
    for i in range(n):
        value = None if i % 7 == 3 else b"value-%d-" % i + b"x" * (i % 50)
        headers = [("index", b"%d" % i), ("empty", b"")][: i % 3]
        out.append((b"key-%05d" % i, value, headers))
    return out


def consume(bootstrap, topic, partitions, expected):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        received = poll_records(consumer, expected, TIMEOUT_S, poll_ms=200)
        # Nothing more than expected arrives.
        for batch in consumer.poll(timeout_ms=300).values():
            received.extend(batch)
        return received
    finally:
        consumer.close()


def check_order(received):
    """Per partition: offsets 0, 1, 2, ... and send order (the key's index) preserved."""
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
    bootstrap, admin, wait_for_topic, topic_name, codec
):
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 3)
    sent = records(300)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
    try:
        futures = [producer.send(topic, key=k, value=v, headers=h) for k, v, h in sent]
        producer.flush(timeout=TIMEOUT_S)
        acknowledged = [f.get(timeout=TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=5)

    received = consume(bootstrap, topic, 3, len(sent))
    assert len(received) == len(sent)
    by_key = {r.key: r for r in received}
    for (key, value, headers), meta in zip(sent, acknowledged, strict=True):
        r = by_key[key]
        assert (r.value, r.headers) == (value, headers)
        assert (r.partition, r.offset) == (meta.partition, meta.offset)
        assert r.timestamp > 0
    assert sum(1 for r in received if r.value is None) == len([s for s in sent if s[1] is None])
    assert set(check_order(received)) == {0, 1, 2}  # the key partitioner used every partition


def test_many_partitions(bootstrap, admin, wait_for_topic, topic_name):
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 24)
    sent = records(24 * 25)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", linger_ms=5)
    try:
        futures = [producer.send(topic, key=k, value=v, headers=h) for k, v, h in sent]
        producer.flush(timeout=TIMEOUT_S)
        acknowledged = [f.get(timeout=TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=5)
    assert {m.partition for m in acknowledged} == set(range(24))

    received = consume(bootstrap, topic, 24, len(sent))
    assert sorted((r.key, r.value) for r in received) == sorted((k, v) for k, v, _ in sent)
    per_partition = check_order(received)
    assert set(per_partition) == set(range(24))

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(24)]
        ends = consumer.end_offsets(tps)
        assert {tp.partition: n for tp, n in ends.items()} == {
            p: len(rs) for p, rs in per_partition.items()
        }
    finally:
        consumer.close()


def test_offsets_by_time_earliest_and_latest(bootstrap, admin, wait_for_topic, topic_name):
    from kafka.admin import OffsetSpec

    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 2)
    base = int(time.time() * 1000) - 600_000
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(10):
            producer.send(topic, value=b"%d" % i, partition=1, timestamp_ms=base + i * 1000)
        producer.flush(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp, empty = TopicPartition(topic, 1), TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp, empty]) == {tp: 0, empty: 0}
        assert consumer.end_offsets([tp, empty]) == {tp: 10, empty: 0}
        found = consumer.offsets_for_times({tp: base + 4500})[tp]
        assert (found.offset, found.timestamp) == (5, base + 5000)
        exact = consumer.offsets_for_times({tp: base})[tp]
        assert (exact.offset, exact.timestamp) == (0, base)
        assert consumer.offsets_for_times({tp: base + 60_000, empty: base}) == {
            tp: None,
            empty: None,
        }
    finally:
        consumer.close()

    # The same through the admin client's ListOffsets.
    tp = TopicPartition(topic, 1)
    for spec, expected in [
        (OffsetSpec.EARLIEST, (0, -1)),
        (OffsetSpec.LATEST, (10, -1)),
        (OffsetSpec.MAX_TIMESTAMP, (9, base + 9000)),
        (base + 2500, (3, base + 3000)),
    ]:
        found = admin.list_partition_offsets({tp: spec})[tp]
        assert (found.offset, found.timestamp) == expected, spec


def test_idempotent_producer_retries_without_duplicates(
    bootstrap, admin, wait_for_topic, topic_name, leader_of, paused, retry_evidence
):
    """kafka-python's default producer (idempotent, acks=all) retries across a stalled leader.

    The partition's leader is stopped (SIGSTOP) while batches are in flight: the producer times
    them out, reconnects and sends them again with the same producer id and sequence numbers
    once the leader resumes, which by then has also appended the first copies. The log must
    hold every record once, in send order, at contiguous offsets.
    """
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 1)
    leader = leader_of(topic, 0)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        request_timeout_ms=1_000,
        retry_backoff_ms=100,
        linger_ms=2,
        batch_size=2_000,
        max_in_flight_requests_per_connection=5,
    )
    assert producer.config["enable_idempotence"] and producer.config["acks"] == -1
    total = 3_000
    requests_before, _ = retry_evidence(leader, topic, 0)
    try:
        futures = [producer.send(topic, value=b"r%06d" % i) for i in range(1_000)]
        producer.flush(timeout=TIMEOUT_S)
        with paused(leader):
            futures += [producer.send(topic, value=b"r%06d" % i) for i in range(1_000, 2_000)]
            time.sleep(2.5)  # > request_timeout_ms: the in-flight requests time out
        futures += [producer.send(topic, value=b"r%06d" % i) for i in range(2_000, total)]
        producer.flush(timeout=TIMEOUT_S)
        offsets = [f.get(timeout=TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(timeout=5)
    assert offsets == list(range(total))
    requests_after, batches = retry_evidence(leader, topic, 0)
    # The scenario did what it is for: the leader saw at least one batch twice.
    assert requests_after - requests_before > batches

    received = consume(bootstrap, topic, 1, total)
    assert [r.value for r in received] == [b"r%06d" % i for i in range(total)]
    assert [r.offset for r in received] == list(range(total))


def topic_resource(name, configs=None):
    return ConfigResource(ConfigResourceType.TOPIC, name, configs)


def test_topic_admin(bootstrap, admin, wait_for_topic, wait_for_topic_gone, topic_name):
    topic = topic_name()
    create_topic(
        admin,
        wait_for_topic,
        topic,
        2,
        configs={"retention.ms": "3600000", "cleanup.policy": "delete"},
    )
    assert topic in admin.list_topics()
    [described] = admin.describe_topics([topic])
    assert len(described["partitions"]) == 2

    configs = admin.describe_configs([topic_resource(topic)], config_filter="all")["topic"][topic]
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["config_source"]) == (
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["segment.bytes"]["config_source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")

    # IncrementalAlterConfigs: SET one key, DELETE another.
    result = admin.alter_configs(
        [
            topic_resource(
                topic,
                {
                    "retention.ms": (AlterConfigOp.SET, "7200000"),
                    "cleanup.policy": (AlterConfigOp.DELETE, None),
                    "max.message.bytes": (AlterConfigOp.SET, "500000"),
                },
            )
        ]
    )
    assert result == {"topic": {topic: "OK"}}
    modified = admin.describe_configs([topic_resource(topic)])["topic"][topic]
    assert {k: v["value"] for k, v in modified.items()} == {
        "retention.ms": "7200000",
        "max.message.bytes": "500000",
    }
    # AlterConfigs (the whole set of overrides).
    result = admin.alter_configs(
        [topic_resource(topic, {"retention.ms": "60000"})], incremental=False
    )
    assert result == {"topic": {topic: "OK"}}
    modified = admin.describe_configs([topic_resource(topic)])["topic"][topic]
    assert modified["retention.ms"]["value"] == "60000"

    # CreatePartitions: 2 -> 5, every broker learns the new ones.
    admin.create_partitions({topic: 5})
    wait_for_topic(topic, 5)

    # DeleteRecords moves the log start offset.
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(10):
            producer.send(topic, value=b"%d" % i, partition=4)
        producer.flush(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    tp = TopicPartition(topic, 4)
    assert admin.delete_records({tp: 6})[tp]["low_watermark"] == 6
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 6}
    finally:
        consumer.close()
    received = consume(bootstrap, topic, 5, 4)
    assert [(r.partition, r.offset, r.value) for r in received] == [
        (4, o, b"%d" % o) for o in range(6, 10)
    ]

    admin.delete_topics([topic])
    wait_for_topic_gone(topic)
    assert topic not in admin.list_topics()
