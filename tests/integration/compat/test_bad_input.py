"""Bad input from real clients gets Kafka's error codes, promptly, and leaves the logs untouched;
a producer to a missing topic gets it auto-created, as from Kafka with its defaults."""

from __future__ import annotations

import asyncio
import struct
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kio.schema.produce.v9 import request as produce_v9

from odradek.client.connection import BrokerConnection
from odradek.storage.batch import CRC_OFFSET, HEADER_SIZE, HEADER_STRUCT, compute_crc
from support.consuming import poll_messages

pytestmark = pytest.mark.integration

TIMEOUT_S = 20


@pytest.fixture
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin, topic, partitions=1, replication_factor=1, config=None, validate_only=False):
    [future] = admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=partitions,
                replication_factor=replication_factor,
                config=config or {},
            )
        ],
        operation_timeout=10,
        validate_only=validate_only,
    ).values()
    return future.result(TIMEOUT_S)


def latest(admin, topic, partition=0) -> int:
    [future] = admin.list_offsets({TopicPartition(topic, partition): OffsetSpec.latest()}).values()
    return future.result(TIMEOUT_S).offset


def deliver(producer, topic, value, **kwargs):
    """Produce one record and flush (bounded): its delivery error, or None."""
    reports = []
    producer.produce(topic, value=value, on_delivery=lambda err, msg: reports.append(err), **kwargs)
    assert producer.flush(TIMEOUT_S) == 0, "no delivery report: the client is stuck"
    [error] = reports
    return error


# -- produce to a topic that does not exist (Produce never creates it; Metadata does) ---------


def test_unknown_topic_on_the_wire(cluster_state, kafka_batch):
    """Every broker answers a Produce for an unknown topic with UNKNOWN_TOPIC_OR_PARTITION."""
    request = produce_v9.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=5),
        topic_data=(
            produce_v9.TopicProduceData(
                name="no-such-topic",
                partition_data=(
                    produce_v9.PartitionProduceData(index=0, records=kafka_batch([(b"k", b"v")])),
                ),
            ),
        ),
    )

    async def ask(address):
        host, port = address.rsplit(":", 1)
        async with await BrokerConnection.open(host, int(port), connect_timeout_s=5) as conn:
            return await conn.send(request, timeout_s=10)

    for member in cluster_state.members:
        if member.role == "broker":
            response = asyncio.run(ask(member.address))
            [topic] = response.responses
            [partition] = topic.partition_responses
            assert partition.error_code.value == 3, (
                member.id,
                partition,
            )  # UNKNOWN_TOPIC_OR_PARTITION
            assert partition.base_offset == -1


def test_a_producer_to_a_missing_topic_has_it_auto_created_confluent_kafka(
    bootstrap, topic_name, admin
):
    """auto.create.topics.enable is Kafka's default (true): the producer's Metadata creates it."""
    topic = topic_name()
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30_000})
    assert deliver(producer, topic, b"kept") is None
    assert topic in admin.list_topics(timeout=10).topics


def test_a_producer_to_a_missing_topic_has_it_auto_created_kafka_python(bootstrap, topic_name):
    from kafka import KafkaProducer

    topic = topic_name()
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=20_000)
    try:
        assert producer.send(topic, value=b"kept").get(timeout=TIMEOUT_S).offset == 0
    finally:
        producer.close(timeout=5)


def test_a_producer_to_a_missing_topic_has_it_auto_created_aiokafka(bootstrap, topic_name):
    from aiokafka import AIOKafkaProducer

    topic = topic_name()

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        await producer.start()
        try:
            return await producer.send_and_wait(topic, b"kept")
        finally:
            await producer.stop()

    assert asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S)).offset == 0


# -- a record larger than max.message.bytes ---------------------------------------------------


def test_record_beyond_max_message_bytes_confluent_kafka(
    bootstrap, admin, wait_for_topic, topic_name
):
    topic = topic_name()
    create(admin, topic, config={"max.message.bytes": "10000"})
    wait_for_topic(topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.max.bytes": 2_000_000,  # so the client sends what the broker must refuse
            "compression.type": "none",
            "message.timeout.ms": 10_000,
        }
    )
    error = deliver(producer, topic, b"x" * 50_000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    assert not error.retriable()
    assert latest(admin, topic) == 0  # the log was not touched
    # The topic still takes records that fit, from offset 0.
    assert deliver(producer, topic, b"y" * 5_000) is None
    assert latest(admin, topic) == 1


def test_record_beyond_the_broker_default_confluent_kafka(
    bootstrap, admin, wait_for_topic, topic_name
):
    """No override: the broker's message.max.bytes (1 MiB + 12, Kafka's default) applies."""
    topic = topic_name()
    create(admin, topic)
    wait_for_topic(topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.max.bytes": 5_000_000,
            "compression.type": "none",
            "message.timeout.ms": 10_000,
        }
    )
    error = deliver(producer, topic, b"x" * 1_100_000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    assert latest(admin, topic) == 0


def test_record_beyond_max_message_bytes_kafka_python(bootstrap, admin, wait_for_topic, topic_name):
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    topic = topic_name()
    create(admin, topic, config={"max.message.bytes": "10000"})
    wait_for_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=2_000_000)
    try:
        with pytest.raises(MessageSizeTooLargeError, match="max.message.bytes"):
            producer.send(topic, value=b"x" * 50_000).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    # kafka-python 3.0.12's idempotent producer turns any non-retriable batch error into a fatal
    # state (TransactionManager.classify_batch_error), so a fresh producer checks the log.
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        assert producer.send(topic, value=b"y" * 5_000).get(timeout=TIMEOUT_S).offset == 0
    finally:
        producer.close(timeout=5)


