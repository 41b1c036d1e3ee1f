"""confluent-kafka (librdkafka 2.x) administers, produces to and consumes from 3 brokers."""

from __future__ import annotations

import time
import warnings

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

pytestmark = pytest.mark.integration

TIMEOUT_S = 20
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(admin, wait_for_topic, name, partitions, config=None):
    [future] = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
    ).values()
    future.result(TIMEOUT_S)
    return wait_for_topic(name, partitions)


def records(n: int) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]:
    """Keys carry the send index; every 7th value is null; headers vary (none, one, two)."""
    out = []
    for i in range(n):
        value = None if i % 7 == 3 else b"value-%d-" % i + b"y" * (i % 50)
        headers = [("index", b"%d" % i), ("dup", b"a")][: i % 3]
        out.append((b"key-%05d" % i, value, headers))
    return out


def produce(bootstrap, topic, sent, **config):
    """Produce ``sent`` with the key partitioner; returns (partition, offset) per record."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    reports: dict[int, tuple] = {}

    def report(index):
        return lambda err, msg: reports.__setitem__(index, (err, msg.partition(), msg.offset()))

    for i, (key, value, headers) in enumerate(sent):
        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=report(i))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    errors = [err for err, _, _ in reports.values() if err is not None]
    assert not errors, errors[:3]
    return [reports[i][1:] for i in range(len(sent))]


def consume(bootstrap, topic, partitions, expected, start=0):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-assign-only",  # assign() needs no group coordinator
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        received = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(received) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.2):
                assert message.error() is None, message.error()
                received.append(message)
        received.extend(m for m in consumer.consume(500, timeout=0.3) if m.error() is None)
        return received
    finally:
        consumer.close()


def check_order(received):
    """Per partition: offsets 0, 1, 2, ... and send order (the key's index) preserved."""
    per_partition = {}
    for m in received:
        per_partition.setdefault(m.partition(), []).append(m)
    for partition, ms in per_partition.items():
        assert [m.offset() for m in ms] == list(range(len(ms))), partition
        indexes = [int(m.key().split(b"-")[1]) for m in ms]
        assert indexes == sorted(indexes), partition
    return per_partition


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_each_codec_with_keys_headers_and_nulls(
    bootstrap, admin, wait_for_topic, topic_name, codec
):
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 3)
    sent = records(300)
    placed = produce(bootstrap, topic, sent, **{"compression.type": codec})

    received = consume(bootstrap, topic, 3, len(sent))
    assert len(received) == len(sent)
    by_key = {m.key(): m for m in received}
    for (key, value, headers), where in zip(sent, placed, strict=True):
        m = by_key[key]
        assert (m.value(), m.headers() or []) == (value, headers)
        assert (m.partition(), m.offset()) == where
    assert set(check_order(received)) == {0, 1, 2}


def test_many_partitions(bootstrap, admin, wait_for_topic, topic_name):
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 24)
    sent = records(24 * 25)
    placed = produce(bootstrap, topic, sent, **{"compression.type": "zstd"})
    assert {p for p, _ in placed} == set(range(24))

    received = consume(bootstrap, topic, 24, len(sent))
    assert sorted((m.key(), m.value()) for m in received) == sorted((k, v) for k, v, _ in sent)
    per_partition = check_order(received)
    assert set(per_partition) == set(range(24))

    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(24)}, request_timeout=10
    )
    ends = {tp.partition: f.result(TIMEOUT_S).offset for tp, f in futures.items()}
    assert ends == {p: len(ms) for p, ms in per_partition.items()}


def test_offsets_by_time_earliest_and_latest(bootstrap, admin, wait_for_topic, topic_name):
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 2)
    base = int(time.time() * 1000) - 600_000
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=1, timestamp=base + i * 1000)
    assert producer.flush(TIMEOUT_S) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-assign-only",
            "enable.auto.commit": False,
        }
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 10)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
        found = consumer.offsets_for_times(
            [TopicPartition(topic, 1, base + 4500), TopicPartition(topic, 0, base)], timeout=10
        )
        assert sorted((tp.partition, tp.offset, tp.error) for tp in found) == [
            (0, -1, None),  # an empty partition: OFFSET_END
            (1, 5, None),
        ]
        [too_late] = consumer.offsets_for_times(
            [TopicPartition(topic, 1, base + 60_000)], timeout=10
        )
        assert too_late.offset == -1  # OFFSET_END: no record that late
    finally:
        consumer.close()

    tp = TopicPartition(topic, 1)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "by time": OffsetSpec.for_timestamp(base + 2500),
        "max timestamp": OffsetSpec.max_timestamp(),
    }
    results = {}
    for name, spec in specs.items():
        [future] = admin.list_offsets({tp: spec}, request_timeout=10).values()
        info = future.result(TIMEOUT_S)
        results[name] = (info.offset, info.timestamp)
    assert results["earliest"][0] == 0
    assert results["latest"][0] == 10
    assert results["by time"] == (3, base + 3000)
    assert results["max timestamp"] == (9, base + 9000)


