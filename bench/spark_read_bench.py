"""Spark batch read of a topic against a plain confluent-kafka consumer, in the same run.

The cluster (``odradek.local.cluster.up``): ZooKeeper, a controller and 3 brokers on 127.0.0.1,
data under ``var/`` (removed at the end). One topic of ``--partitions`` (6) partitions with
``--replication-factor`` (1: reading does not depend on it, and filling 3 copies of 1 GiB on two
cores would take minutes) is filled with ``--gib`` (1) GiB of ``--value-size`` (1024) byte values,
keys ``key-0`` .. ``key-999``, no compression (values are slices of a random block: Parquet
cannot shrink them away). Then, one after the other on the same topic:

- **plain consumer**: one confluent-kafka consumer ``assign()``s every partition from the
  beginning and reads to the end (``queued.min.messages`` high and ``fetch.queue.backoff.ms`` 0,
  so librdkafka does not pause fetching: docs/benchmarks.md, issue 3), touching every value;
- **Spark count**: a ``local[2]`` session, ``spark.read.format("odradek")`` over the topic,
  ``count()``, ``--rounds`` (2) times (the first one starts the Python workers);
- **Spark to Parquet**: the same DataFrame written with ``df.write.parquet`` (snappy), as many
  times (the first one loads and warms Parquet's writer), each a new read of the topic;
- **the source alone** (a diagnosis, not a target): the executor side of the source
  (``odradek.spark.partition_read.read_range``) over the same ranges Spark reads, in 2 processes
  and no Spark: what Spark adds is the difference to the count. ``--profile`` also prints
  cProfile's top functions of one range read in this process.

Rates are records/s and MB/s of key + value bytes over the wall time of each step (Spark's
session start is reported apart, not counted). The target of issue 12: Spark's best count at
50 % or more of the plain consumer's records/s.

Usage: ``.venv/bin/python bench/spark_read_bench.py [--gib 1] [--value-size 1024] [--partitions
6] [--rounds 2] [--min-partitions N] [--no-spark] [--profile]`` (``make bench-spark``). Every
process started is stopped by pid at the end, on error too (the Spark JVM by its PID); every wait
is bounded.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.common.partitions import TopicPartition as SparkTopicPartition
from odradek.local import cluster
from odradek.spark.offsets import OffsetReader

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
from cluster_bench import run_header, wait_for_leaders  # noqa: E402

TOPIC = "bench-spark"
KEYS = 1000
WAIT_S = 120.0
READ_TIMEOUT_S = 1800.0
SPARK_STOP_TIMEOUT_S = 30.0
RANDOM_BLOCK_BYTES = 1 << 20


def create_topic(bootstrap: str, partitions: int, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, partitions, replication_factor)
    admin.create_topics([topic])[TOPIC].result(timeout=30)
    wait_for_leaders(admin, TOPIC, partitions, WAIT_S)


def fill(bootstrap: str, records: int, value_size: int) -> int:
    """Produce ``records`` records round-robin over the partitions; returns key + value bytes."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    block = os.urandom(RANDOM_BLOCK_BYTES + value_size)
    failures: list[object] = []
    total_bytes = 0
    started = time.monotonic()
    for i in range(records):
        key = b"key-%d" % (i % KEYS)
        start = (i * 7919) % RANDOM_BLOCK_BYTES
        value = block[start : start + value_size]
        total_bytes += len(key) + len(value)
        while True:
            try:
                producer.produce(
                    TOPIC, value, key, on_delivery=lambda err, _: err and failures.append(err)
                )
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(WAIT_S) != 0 or failures:
        raise RuntimeError(f"fill: records left unacknowledged or failed ({failures[:3]})")
    elapsed = time.monotonic() - started
    print(
        f"filled {TOPIC}: {records:,} records, {total_bytes / 2**30:.2f} GiB in {elapsed:.1f} s "
        f"({records / elapsed:,.0f} records/s)",
        flush=True,
    )
    return total_bytes


