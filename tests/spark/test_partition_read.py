"""An executor's read of one offset range, without Spark: batches stay within their row and byte
bounds, and a range that cannot reach its end fails in bounded time, naming the partition."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark.partition_read import (
    PartitionReadError,
    ReadSettings,
    consumer_config,
    read_range,
)
from odradek.spark.ranges import OffsetRange

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def topic(spark_cluster) -> str:
    """One partition of 100 records, values of 1000 bytes."""
    name = f"partition-read-{int(time.time() * 1000)}"
    bootstrap = spark_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])[name].result(
        TIMEOUT_S
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(100):
        producer.produce(name, value=bytes([i]) * 1000, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    return name


def _settings(spark_cluster, **kwargs) -> ReadSettings:
    client = {"bootstrap.servers": spark_cluster.bootstrap_servers, "group.id": "partition-read"}
    return ReadSettings(consumer=consumer_config(client), **kwargs)


def test_batches_are_bounded_in_rows_and_bytes(spark_cluster, topic) -> None:
    r = OffsetRange(topic, 0, 3, 97)
    by_rows = list(read_range(r, _settings(spark_cluster, max_rows=7)))
    assert all(b.num_rows <= 7 for b in by_rows)
    offsets = [o for b in by_rows for o in b.column("offset").to_pylist()]
    assert offsets == list(range(3, 97))
    # ~1 KB a row and 10 KB a batch: after the first batch, about 10 rows each.
    by_bytes = list(read_range(r, _settings(spark_cluster, max_bytes=10_000)))
    assert all(b.num_rows <= 10 for b in by_bytes[1:])
    assert sum(b.num_rows for b in by_bytes) == 94
    values = [v for b in by_bytes for v in b.column("value").to_pylist()]
    assert values == [bytes([i]) * 1000 for i in range(3, 97)]


def test_a_range_past_the_end_fails_in_bounded_time(spark_cluster, topic) -> None:
    r = OffsetRange(topic, 0, 95, 120)
    started = time.monotonic()
    rows = 0
    with pytest.raises(PartitionReadError, match=rf"partition {topic}-0: no progress for 1.5 s"):
        for batch in read_range(r, _settings(spark_cluster, poll_timeout_ms=1500)):
            rows += batch.num_rows
    assert rows == 5
    assert time.monotonic() - started < 10
