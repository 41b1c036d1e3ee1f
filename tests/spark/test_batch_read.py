"""Batch reads (``spark.read.format("odradek")``) return exactly what was produced, byte for byte,
under every read option of Spark's Kafka source, against a real 3-broker cluster."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer, TopicPartition
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
    # Sorted here, not with orderBy: a sort in Spark is one more stage (a shuffle) per query.
    for row in sorted(df.collect(), key=lambda row: (row.partition, row.offset)):
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


def _offsets(df) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for row in sorted(df.select("partition", "offset").collect()):
        out.setdefault(row.partition, []).append(row.offset)
    return out


def test_assign_with_offsets_per_partition(reader, produced) -> None:
    topic, _ = produced
    df = reader(
        assign=json.dumps({topic: [0, 2]}),
        startingOffsets=json.dumps({topic: {"0": 5, "2": -2}}),
        endingOffsets=json.dumps({topic: {"0": -1, "2": 17}}),
    )
    assert _offsets(df) == {0: list(range(5, 40)), 2: list(range(17))}


def test_subscribe_pattern_group_id_and_streaming_only_options(reader, produced) -> None:
    topic, _ = produced
    # A batch read accepts and ignores the streaming-only options, as Spark does.
    df = reader(
        subscribePattern=re.escape(topic[:-4]) + "[0-9]{4}|no-such-topic-.*",
        maxOffsetsPerTrigger="1",
        minOffsetsPerTrigger="1",
        maxTriggerDelay="1s",
        **{"kafka.group.id": "odradek-spark-tests"},
    )
    assert df.count() == 120
    assert reader(subscribe=topic, groupIdPrefix="mine").count() == 120


def test_timestamps_choose_offsets(reader, produced) -> None:
    topic, _ = produced
    # Timestamps win over offsets; a global time applies to every partition.
    df = reader(
        subscribe=topic,
        startingOffsets="earliest",
        startingTimestamp=str(BASE_TS_MS + 10_000),
        endingTimestamp=str(BASE_TS_MS + 19_500),
    )
    assert _offsets(df) == {p: list(range(10, 20)) for p in range(3)}
    df = reader(
        subscribe=topic,
        startingOffsetsByTimestamp=json.dumps(
            {topic: {"0": BASE_TS_MS + 1, "1": BASE_TS_MS, "2": BASE_TS_MS + 39_000}}
        ),
        endingOffsetsByTimestamp=json.dumps(
            {topic: {"0": BASE_TS_MS + 3_000, "1": BASE_TS_MS + 99_000, "2": BASE_TS_MS + 99_000}}
        ),
    )
    # No record at or after an ending time: the partition ends at latest.
    assert _offsets(df) == {0: [1, 2], 1: list(range(40)), 2: [39]}


def test_starting_timestamp_with_no_match(reader, produced) -> None:
    topic, _ = produced
    late = str(BASE_TS_MS + 99_000)
    with pytest.raises(Exception, match="startingTimestamp"):
        reader(subscribe=topic, startingTimestamp=late).count()
    df = reader(
        subscribe=topic, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest"
    )
    assert df.count() == 0


def test_min_partitions_and_max_records_split_reads(spark, reader, produced) -> None:
    _local_spark_time(spark)
    topic, records = produced
    # 3 partitions of 40 into about 7: each is cut in round(40 / 120 * 7) = 2, as Spark does.
    df = reader(subscribe=topic, minPartitions="7", includeHeaders="true")
    assert df.rdd.getNumPartitions() == 6
    assert _rows(df) == _expected(topic, records, 40)
    df = reader(subscribe=topic, maxRecordsPerPartition="15")
    assert df.rdd.getNumPartitions() == 9
    assert df.count() == 120


def test_read_committed_hides_aborted_transactions(reader, spark_cluster, unique) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("txn")
    _create(bootstrap, topic, 1)
    _produce(bootstrap, topic, [{"partition": 0, "value": b"p0"}])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"c1", partition=0)
    producer.produce(topic, value=b"c2", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"a1", partition=0)
    producer.produce(topic, value=b"a2", partition=0)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    # p0 0, c1 1, c2 2, commit 3, a1 4, a2 5, abort 6: the committed read ends past both markers.

    def values(**options: str) -> list[tuple[int, bytes]]:
        rows = reader(subscribe=topic, **options).collect()
        return sorted((r.offset, bytes(r.value)) for r in rows)

    committed = [(0, b"p0"), (1, b"c1"), (2, b"c2")]
    assert values(**{"kafka.isolation.level": "read_committed"}) == committed
    everything = [*committed, (4, b"a1"), (5, b"a2")]
    assert values() == everything  # Kafka's (and Spark's) default is read_uncommitted
    # A committed range that ends inside the aborted records still finishes.
    ends = json.dumps({topic: {"0": 5}})
    assert values(endingOffsets=ends, **{"kafka.isolation.level": "read_committed"}) == committed


def test_fail_on_data_loss(reader, spark_cluster, unique) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("loss")
    _create(bootstrap, topic, 1)
    _produce(bootstrap, topic, [{"partition": 0, "value": b"%d" % i} for i in range(20)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([TopicPartition(topic, 0, 5)])
    assert [f.result(TIMEOUT_S).low_watermark for f in deleted.values()] == [5]
    below = json.dumps({topic: {"0": 2}})
    with pytest.raises(Exception, match=rf"partition {topic}-0: offsets 2 to 4 .*failOnDataLoss"):
        reader(subscribe=topic, startingOffsets=below).count()
    df = reader(subscribe=topic, startingOffsets=below, failOnDataLoss="false")
    assert sorted(r.offset for r in df.collect()) == list(range(5, 20))
    assert reader(subscribe=topic).count() == 15  # earliest is the log start: no loss
    # endingOffsets past the partition's end (20): after pollTimeoutMs, as Spark's
    # KafkaDataConsumer, fail naming the offsets, or with failOnDataLoss=false read what is there.
    past = {"endingOffsets": json.dumps({topic: {"0": 30}}), "kafkaConsumer.pollTimeoutMs": "1500"}
    with pytest.raises(Exception, match=rf"partition {topic}-0: offsets 20 to 29 .*do not exist"):
        reader(subscribe=topic, **past).count()
    df = reader(subscribe=topic, failOnDataLoss="false", **past)
    assert sorted(r.offset for r in df.collect()) == list(range(5, 20))


def test_missing_topics_read_empty_and_log_append_time(reader, spark_cluster, unique) -> None:
    assert reader(subscribe=unique("none")).count() == 0
    topic, bootstrap = unique("append-time"), spark_cluster.bootstrap_servers
    _create(bootstrap, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    _produce(bootstrap, topic, [{"value": b"x", "timestamp": 1000}])
    (row,) = reader(subscribe=topic).collect()
    assert row.timestampType == 1  # LogAppendTime: the broker's clock, not the producer's
    assert row.timestamp > dt.datetime(2020, 1, 1)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"startingOffset": "earliest"}, "startingOffset"),
        ({"startingOffsets": "latest"}, "startingOffsets"),
        ({"endingOffsets": "earliest"}, "endingOffsets"),
        ({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
        ({"startingOffsets": '{"%s": {"0": 0}}'}, "startingOffsets"),
        ({"assign": '{"%s": [7]}', "subscribe": None}, "assign"),
    ],
)
def test_bad_options_name_the_option(reader, produced, options: dict, named: str) -> None:
    topic, _ = produced
    given = {"subscribe": topic}
    for k, v in options.items():
        if v is None:
            given.pop(k)
        else:
            given[k] = v.replace("%s", topic)
    # Spark hands a Python source its option names in lower case.
    with pytest.raises(Exception, match="(?i)" + re.escape(named)):
        reader(**given).count()
