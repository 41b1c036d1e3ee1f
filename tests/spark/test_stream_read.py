"""Streaming reads: a killed driver resumes exactly once (mid-batch, and a new query killed in
its batch 0 resumes from the start it resolved then, not from a new "latest"); read_committed,
new partitions, data loss and read limits behave as Spark's Kafka source."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.errors import StreamingQueryException

from support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]

DRIVER = Path(__file__).with_name("stream_driver.py")
ADMIN_TIMEOUT_S = 30
QUERY_TIMEOUT_S = 60
DRIVER_START_TIMEOUT_S = 180
DRIVER_TIMEOUT_S = 180


@pytest.fixture
def admin(spark_cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": spark_cluster.bootstrap_servers})


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor=3)])
    futures[topic].result(ADMIN_TIMEOUT_S)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Each ``(partition, value)`` in order; waits for every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": "true"})
    # A producer knows the partitions of its first metadata: wait until it has them all.
    needed = max(partition for partition, _ in records) + 1
    wait_until(
        lambda: (
            len(producer.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics[topic].partitions)
            >= needed
        ),
        f"{topic} to have {needed} partitions",
        QUERY_TIMEOUT_S,
        poll_s=0.25,
    )
    errors: list[object] = []

    def delivered(error, _message) -> None:
        if error is not None:
            errors.append(error)

    for partition, value in records:
        producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
    assert producer.flush(ADMIN_TIMEOUT_S) == 0
    assert not errors, errors


def stream(spark, bootstrap: str, topic: str, **options: str):
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_available_now(frame, name: str, checkpoint: Path | None = None):
    """Runs ``frame`` to a memory table ``name`` with availableNow; returns the stopped query."""
    writer = frame.writeStream.format("memory").queryName(name).trigger(availableNow=True)
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    query = writer.start()
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow did not stop"
    finally:
        query.stop()
    return query


def rows(spark, name: str) -> list[tuple[int, int, bytes]]:
    return sorted(
        (r.partition, r.offset, bytes(r.value))
        for r in spark.sql(f"SELECT partition, offset, value FROM {name}").collect()
    )


def test_max_offsets_per_trigger_splits_an_available_now_run(spark, spark_cluster, admin, unique):
    topic = unique("topic")
    create_topic(admin, topic, 3)
    records = [(i % 3, f"v{i}".encode()) for i in range(120)]
    produce(spark_cluster.bootstrap_servers, topic, records)
    frame = stream(spark, spark_cluster.bootstrap_servers, topic, maxOffsetsPerTrigger="50")
    query = run_available_now(frame.select("partition", "offset", "value"), "limited")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [48, 48, 24]  # 16 of each partition's 40, in proportion
    got = rows(spark, "limited")
    expected = sorted(
        (p, i // 3, v) for i, (p, v) in enumerate(records)
    )  # offsets per partition count up from 0
    assert got == expected


def test_read_committed_hides_aborted_transactions(spark, spark_cluster, admin, unique):
    topic = unique("topic")
    create_topic(admin, topic, 1)
    producer = Producer(
        {"bootstrap.servers": spark_cluster.bootstrap_servers, "transactional.id": unique("txn")}
    )
    producer.init_transactions(ADMIN_TIMEOUT_S)
    for outcome in ("aborted", "committed", "aborted", "committed"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=f"{outcome}-{i}".encode(), partition=0)
        producer.flush(ADMIN_TIMEOUT_S)
        if outcome == "aborted":
            producer.abort_transaction(ADMIN_TIMEOUT_S)
        else:
            producer.commit_transaction(ADMIN_TIMEOUT_S)
    committed = stream(
        spark, spark_cluster.bootstrap_servers, topic, **{"kafka.isolation.level": "read_committed"}
    )
    run_available_now(committed.select("partition", "offset", "value"), "committed_only")
    values = [v for _, _, v in rows(spark, "committed_only")]
    assert values == [f"committed-{i}".encode() for i in range(5)] * 2
    uncommitted = stream(
        spark,
        spark_cluster.bootstrap_servers,
        topic,
        **{"kafka.isolation.level": "read_uncommitted"},
    )
    run_available_now(uncommitted.select("partition", "offset", "value"), "all_records")
    assert len(rows(spark, "all_records")) == 20


def test_a_partition_added_mid_stream_is_read(spark, spark_cluster, admin, unique, tmp_path):
    topic = unique("topic")
    create_topic(admin, topic, 2)
    produce(spark_cluster.bootstrap_servers, topic, [(p, b"before") for p in (0, 1)])
    frame = stream(spark, spark_cluster.bootstrap_servers, topic)
    query = (
        frame.select("partition", "offset", "value")
        .writeStream.format("memory")
        .queryName("grown")
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_until(
            lambda: len(rows(spark, "grown")) == 2,
            "the first records",
            QUERY_TIMEOUT_S,
            poll_s=0.25,
        )
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(ADMIN_TIMEOUT_S)
        produce(spark_cluster.bootstrap_servers, topic, [(2, b"new-0"), (2, b"new-1")])
        wait_until(
            lambda: len(rows(spark, "grown")) == 4,
            "the added partition's records",
            QUERY_TIMEOUT_S,
            poll_s=0.25,
        )
    finally:
        query.stop()
    assert rows(spark, "grown") == [
        (0, 0, b"before"),
        (1, 0, b"before"),
        (2, 0, b"new-0"),
        (2, 1, b"new-1"),
    ]


def test_a_topic_created_mid_stream_is_read_with_subscribe_pattern(
    spark, spark_cluster, admin, unique
):
    prefix = unique("family")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(admin, first, 1)
    produce(spark_cluster.bootstrap_servers, first, [(0, b"a-0")])
    frame = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", spark_cluster.bootstrap_servers)
        .option("subscribePattern", f"{prefix}-.*")
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        frame.select("topic", "offset", "value")
        .writeStream.format("memory")
        .queryName("family")
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def seen() -> list[tuple[str, int, bytes]]:
        return sorted(
            (r.topic, r.offset, bytes(r.value))
            for r in spark.sql("SELECT topic, offset, value FROM family").collect()
        )

    try:
        wait_until(
            lambda: len(seen()) == 1, "the first topic's record", QUERY_TIMEOUT_S, poll_s=0.25
        )
        create_topic(admin, second, 1)
        produce(spark_cluster.bootstrap_servers, second, [(0, b"b-0"), (0, b"b-1")])
        wait_until(
            lambda: len(seen()) == 3, "the new topic's records", QUERY_TIMEOUT_S, poll_s=0.25
        )
    finally:
        query.stop()
    assert seen() == [(first, 0, b"a-0"), (second, 0, b"b-0"), (second, 1, b"b-1")]


def delete_records_before(admin: AdminClient, topic: str, partition: int, offset: int) -> None:
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(ADMIN_TIMEOUT_S)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_deletion(
    spark, spark_cluster, admin, unique, tmp_path, fail_on_data_loss
):
    topic = unique("topic")
    create_topic(admin, topic, 1)
    bootstrap = spark_cluster.bootstrap_servers
    produce(bootstrap, topic, [(0, f"a{i}".encode()) for i in range(50)])
    checkpoint = tmp_path / "checkpoint"
    option = {"failOnDataLoss": str(fail_on_data_loss).lower()}

    def run():
        frame = stream(spark, bootstrap, topic, **option).select("partition", "offset", "value")
        query = (
            frame.writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow did not stop"
        except StreamingQueryException as error:
            return error
        finally:
            query.stop()
        return None

    assert run() is None
    produce(bootstrap, topic, [(0, f"b{i}".encode()) for i in range(50)])
    delete_records_before(admin, topic, 0, 80)  # 50..79 go unread
    error = run()
    if fail_on_data_loss:
        assert error is not None
        assert "offsets 50 to 79 were deleted" in str(error)
        assert "failOnDataLoss" in str(error)
    else:
        assert error is None
        got = sorted(
            (r.partition, r.offset) for r in spark.read.parquet(str(tmp_path / "out")).collect()
        )
        assert got == [(0, o) for o in [*range(50), *range(80, 100)]]


def driver_argv(bootstrap: str, topic: str, tmp_path: Path) -> list[str]:
    return [
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        topic,
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--output",
        str(tmp_path / "out"),
        "--max-offsets-per-trigger",
        "150",
        "--batch-delay-ms",
        "700",
    ]


def load_driver():
    spec = importlib.util.spec_from_file_location("stream_driver", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def driver_group() -> Iterator[list[subprocess.Popen]]:
    """Drivers started in process groups of their own; any still running is killed by group."""
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DRIVER_TIMEOUT_S)
        assert_group_gone(process.pid)


def assert_group_gone(pgid: int) -> None:

    def gone() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, f"process group {pgid} (the driver's JVM?) gone after SIGKILL", 10, poll_s=0.1)


def test_a_driver_killed_mid_batch_resumes_exactly_once(
    spark, spark_cluster, admin, unique, tmp_path, driver_group
):
    topic = unique("topic")
    create_topic(admin, topic, 3)
    records = [(i % 3, f"r{i}".encode()) for i in range(450)]
    produce(spark_cluster.bootstrap_servers, topic, records)
    started = time.monotonic()
    argv = driver_argv(spark_cluster.bootstrap_servers, topic, tmp_path)
    log = (tmp_path / "driver.log").open("wb")
    first = subprocess.Popen(
        [sys.executable, str(DRIVER), *argv], start_new_session=True, stdout=log, stderr=log
    )
    driver_group.append(first)
    # Kill once batch 0 is committed and batch 1 is planned but not committed: mid-batch.
    commits = tmp_path / "checkpoint" / "commits"
    offsets = tmp_path / "checkpoint" / "offsets"

    def batch_1_planned() -> bool:
        assert first.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        return (commits / "0").exists() and (offsets / "1").exists()

    wait_until(
        batch_1_planned, "the driver's first batch committed", DRIVER_START_TIMEOUT_S, poll_s=0.05
    )
    assert not (commits / "1").exists(), "batch 1 finished before the kill: raise the delay"
    print(f"PHASE killing at {time.monotonic() - started:.1f} s")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(DRIVER_TIMEOUT_S)
    assert_group_gone(first.pid)

    # The restart: the same query on the same checkpoint, in this session (a second driver
    # process would only add a JVM start).
    driver = load_driver()
    query = driver.start_query(spark, driver.parse_args(argv))
    try:
        assert query.awaitTermination(DRIVER_TIMEOUT_S), "the restarted query did not finish"
    finally:
        query.stop()
    print(f"PHASE restart done at {time.monotonic() - started:.1f} s")
    replayed = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
    assert replayed[0] == 1, f"the restart did not resume at batch 1: {replayed}"
    got = [
        (r.partition, r.offset, bytes(r.value))
        for r in spark.read.parquet(str(tmp_path / "out")).collect()
    ]
    expected = sorted((p, i // 3, v) for i, (p, v) in enumerate(records))
    assert len(got) == len(set(got)), "duplicated rows"
    assert sorted(got) == expected


def test_a_new_query_killed_in_batch_0_resumes_from_the_start_it_resolved(
    spark, spark_cluster, admin, unique, tmp_path, driver_group
):
    """startingOffsets=latest, kill -9 with offsets/0 journaled and commits/0 not: the restart
    must start from what the first run resolved (no false "offset went back", nothing skipped),
    as Spark's Kafka source does with ``sources/0/0``."""
    topic = unique("topic")
    create_topic(admin, topic, 2)
    bootstrap = spark_cluster.bootstrap_servers
    produce(bootstrap, topic, [(i % 2, f"before-{i}".encode()) for i in range(10)])
    argv = [
        *driver_argv(bootstrap, topic, tmp_path)[:8],  # no limit, no delay
        "--starting-offsets",
        "latest",
        "--sink",
        "foreach-batch",
    ]
    held = tmp_path / "in-batch-0"
    log = (tmp_path / "driver.log").open("wb")
    first = subprocess.Popen(
        [sys.executable, str(DRIVER), *argv, "--hold-batch-0", str(held)],
        start_new_session=True,
        stdout=log,
        stderr=log,
    )
    driver_group.append(first)

    def in_batch_0() -> bool:
        assert first.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        return held.exists()

    wait_until(in_batch_0, "the driver in batch 0", DRIVER_START_TIMEOUT_S, poll_s=0.05)
    checkpoint = tmp_path / "checkpoint"
    assert (checkpoint / "offsets" / "0").exists()
    assert not (checkpoint / "commits" / "0").exists()
    during = [(i % 2, f"during-{i}".encode()) for i in range(10)]
    produce(bootstrap, topic, during)  # after the start the first run resolved: to be read
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(DRIVER_TIMEOUT_S)
    assert_group_gone(first.pid)
    after = [(i % 2, f"after-{i}".encode()) for i in range(10)]
    produce(bootstrap, topic, after)  # "latest" is now past batch 0's journaled end

    driver = load_driver()
    query = driver.start_query(spark, driver.parse_args(argv))
    try:
        assert query.awaitTermination(DRIVER_TIMEOUT_S), "the restarted query did not finish"
    finally:
        query.stop()
    got = sorted(
        (r.partition, r.offset, bytes(r.value))
        for r in spark.read.parquet(str(tmp_path / "out")).collect()
    )
    expected = sorted(
        (p, 5 + i // 2, v) for i, (p, v) in enumerate([*during, *after])
    )  # each partition had 5 records before the start
    assert got == expected