# -- topics with bad configs or bad shapes -----------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"retention.ms": "soon"}, "Not a number of type LONG"),
        ({"segment.bytes": "5"}, "Value must be at least"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"retention.msec": "1"}, "Unknown topic config name: retention.msec"),
    ],
    ids=["not-a-number", "out-of-range", "not-a-choice", "unknown-name"],
)
def test_create_topic_with_a_bad_config(admin, topic_name, config, message):
    topic = topic_name()
    for validate_only in (True, False):
        with pytest.raises(KafkaException) as refused:
            create(admin, topic, config=config, validate_only=validate_only)
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG, error
        assert message in error.str()
    assert topic not in admin.list_topics(timeout=10).topics


def test_create_topic_with_a_bad_config_kafka_python(bootstrap, topic_name):
    from kafka import KafkaAdminClient
    from kafka.errors import InvalidConfigurationError

    topic = topic_name()
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        with pytest.raises(InvalidConfigurationError):
            client.create_topics(
                {
                    topic: {
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": {"flush.ms": "-3"},
                    }
                }
            )
        assert topic not in client.list_topics()
    finally:
        client.close()


def test_alter_a_topic_to_a_bad_config(admin, wait_for_topic, topic_name):
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic = topic_name()
    create(admin, topic, config={"retention.ms": "3600000"})
    wait_for_topic(topic, 1)
    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "forever", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = admin.incremental_alter_configs([bad]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(TIMEOUT_S)
    # Kafka answers a bad value in (Incremental)AlterConfigs with INVALID_REQUEST.
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Not a number of type LONG" in refused.value.args[0].str()
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert future.result(TIMEOUT_S)["retention.ms"].value == "3600000"


@pytest.mark.parametrize(
    ("name", "partitions", "replication_factor", "code"),
    [
        ("bad/name", 1, 1, KafkaError.TOPIC_EXCEPTION),
        (None, 1, 4, KafkaError.INVALID_REPLICATION_FACTOR),  # 4 replicas, 3 brokers
        (None, 0, 1, KafkaError.INVALID_PARTITIONS),
    ],
    ids=["illegal-name", "too-many-replicas", "zero-partitions"],
)
def test_create_topic_with_a_bad_shape(
    admin, topic_name, name, partitions, replication_factor, code
):
    topic = name or topic_name()
    with pytest.raises(KafkaException) as refused:
        create(admin, topic, partitions=partitions, replication_factor=replication_factor)
    assert refused.value.args[0].code() == code, refused.value.args[0]
    assert topic not in admin.list_topics(timeout=10).topics


# -- a batch whose header lies about its records (issue 6) ----------------------------------------

INVALID_RECORD, CORRUPT_MESSAGE = 87, 2


def lying_count_batch() -> bytes:
    """A header-only batch with a valid CRC that claims 2^31-1 records (and holds none)."""
    batch = bytearray(HEADER_SIZE)
    count = (1 << 31) - 1
    HEADER_STRUCT.pack_into(
        batch, 0, 0, HEADER_SIZE - 12, -1, 2, 0, 0, count - 1, 0, 0, -1, -1, -1, count
    )
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)


def test_a_batch_that_lies_about_its_record_count_is_refused_untouched(
    admin, bootstrap, wait_for_topic, topic_name, leader_of
):
    topic = topic_name()
    create(admin, topic)
    wait_for_topic(topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    assert deliver(producer, topic, b"before") is None
    assert latest(admin, topic) == 1
    request = produce_v9.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=5),
        topic_data=(
            produce_v9.TopicProduceData(
                name=topic,
                partition_data=(
                    produce_v9.PartitionProduceData(index=0, records=lying_count_batch()),
                ),
            ),
        ),
    )
    host, port = leader_of(topic, 0).address.rsplit(":", 1)

    async def send_lies(times: int):
        async with await BrokerConnection.open(host, int(port), connect_timeout_s=5) as conn:
            return [await conn.send(request, timeout_s=10) for _ in range(times)]

    for response in asyncio.run(send_lies(5)):
        [answer] = response.responses
        [partition] = answer.partition_responses
        assert partition.error_code.value in (INVALID_RECORD, CORRUPT_MESSAGE), partition
        assert partition.base_offset == -1
    assert latest(admin, topic) == 1  # the log end offset did not jump by 2^31

    # A real client still produces and consumes, from where the log was.
    assert deliver(producer, topic, b"after") is None
    assert latest(admin, topic) == 2
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-assign-only",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = poll_messages(consumer, 2, TIMEOUT_S, raise_errors=True)
        received = [(m.offset(), m.value()) for m in read]
        assert received == [(0, b"before"), (1, b"after")]
    finally:
        consumer.close()