def end_offsets(bootstrap: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark, through the data source's own offset lookups."""
    with OffsetReader({"bootstrap.servers": bootstrap}) as reader:
        latest = reader.latest(SparkTopicPartition(TOPIC, p) for p in range(partitions))
    return {tp.partition: offset for tp, offset in latest.items()}


def plain_consumer(bootstrap: str, ends: dict[int, int]) -> tuple[int, int, float]:
    """Read every partition from the beginning to ``ends``: (records, bytes, seconds)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-spark-plain",
            "enable.auto.commit": False,
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 0,
        }
    )
    expected = sum(ends.values())
    records = total_bytes = 0
    remaining = {p for p, end in ends.items() if end > 0}
    started = time.monotonic()
    deadline = started + READ_TIMEOUT_S
    try:
        consumer.assign(
            [TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in remaining]
        )
        while remaining and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is not None:
                    continue
                records += 1
                total_bytes += len(message.key()) + len(message.value())
                if message.offset() + 1 >= ends[message.partition()]:
                    remaining.discard(message.partition())
    finally:
        consumer.close()
    elapsed = time.monotonic() - started
    if records != expected:
        raise RuntimeError(f"plain consumer read {records} of {expected} records")
    return records, total_bytes, elapsed


def rate(records: int, total_bytes: int, seconds: float) -> str:
    return (
        f"{records / seconds:12,.0f} records/s {total_bytes / seconds / 1e6:8.1f} MB/s "
        f"({seconds:6.1f} s)"
    )


def spark_steps(
    bootstrap: str, records: int, total_bytes: int, work: Path, args: argparse.Namespace
) -> tuple[float, float]:
    """Session start, ``--rounds`` counts and Parquet writes; returns the best of each (s)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers: this venv, not PATH's
    from pyspark.sql import SparkSession

    import odradek.spark

    started = time.monotonic()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-read-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )
    gateway = spark.sparkContext._gateway  # the JVM py4j started for this session
    try:
        spark.sparkContext.setLogLevel("WARN")
        odradek.spark.register(spark)
        print(f"spark session (local[2]) started in {time.monotonic() - started:.1f} s")
        df = spark.read.format("odradek").options(**source_options(bootstrap, args)).load()
        counts = []
        for round_ in range(1, args.rounds + 1):
            started = time.monotonic()
            counted = df.count()
            elapsed = time.monotonic() - started
            if counted != records:
                raise RuntimeError(f"Spark counted {counted} of {records} records")
            counts.append(elapsed)
            print(f"  {f'spark count(), round {round_}':<27}{rate(records, total_bytes, elapsed)}")
        output = work / "parquet"
        writes = []
        for round_ in range(1, args.rounds + 1):
            started = time.monotonic()
            df.write.mode("overwrite").parquet(str(output))
            elapsed = time.monotonic() - started
            writes.append(elapsed)
            size = sum(f.stat().st_size for f in output.rglob("*.parquet"))
            print(
                f"  {f'spark Parquet, round {round_}':<27}{rate(records, total_bytes, elapsed)}, "
                f"{size / 2**30:.2f} GiB of Parquet"
            )
        return min(counts), min(writes)
    finally:
        spark.stop()
        proc = gateway.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(SPARK_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(SPARK_STOP_TIMEOUT_S)


def source_options(bootstrap: str, args: argparse.Namespace) -> dict[str, str]:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": TOPIC,
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
    }
    if args.min_partitions:
        options["minPartitions"] = str(args.min_partitions)
    return options


def _read_one(offset_range, settings) -> tuple[int, float]:
    from odradek.spark.partition_read import read_range

    started = time.monotonic()
    rows = sum(batch.num_rows for batch in read_range(offset_range, settings))
    return rows, time.monotonic() - started


def source_alone(bootstrap: str, records: int, total_bytes: int, args: argparse.Namespace) -> None:
    """The source's executor code over Spark's ranges in 2 spawned processes, no Spark."""
    from odradek.spark.batch_read import plan_batch
    from odradek.spark.partition_read import ReadSettings
    from odradek.spark.read_options import parse_read_options

    options = parse_read_options(source_options(bootstrap, args), streaming=False)
    ranges = plan_batch(options)
    settings = ReadSettings.from_options(options)
    # spawn: fresh interpreters, as Spark's workers (fork after librdkafka's threads is unsafe).
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.starmap(_read_one, [(ranges[0], settings)])  # start both workers' imports first
        pool.starmap(_read_one, [(ranges[0], settings)] * 2)
        started = time.monotonic()
        results = pool.starmap(_read_one, [(r, settings) for r in ranges])
        elapsed = time.monotonic() - started
    if sum(rows for rows, _ in results) != records:
        raise RuntimeError(f"the source alone read {sum(r for r, _ in results)} of {records}")
    per_task = ", ".join(f"{seconds:.1f}" for _, seconds in results)
    label = "source alone, 2 processes"
    print(f"  {label:<27}{rate(records, total_bytes, elapsed)}; tasks {per_task} s")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        rows, seconds = _read_one(ranges[0], settings)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
        print(f"\nprofile of one range ({rows:,} rows, {seconds:.1f} s), by own time:")
        print("\n".join(out.getvalue().splitlines()[:40]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="topic size (default 1 GiB)")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="Spark count() rounds")
    parser.add_argument("--min-partitions", type=int, default=None, help="Spark minPartitions")
    parser.add_argument("--no-spark", action="store_true", help="the plain consumer only")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one range read by the source alone"
    )
    args = parser.parse_args()
    records = int(args.gib * 2**30) // args.value_size

    (REPO_ROOT / "var").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="spark-bench-", dir=REPO_ROOT / "var"))
    data_dir = work / "cluster"
    print(run_header(), flush=True)
    try:
        state, _ = cluster.up(data_dir, brokers=3)
        bootstrap = state.bootstrap_servers
        create_topic(bootstrap, args.partitions, args.replication_factor)
        fill(bootstrap, records, args.value_size)
        ends = end_offsets(bootstrap, args.partitions)
        records = sum(ends.values())
        print(
            f"\nreading {records:,} records of {args.value_size} B from {args.partitions} "
            f"partitions (3 brokers, replication factor {args.replication_factor}):",
            flush=True,
        )
        plain_records, total_bytes, plain_s = plain_consumer(bootstrap, ends)
        print(f"  {'plain confluent-kafka':<27}{rate(plain_records, total_bytes, plain_s)}")
        if not args.no_spark:
            count_s, parquet_s = spark_steps(bootstrap, records, total_bytes, work, args)
            source_alone(bootstrap, records, total_bytes, args)
            print(
                f"\nspark count (best) / plain consumer: {plain_s / count_s:.2f}, "
                f"spark to Parquet (best) / plain consumer: {plain_s / parquet_s:.2f} "
                "(target 0.50 or more)"
            )
    finally:
        cluster.down(data_dir)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