def test_idempotent_producer_retries_without_duplicates(
    bootstrap, admin, wait_for_topic, topic_name, leader_of, paused, retry_evidence
):
    """enable.idempotence=true, acks=all: requests time out while the leader is stopped
    (SIGSTOP), librdkafka retries them with the same sequence numbers, the resumed leader
    recognises the copies it already appended. Every record lands once, in order."""
    topic = topic_name()
    create_topic(admin, wait_for_topic, topic, 1)
    leader = leader_of(topic, 0)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "retries": 1000,
            "retry.backoff.ms": 100,
            "socket.timeout.ms": 1000,  # the client's own timeout for an in-flight request
            "linger.ms": 2,
            "batch.size": 2000,
            "max.in.flight.requests.per.connection": 5,
            "message.timeout.ms": 30_000,
        }
    )
    total = 3_000
    reports: dict[int, tuple] = {}

    def send(indexes):
        for i in indexes:
            producer.produce(
                topic,
                value=b"r%06d" % i,
                on_delivery=lambda err, msg, i=i: reports.__setitem__(i, (err, msg.offset())),
            )
            producer.poll(0)

    requests_before, _ = retry_evidence(leader, topic, 0)
    send(range(1_000))
    assert producer.flush(TIMEOUT_S) == 0
    with paused(leader):
        send(range(1_000, 2_000))
        producer.poll(2.5)  # > socket.timeout.ms: the in-flight requests time out
    send(range(2_000, total))
    assert producer.flush(TIMEOUT_S) == 0
    assert [reports[i][0] for i in range(total) if reports[i][0] is not None] == []
    assert [reports[i][1] for i in range(total)] == list(range(total))
    requests_after, batches = retry_evidence(leader, topic, 0)
    assert requests_after - requests_before > batches  # the leader did see a batch twice

    received = consume(bootstrap, topic, 1, total)
    assert [m.value() for m in received] == [b"r%06d" % i for i in range(total)]
    assert [m.offset() for m in received] == list(range(total))


def topic_resource(name, **kwargs):
    return ConfigResource(ResourceType.TOPIC, name, **kwargs)


def test_topic_admin(bootstrap, admin, wait_for_topic, wait_for_topic_gone, topic_name):
    topic = topic_name()
    create_topic(
        admin,
        wait_for_topic,
        topic,
        2,
        config={"retention.ms": "3600000", "segment.bytes": "1048576"},
    )
    assert topic in admin.list_topics(timeout=10).topics
    [future] = admin.describe_topics(TopicCollection([topic])).values()
    description = future.result(TIMEOUT_S)
    assert description.name == topic
    assert [p.id for p in description.partitions] == [0, 1]
    assert all(p.leader.id in (1, 2, 3) for p in description.partitions)

    [future] = admin.describe_configs([topic_resource(topic)]).values()
    entries = future.result(TIMEOUT_S)
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    change = topic_resource(
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    [future] = admin.incremental_alter_configs([change]).values()
    future.result(TIMEOUT_S)
    [future] = admin.describe_configs([topic_resource(topic)]).values()
    entries = future.result(TIMEOUT_S)
    assert entries["retention.ms"].value == "7200000"
    assert entries["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"

    # AlterConfigs replaces the whole set of overrides.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the API, not the feature
        [future] = admin.alter_configs(
            [topic_resource(topic, set_config={"retention.ms": "60000"})]
        ).values()
    future.result(TIMEOUT_S)
    [future] = admin.describe_configs([topic_resource(topic)]).values()
    entries = future.result(TIMEOUT_S)
    assert entries["retention.ms"].value == "60000"
    assert entries["cleanup.policy"].value == "delete"

    [future] = admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=10).values()
    future.result(TIMEOUT_S)
    wait_for_topic(topic, 4)

    produce(bootstrap, topic, [(b"k", b"%d" % i, []) for i in range(10)])
    partition = next(
        p
        for p in range(4)
        if admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()})[
            TopicPartition(topic, p)
        ]
        .result(TIMEOUT_S)
        .offset
        == 10
    )
    [future] = admin.delete_records([TopicPartition(topic, partition, 7)]).values()
    deleted = future.result(TIMEOUT_S)
    assert deleted.low_watermark == 7
    [future] = admin.list_offsets(
        {TopicPartition(topic, partition): OffsetSpec.earliest()}
    ).values()
    assert future.result(TIMEOUT_S).offset == 7
    received = consume(bootstrap, topic, 4, 3, start=-2)  # OFFSET_BEGINNING
    assert [(m.partition(), m.offset(), m.value()) for m in received] == [
        (partition, o, b"%d" % o) for o in range(7, 10)
    ]

    [future] = admin.delete_topics([topic], operation_timeout=10).values()
    future.result(TIMEOUT_S)
    wait_for_topic_gone(topic)
    assert topic not in admin.list_topics(timeout=10).topics
