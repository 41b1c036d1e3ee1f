"""format("odradek") writes rows byte for byte, refuses bad ones on the driver, and with
transactional=true writes each streamed row once across a retried writer and a driver kill -9."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import ClusterState
from odradek.spark.producing import (
    TaskIds,
    WriteError,
    last_committed_batch,
    marker_group,
    write_records,
    write_transactional,
)
from odradek.spark.write_options import write_options

pytestmark = [pytest.mark.spark, pytest.mark.integration]

CLIENT_TIMEOUT_S = 30
READ_TIMEOUT_S = 60
DRIVER_SCRIPT = Path(__file__).with_name("stream_write_driver.py")
DRIVER_TIMEOUT_S = 240
DRIVER_STOP_TIMEOUT_S = 20

Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=CLIENT_TIMEOUT_S)


def read_topic(
    bootstrap: str, topic: str, partitions: int, *, committed_only: bool = False
) -> dict[int, list[Record]]:
    """Every record of ``topic`` by partition, read to the high watermark (or the last stable
    offset with ``committed_only``), with a plain consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-write-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[int, list[Record]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: partitions {at_end} of {partitions} read"
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    continue
                raise AssertionError(message.error())
            at_end.discard(message.partition())
            headers = tuple(message.headers() or ())
            records[message.partition()].append((message.key(), message.value(), headers))
        return records
    finally:
        consumer.close()


def test_batch_write_round_trip(spark, spark_cluster: ClusterState, unique) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic, other = unique("out"), unique("other")
    create_topic(bootstrap, topic, 3)
    create_topic(bootstrap, other, 1)
    rows = []
    for i in range(300):
        key = None if i % 7 == 0 else f"k{i}".encode() + bytes([0, 255])
        value = None if i % 11 == 0 else bytes([i % 256]) * (i % 5) + b"\x00v"
        headers = None if i % 3 == 0 else [("h", f"{i}".encode()), ("n", None), ("h", b"")]
        to_other = i % 10 == 5  # a one-partition topic: the partitioner chooses
        partition = i % 3 if i % 2 == 0 and not to_other else None
        rows.append((other if to_other else topic, partition, key, value, headers))
    df = spark.createDataFrame(
        rows,
        "topic string, partition int, key binary, value binary, "
        "headers array<struct<key:string,value:binary>>",
    )
    df.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap).save()

    def expected_of(name: str) -> Counter:
        return Counter(
            (k, v, tuple((h[0], h[1]) for h in hs or ())) for t, _, k, v, hs in rows if t == name
        )

    written = read_topic(bootstrap, topic, 3)
    assert Counter(r for records in written.values() for r in records) == expected_of(topic)
    assert Counter(read_topic(bootstrap, other, 1)[0]) == expected_of(other)
    # An explicit partition is honoured; keyed rows without one follow Java's murmur2 hash.
    for t, partition, key, value, headers in rows:
        if t == topic and partition is not None:
            hs = tuple(headers or ())
            assert (key, value, hs) in written[partition]


