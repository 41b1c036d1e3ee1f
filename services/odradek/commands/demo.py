"""``odradek demo``: the README's main job: a local cluster, a topic, a stream in and out.

It brings up (or finds running) the loopback cluster of ``odradek local up``, creates a topic
spread over every broker and replicated on the cluster's default (3 replicas, with
``min.insync.replicas`` 2), produces a sample stream with confluent-kafka (librdkafka, the client
most Kafka users run) with ``acks=all`` (a record is acknowledged once every in-sync replica has
it), consumes it back with a consumer group of three members sharing the partitions and
committing their offsets, checks every record arrived, and prints what it measured. Last, the
batch Spark job ``spark/batch_key_stats.py`` reads the records this run produced (per-partition
starting offsets) with a local Spark session and writes per-key, per-hour statistics to Parquet
under the data directory, printing the busiest rows. Spark runs in a child process (its own
process group, stopped by PID on a timeout): this module never imports pyspark, an optional
dependency (``odradek[spark]``); without it, or outside a source checkout, the step is skipped
with a note (``--no-spark`` skips it too). The cluster keeps running afterwards for a look
around; ``odradek local down`` stops it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

from odradek.commands.invocation import odradek_command
from odradek.local import cluster

TOPIC = "demo-events"
PARTITIONS = 6
GROUP_MEMBERS = 3
WAIT_S = 30.0
# The batch job lives in the source tree's spark/ (with the other jobs), not in the package.
SPARK_JOB = Path(__file__).resolve().parents[3] / "spark" / "batch_key_stats.py"
# C1 only and the serial collector: for a job of seconds, compiling less and collecting with one
# thread is faster than the JVM's server defaults (measured: session start 14 s -> 6 s, the first
# query 13 s -> 6 s, on 2 cores).
QUICK_START_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPARK_JOB_TIMEOUT_S = 600.0
SPARK_STOP_TIMEOUT_S = 30.0
SPARK_SHOW_ROWS = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="bring up a local cluster, produce and consume a sample stream"
    )
    parser.add_argument("--data-dir", type=Path, default=Path("var/local"))
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=512)
    parser.add_argument(
        "--no-spark", action="store_true", help="skip the Spark batch job at the end"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    started = time.monotonic()
    state, fresh = cluster.up(args.data_dir, brokers=args.brokers)
    verb = "started" if fresh else "found running"
    say(
        f"cluster {verb} in {time.monotonic() - started:.1f} s: bootstrap {state.bootstrap_servers}"
    )
    for member in state.members:
        where = member.address or member.admin or ""
        say(f"  {member.role:<10} {member.id:>5}  pid {member.pid:<7} {where}")
    try:
        create_topic(state.bootstrap_servers)
        starting_offsets = end_offsets(state.bootstrap_servers)
        produced, checksum = produce(state.bootstrap_servers, args.records, args.record_size)
        consumed, consumed_checksum = consume(state.bootstrap_servers, produced)
    except (KafkaException, TimeoutError) as e:
        say(f"failed: {e}")
        return 1
    if (consumed, consumed_checksum) != (produced, checksum):
        say(f"MISMATCH: produced {produced} records, consumed {consumed}")
        return 1
    say(f"every record came back: {consumed} records, content checksum {checksum:#010x}")
    if not args.no_spark and not run_spark_job(
        state.bootstrap_servers, starting_offsets, Path(args.data_dir)
    ):
        return 1
    odradek = odradek_command()
    say(
        f"the cluster keeps running: try `{odradek} local status`, `kcat -b "
        f"{state.bootstrap_servers.split(',')[0]} -L`; stop it with `{odradek} local down`"
    )
    return 0


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics.get(TOPIC)
    if existing is not None and existing.partitions:
        replicas = min(len(p.replicas) for p in existing.partitions.values())
        if replicas < int(min_insync_replicas(admin)):
            # Left by an older demo with fewer replicas: acks=all could never succeed on it.
            say(
                f"topic {TOPIC} has {replicas} replicas, fewer than min.insync.replicas: "
                "recreating it"
            )
            admin.delete_topics([TOPIC])[TOPIC].result(timeout=10)
            _wait_until_gone(admin)
    if TOPIC not in admin.list_topics(timeout=10).topics:
        # No replication factor given: the brokers' default.replication.factor applies.
        future = admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC]
        future.result(timeout=10)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == PARTITIONS
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            leaders = sorted({p.leader for p in topic.partitions.values()})
            replicas = max(len(p.replicas) for p in topic.partitions.values())
            say(
                f"topic {TOPIC}: {PARTITIONS} partitions led by brokers {leaders}, "
                f"{replicas} replicas each, min.insync.replicas {min_insync_replicas(admin)}"
            )
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {TOPIC} has no leaders after {WAIT_S} s")


def _wait_until_gone(admin) -> None:
    deadline = time.monotonic() + WAIT_S
    while TOPIC in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {TOPIC} still exists {WAIT_S} s after its deletion")
        time.sleep(0.2)


def min_insync_replicas(admin) -> str:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return configs["min.insync.replicas"].value


def produce(bootstrap: str, count: int, size: int) -> tuple[int, int]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    failures = []
    filler = bytes(range(256)) * (size // 256 + 1)
    checksum = 0
    started = time.monotonic()
    for i in range(count):
        value = (b"%d:" % i + filler)[:size]
        checksum ^= zlib.crc32(value)
        while True:
            try:
                producer.produce(
                    TOPIC,
                    key=b"key-%d" % (i % 1000),
                    value=value,
                    on_delivery=lambda err, msg: err and failures.append(err),
                )
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(WAIT_S)
    elapsed = time.monotonic() - started
    if remaining or failures:
        raise TimeoutError(f"{remaining} records undelivered, {len(failures)} failed")
    say(
        f"produced {count} records of {size} B (acks=all: each acknowledged once every "
        f"in-sync replica had it; lz4) in {elapsed:.2f} s: "
        f"{count / elapsed:,.0f} records/s, {count * size / elapsed / 1e6:.1f} MB/s"
    )
    return count, checksum


def consume(bootstrap: str, expected: int) -> tuple[int, int]:
    """Read the stream back with a consumer group of ``GROUP_MEMBERS`` members sharing the
    partitions (a new group each run, so it starts from the beginning), committing what each
    member processed; prints who held what and what the group committed."""
    from confluent_kafka import Consumer

    group = f"odradek-demo-{int(time.time())}"
    members = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        for _ in range(GROUP_MEMBERS)
    ]
    for member in members:
        member.subscribe([TOPIC])
    seen: set[int] = set()
    checksum = 0
    total_bytes = 0
    started = time.monotonic()
    deadline = started + WAIT_S
    while len(seen) < expected and time.monotonic() < deadline:
        for member in members:  # librdkafka heartbeats in its own threads; polling in turn is fine
            batch = member.consume(10_000, timeout=0.2)
            for message in batch:
                if message.error() is not None:
                    continue
                value = message.value()
                index = int(value.split(b":", 1)[0])
                if index not in seen:
                    seen.add(index)
                    checksum ^= zlib.crc32(value)
                    total_bytes += len(value)
            if batch:
                member.commit(asynchronous=False)  # after processing: at least once
    elapsed = time.monotonic() - started
    held = [sorted(tp.partition for tp in member.assignment()) for member in members]
    committed = members[0].committed(
        [tp for member in members for tp in member.assignment()], timeout=10
    )
    for member in members:
        member.close()
    say(
        f"consumed {len(seen)} records from the beginning in group {group} in {elapsed:.2f} s: "
        f"{len(seen) / elapsed:,.0f} records/s, {total_bytes / elapsed / 1e6:.1f} MB/s"
    )
    say(
        f"  its {GROUP_MEMBERS} members held partitions {held}; committed offsets "
        f"{ {tp.partition: tp.offset for tp in sorted(committed, key=lambda t: t.partition)} }"
    )
    return len(seen), checksum


def end_offsets(bootstrap: str) -> dict[int, int]:
    """Each partition's high watermark: where this run's records will start."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-demo-offsets"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def run_spark_job(bootstrap: str, starting_offsets: dict[int, int], data_dir: Path) -> bool:
    """Run spark/batch_key_stats.py over this run's records; False if it failed."""
    if importlib.util.find_spec("pyspark") is None:
        say("Spark step skipped: pyspark is not installed (pip install 'odradek[spark]')")
        return True
    if not SPARK_JOB.exists():
        say(f"Spark step skipped: {SPARK_JOB} is not here (it ships with the source tree)")
        return True
    work = data_dir.absolute() / "spark"
    work.mkdir(parents=True, exist_ok=True)
    output = work / f"{TOPIC}-key-stats"
    log_path = work / "batch_key_stats.log"
    starting = json.dumps({TOPIC: {str(p): o for p, o in starting_offsets.items()}})
    command = [
        sys.executable,
        str(SPARK_JOB),
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        TOPIC,
        "--output",
        str(output),
        "--starting-offsets",
        starting,
        "--master",
        "local[2]",
        "--show",
        str(SPARK_SHOW_ROWS),
        # A short job: the JVM's quick compiler alone halves its cold start (about 30 s).
        "--conf",
        f"spark.driver.extraJavaOptions={QUICK_START_JVM_OPTIONS}",
    ]
    say(
        f"Spark: per-key, per-hour statistics of this run's records with a local[2] session "
        f"(spark/batch_key_stats.py; log in {log_path})"
    )
    env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    started = time.monotonic()
    with open(log_path, "wb") as log:
        # Its own process group: the JVM it starts is stopped with it.
        process = subprocess.Popen(command, stderr=log, env=env, start_new_session=True)
        try:
            code = process.wait(SPARK_JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_group(process)
            say(f"Spark job still running after {SPARK_JOB_TIMEOUT_S:.0f} s: stopped it")
            return False
        except BaseException:
            _stop_group(process)
            raise
    elapsed = time.monotonic() - started
    if code != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        say(f"Spark job failed (exit {code}) after {elapsed:.1f} s; the end of its log:")
        for line in tail:
            print(f"    {line}", flush=True)
        return False
    say(f"Spark job done in {elapsed:.1f} s (session start included); Parquet in {output}")
    return True


def _stop_group(process: subprocess.Popen) -> None:
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(SPARK_STOP_TIMEOUT_S)
            return
        except subprocess.TimeoutExpired:
            continue


def say(message: str) -> None:
    print(f"odradek demo: {message}", flush=True)
