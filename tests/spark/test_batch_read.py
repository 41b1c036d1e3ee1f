"""Batch reads (``spark.read.format("odradek")``) return exactly what was produced, byte for byte,
under every read option of Spark's Kafka source, against a real 3-broker cluster."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.spark, pytest.mark.integration]

BASE_TS_MS = 1_700_000_000_000
TIMEOUT_S = 30


def _create(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3, config=config)]
    )
    futures[topic].result(TIMEOUT_S)


def _produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for r in records:
        producer.produce(topic, **r)
    assert producer.flush(TIMEOUT_S) == 0


def _records(partitions: int, per_partition: int) -> list[dict]:
    """Keys, values, nulls and headers; timestamps BASE + i seconds, per partition."""
    out = []
    for p in range(partitions):
        for i in range(per_partition):
            r: dict = {
                "partition": p,
                "key": None if i % 7 == 3 else f"k{p}-{i}".encode(),
                "value": None if i % 11 == 5 else bytes([p, i % 256]) + b"\x00\xff" * (i % 4),
                "timestamp": BASE_TS_MS + i * 1000,
            }
            if i % 3 == 0:
                r["headers"] = [("h1", f"v{i}".encode()), ("h2", None), ("h1", b"")]
            out.append(r)
    return out


def _expected(topic: str, records: list[dict], per_partition: int) -> list[tuple]:
    rows = []
    for n, r in enumerate(records):
        rows.append(
            (
                r["key"],
                r["value"],
                topic,
                r["partition"],
                n % per_partition,
                dt.datetime.fromtimestamp(r["timestamp"] / 1000, dt.UTC).replace(tzinfo=None),
                0,
                r.get("headers"),
            )
        )
    return rows


def _rows(df, headers: bool = True) -> list[tuple]:
    out = []
    for row in df.orderBy("partition", "offset").collect():
        t = (
            None if row.key is None else bytes(row.key),
            None if row.value is None else bytes(row.value),
            row.topic,
            row.partition,
            row.offset,
            row.timestamp,
            row.timestampType,
        )
        if headers:
            h = row.headers
            t += (
                None
                if h is None
                else [(x.key, None if x.value is None else bytes(x.value)) for x in h],
            )
        out.append(t)
    return out


@pytest.fixture(scope="module")
def produced(spark_cluster) -> tuple[str, list[dict]]:
    """One topic of 3 partitions x 40 records shared by the read tests (read-only)."""
    topic = f"batch-read-{int(time.time() * 1000)}"
    _create(spark_cluster.bootstrap_servers, topic, 3)
    records = _records(3, 40)
    _produce(spark_cluster.bootstrap_servers, topic, records)
    return topic, records


@pytest.fixture
def reader(spark, spark_cluster) -> Callable:
    def make(**options: str):
        r = spark.read.format("odradek").option(
            "kafka.bootstrap.servers", spark_cluster.bootstrap_servers
        )
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    return make


def _local_spark_time(spark) -> None:
    # Spark shows TimestampType in the session time zone; compare in UTC.
    spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_reads_everything_byte_for_byte(spark, reader, produced) -> None:
    _local_spark_time(spark)
    topic, records = produced
    df = reader(subscribe=topic, includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert _rows(df) == _expected(topic, records, 40)
    # Without headers the column is absent; options are case-insensitive.
    plain = reader(SUBSCRIBE=topic, StartingOffsets="earliest", endingoffsets="latest")
    assert "headers" not in plain.columns
    assert plain.count() == 120