def test_topic_option_overrides_the_column_and_strings_are_utf8(
    spark, spark_cluster: ClusterState, unique
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("out")
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame(
        [("nowhere", "ключ", "значение"), ("nowhere", None, "v")],
        "topic string, key string, value string",
    )
    (
        df.write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", "1")
        .save()
    )
    assert sorted(read_topic(bootstrap, topic, 1)[0], key=repr) == sorted(
        [("ключ".encode(), "значение".encode(), ()), (None, b"v", ())], key=repr
    )


@pytest.mark.parametrize(
    ("columns", "mode", "message"),
    [
        ("value, id AS offset", "append", "column 'offset' cannot be written"),
        ("value", "overwrite", "Save mode Overwrite not allowed for Kafka"),
    ],
)
def test_bad_writes_fail_on_the_driver_naming_the_cause(
    spark, spark_cluster: ClusterState, columns: str, mode: str, message: str
) -> None:
    """(Every other refused option and column: tests/unit/spark/test_write_options.py.)"""
    df = spark.range(3).selectExpr("id", "CAST(id AS STRING) AS value")
    writer = (
        df.selectExpr(*columns.split(", "))
        .write.format("odradek")
        .mode(mode)
        .option("kafka.bootstrap.servers", spark_cluster.bootstrap_servers)
        .option("topic", "t")
    )
    with pytest.raises(Exception, match=message) as raised:
        writer.save()
    assert "Task" not in str(raised.value).split("\n")[0]  # not a task failure: the driver's


def test_a_null_topic_fails_the_task(spark_cluster: ClusterState) -> None:
    options = write_options(
        {"kafka.bootstrap.servers": spark_cluster.bootstrap_servers},
        _spark_schema("topic string, value binary"),
        streaming=False,
    )
    batch = pa.record_batch(
        [pa.array([None], pa.string()), pa.array([b"v"], pa.binary())], names=["topic", "value"]
    )
    with pytest.raises(WriteError, match="null topic present in the data"):
        write_records(options.producer_config, iter([batch]), options.columns, None, 0)


def write_parquet_files(directory: Path, files: int, rows_per_file: int) -> list[int]:
    directory.mkdir(parents=True, exist_ok=True)
    ids = []
    for f in range(files):
        block = list(range(f * rows_per_file, (f + 1) * rows_per_file))
        table = pa.table({"id": pa.array(block, pa.int64())})
        pq.write_table(table, directory / f"part-{f:04d}.parquet")
        ids.extend(block)
    return ids


def values_of(records: dict[int, list[Record]]) -> Counter:
    return Counter(int(value) for rs in records.values() for _, value, _ in rs)


def test_streaming_write_at_least_once(
    spark, spark_cluster: ClusterState, unique, tmp_path
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("out")
    create_topic(bootstrap, topic, 2)
    ids = write_parquet_files(tmp_path / "in", files=2, rows_per_file=100)
    query = (
        spark.readStream.schema("id long")
        .parquet(str(tmp_path / "in"))
        .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DRIVER_TIMEOUT_S)
    assert query.exception() is None
    assert values_of(read_topic(bootstrap, topic, 2)) == Counter(ids)


def test_transactional_streaming_write_marks_each_batch(
    spark, spark_cluster: ClusterState, unique, tmp_path
) -> None:
    """The task-local query and batch ids reach the writers: each writer's marker group is named
    by the query's id and holds its last batch + 1."""
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("out")
    create_topic(bootstrap, topic, 2)
    ids = write_parquet_files(tmp_path / "in", files=3, rows_per_file=50)
    query = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in"))
        .repartition(2, "id")
        .selectExpr("CAST(id AS STRING) AS value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("transactional", "true")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DRIVER_TIMEOUT_S)
    assert query.exception() is None
    assert values_of(read_topic(bootstrap, topic, 2, committed_only=True)) == Counter(ids)
    config = {"bootstrap.servers": bootstrap}
    assert [last_committed_batch(config, marker_group(query.id, p)) for p in (0, 1)] == [2, 2]


def test_a_retried_writer_of_a_committed_batch_writes_nothing(
    spark_cluster: ClusterState, unique
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("out")
    create_topic(bootstrap, topic, 1)
    schema = pa.schema([("value", pa.binary())])
    options = write_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactional": "true"},
        _spark_schema("value binary"),
        streaming=True,
    )

    def attempt(batch_id: int, values: list[bytes]) -> object:
        batch = pa.record_batch([pa.array(values, pa.binary())], schema=schema)
        ids = TaskIds(query_id=query_id, batch_id=batch_id, partition_id=0)
        return write_transactional(
            options.producer_config, ids, iter([batch]), options.columns, options.topic
        )

    query_id = unique("query")
    first = attempt(0, [b"a", b"b"])
    retried = attempt(0, [b"a", b"b"])
    after = attempt(1, [b"c"])
    assert (first.rows, first.skipped) == (2, False)
    assert (retried.rows, retried.skipped) == (0, True)
    assert (after.rows, after.skipped) == (1, False)
    records = read_topic(bootstrap, topic, 1, committed_only=True)[0]
    assert [value for _, value, _ in records] == [b"a", b"b", b"c"]


def _spark_schema(ddl: str):
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(ddl)


def stop_group(process: subprocess.Popen) -> None:
    """SIGKILL the driver's process group (the driver and its JVM) and reap the driver."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(DRIVER_STOP_TIMEOUT_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # the JVM, if it outlived the driver


def run_driver(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(DRIVER_SCRIPT), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


@pytest.mark.crash
def load_driver():
    spec = importlib.util.spec_from_file_location("stream_write_driver", DRIVER_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transactional_stream_survives_a_killed_driver(
    spark, spark_cluster: ClusterState, unique, tmp_path
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("out")
    create_topic(bootstrap, topic, 3)
    ids = write_parquet_files(tmp_path / "in", files=4, rows_per_file=50)
    checkpoint = tmp_path / "checkpoint"
    log = tmp_path / "driver.log"
    args = [
        "--bootstrap-servers", bootstrap, "--topic", topic, "--input", str(tmp_path / "in"),
        "--checkpoint", str(checkpoint), "--rows-per-file", "50",
    ]  # fmt: skip
    started = time.monotonic()
    first = run_driver([*args, "--batch-delay-s", "0.5"], log)
    config = {"bootstrap.servers": bootstrap}
    try:
        deadline = time.monotonic() + DRIVER_TIMEOUT_S

        def wait_for(what: Callable[[], bool]) -> None:
            while not what():
                assert first.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.05)

        wait_for(lambda: committed_batches(checkpoint) >= 1)
        query_id = json.loads((checkpoint / "metadata").read_text())["id"]
        batch = committed_batches(checkpoint)
        # Kill once partition 0's writer committed the next batch: Spark has not (its other
        # writers are still sleeping), so the restart replays a half-committed batch.
        wait_for(lambda: last_committed_batch(config, marker_group(query_id, 0)) >= batch)
    finally:
        stop_group(first)
    assert committed_batches(checkpoint) == batch, "Spark committed the batch before the kill"
    killed_s = time.monotonic() - started
    # The restart runs in the shared session (a second driver JVM would cost its cold start):
    # the same query from the same checkpoint, as a new driver would run it.
    query = load_driver().start_query(
        spark,
        bootstrap_servers=bootstrap,
        topic=topic,
        input_dir=str(tmp_path / "in"),
        checkpoint=str(checkpoint),
        rows_per_file=50,
    )
    try:
        assert query.awaitTermination(DRIVER_TIMEOUT_S), "the restarted query did not finish"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    print(f"killed after {killed_s:.1f} s, restarted run {time.monotonic() - started:.1f} s")
    assert values_of(read_topic(bootstrap, topic, 3, committed_only=True)) == Counter(ids)
