"""DescribeLogDirs answers kafka-python and every served version with each of the broker's two
log dirs, its partitions' sizes and its volume; an offline dir answers KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import asyncio

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic
from kio.static.primitive import i32

from odradek.broker.handlers.build import build
from odradek.client.connection import BrokerConnection
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey

pytestmark = pytest.mark.integration

RECORDS = 50


def produce(bootstrap: str, topic: str, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, max_block_ms=10_000)
    for n in range(RECORDS):
        producer.send(topic, value=b"value-%d" % n, partition=n % partitions)
    producer.flush(timeout=20)
    producer.close(timeout=5)


def test_kafka_python_sees_each_dir_with_its_partitions_and_sizes(broker):
    produce(broker.bootstrap, broker.topic, broker.partitions)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        [answer] = admin.describe_log_dirs()
        [filtered] = admin.describe_log_dirs({broker.topic: [1]})
    finally:
        admin.close()

    assert answer["broker"] == 1
    by_dir = {d["log_dir"]: d for d in answer["log_dirs"]}
    assert set(by_dir) == {str(d) for d in broker.log_manager.log_dirs}
    for log_dir, described in by_dir.items():
        assert described["error_code"] == 0
        assert described["total_bytes"] >= described["usable_bytes"] > 0
        for topic in described["topics"]:
            for p in topic["partitions"]:
                log = broker.log_manager.get_log(topic["name"], p["partition_index"])
                assert str(log.directory.parent) == log_dir
                assert p["partition_size"] == log.size_in_bytes > 0
                assert (p["offset_lag"], p["is_future_key"]) == (0, False)
    listed = sorted(
        p["partition_index"]
        for d in answer["log_dirs"]
        for t in d["topics"]
        for p in t["partitions"]
    )
    assert listed == list(range(broker.partitions))
    assert [
        (t["name"], p["partition_index"])
        for d in filtered["log_dirs"]
        for t in d["topics"]
        for p in t["partitions"]
    ] == [(broker.topic, 1)]


def describe(port: int, version: int, topics: object = None) -> object:
    request_type = schemas.request_schema(ApiKey.DESCRIBE_LOG_DIRS, version)

    async def send() -> object:
        async with await BrokerConnection.open("127.0.0.1", port) as connection:
            return await connection.send(build(request_type, topics=topics))

    return asyncio.run(send())


def test_every_version_answers_and_an_offline_dir_is_a_storage_error(broker):
    lowest, highest = SUPPORTED_VERSIONS[ApiKey.DESCRIBE_LOG_DIRS]
    offline = broker.log_manager.log_dirs[1]
    broker.log_manager._mark_offline(offline, "injected for the test")
    for version in range(lowest, highest + 1):
        response = describe(broker.port, version)
        results = {r.log_dir: r for r in response.results}
        assert results[str(offline)].error_code.value == 56  # KAFKA_STORAGE_ERROR
        assert results[str(offline)].topics == ()
        healthy = results[str(broker.log_manager.log_dirs[0])]
        assert healthy.error_code.value == 0
        on_healthy = {
            p
            for p in range(broker.partitions)
            if broker.log_manager.log_dir_of(broker.topic, p) == broker.log_manager.log_dirs[0]
        }
        assert {p.partition_index for t in healthy.topics for p in t.partitions} == on_healthy
        if version >= 4:
            assert healthy.total_bytes > 0 and results[str(offline)].total_bytes == -1
    absent = DescribableLogDirTopic(topic="absent", partitions=(i32(0),))
    response = describe(broker.port, highest, (absent,))
    assert all(r.topics == () for r in response.results)
