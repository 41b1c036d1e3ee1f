"""An executor's read of one offset range, without Spark: batches stay within their row and byte
bounds, a range past the partition's end fails (or with failOnDataLoss=false ends with what is
there) in bounded time naming the partition, and under read_committed a read planned up to the
last stable offset finishes while a transaction is open."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.common.partitions import TopicPartition
from odradek.spark.offsets import OffsetReader
from odradek.spark.partition_read import (
    DataLossError,
    ReadSettings,
    consumer_config,
    read_range,
)
from odradek.spark.ranges import OffsetRange, plan_ranges
from odradek.spark.read_options import Earliest, Latest

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


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_range_past_the_partitions_end(spark_cluster, topic, fail_on_data_loss) -> None:
    """As Spark's KafkaDataConsumer: after the poll timeout, failOnDataLoss=true fails naming the
    offsets that do not exist; false ends the range with the records there are."""
    r = OffsetRange(topic, 0, 95, 120)
    settings = _settings(spark_cluster, poll_timeout_ms=1500, fail_on_data_loss=fail_on_data_loss)
    started = time.monotonic()
    offsets: list[int] = []
    if fail_on_data_loss:
        with pytest.raises(
            DataLossError,
            match=rf"partition {topic}-0: offsets 100 to 119 of the range \[95, 120\) do not "
            r"exist: the partition ends at 100 .*failOnDataLoss",
        ):
            for batch in read_range(r, settings):
                offsets += batch.column("offset").to_pylist()
    else:
        for batch in read_range(r, settings):
            offsets += batch.column("offset").to_pylist()
    assert offsets == list(range(95, 100))
    assert time.monotonic() - started < 10


def test_read_committed_ends_at_the_last_stable_offset(spark_cluster, unique) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    name = unique("open-txn")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])[name].result(
        TIMEOUT_S
    )
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": name})
    txn.init_transactions(TIMEOUT_S)
    txn.begin_transaction()
    txn.produce(name, value=b"committed", partition=0)
    txn.commit_transaction(TIMEOUT_S)  # 0, its marker 1
    txn.begin_transaction()
    txn.produce(name, value=b"open", partition=0)  # 2, left open while reading
    assert txn.flush(TIMEOUT_S) == 0
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(name, value=b"after", partition=0)  # 3
    assert plain.flush(TIMEOUT_S) == 0
    try:
        read = {}
        for level in ("read_committed", "read_uncommitted"):
            client = {"bootstrap.servers": bootstrap, "group.id": "g", "isolation.level": level}
            with OffsetReader(client) as offsets:
                tps = [TopicPartition(name, 0)]
                ranges = plan_ranges(
                    offsets.resolve(Earliest(), tps, starting=True),
                    offsets.resolve(Latest(), tps, starting=False),
                )
            settings = ReadSettings(consumer=consumer_config(client), poll_timeout_ms=5000)
            read[level] = [
                (r.until_offset, v)
                for r in ranges
                for b in read_range(r, settings)
                for v in b.column("value").to_pylist()
            ]
        assert read == {
            "read_committed": [(2, b"committed")],
            "read_uncommitted": [(4, b"committed"), (4, b"open"), (4, b"after")],
        }
    finally:
        txn.abort_transaction(TIMEOUT_S)
