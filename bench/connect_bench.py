"""Kafka Connect throughput, per task, next to plain confluent-kafka clients in the same run.

The cluster (``odradek.local.cluster.up``): ZooKeeper, a controller and 3 brokers on 127.0.0.1,
data under ``var/`` (removed at the end). One ``odradek connect standalone`` worker, a real process
(``sys.executable -m odradek.cli connect standalone``), StringConverter for keys and values,
``offset.flush.interval.ms`` ``--offset-flush-ms`` (1000: the file offset store's write is then a
few per run, not a cost), its REST API on 127.0.0.1; it is started before anything is timed. Topics
have ``--partitions`` (1: the rates are those of one task) and ``--replication-factor`` (1), and
``min.insync.replicas`` 1 below 3 replicas (the cluster's default of 2 would refuse every acks=all
write to 1 replica), else 2. The data: a file of ``--records`` (200,000) lines of ``--value-size``
(100) ASCII bytes (slices of a random block of letters and digits). One after the other:

1. **plain producer**: one confluent-kafka producer, configured as the worker's (acks=all,
   idempotent, linger.ms 5), produces the file's lines to a topic of their own, until ``flush()``.
2. **file source -> topic**: ``FileStreamSource``, ``tasks.max=1``, ``batch.size``
   ``--batch-size`` (10,000 lines per poll; Kafka's default of 2,000 makes more, smaller polls),
   from ``POST /connectors`` until the topic's high watermark is ``--records`` (polled every
   50 ms).
3. **plain consumer**: one confluent-kafka consumer, configured as the worker's sink consumer
   (its defaults, no auto-commit), ``assign()``s the connector-filled topic from the beginning and
   reads ``--records`` records, touching every value.
4. **topic -> Parquet sink**: ``FileSinkConnector`` (``format=parquet``, ``flush.size``
   ``--flush-size``, 20,000), ``tasks.max=1``, from ``POST /connectors`` until its committed files
   (their names hold the offset ranges) cover ``--records`` records; then the files are counted
   again with pyarrow (not timed) and the connector is deleted.
5. **topic -> JSON-lines sink**: the same with ``format=jsonl``, a new consumer group.

Rates are records/s and MB/s of value bytes over each step's wall time, and the ratio to the
plain client of the same direction. ``--profile`` runs the worker with cProfile in every thread
and prints its top functions by own time when it stops (the whole worker life, every step in
it; cProfile slows Python code down, so the rates of a profiled run are not the results).

Usage: ``.venv/bin/python bench/connect_bench.py [--records 200000] [--value-size 100]
[--partitions 1] [--replication-factor 1] [--batch-size 10000] [--flush-size 20000]
[--profile]`` (``make bench-connect``). Every process started is stopped by pid at the end, on
error too (the worker: SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``); every wait is bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pstats
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pyarrow.parquet as pq
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
from cluster_bench import run_header, wait_for_leaders  # noqa: E402

TOPIC = "bench-connect"
PLAIN_TOPIC = "bench-connect-plain"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
FILE_SINK_CLASS = "odradek.connect.connectors.files_sink:FileSinkConnector"
WAIT_S = 120.0
STEP_TIMEOUT_S = 900.0
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 30.0
POLL_S = 0.05
RANDOM_BLOCK_BYTES = 1 << 20
LOG_TAIL_CHARS = 4000
PROFILING_LAUNCHER = """
import atexit, cProfile, pstats, runpy, sys, threading
out = sys.argv.pop(1)
profiles = [cProfile.Profile()]
def start_profile(*_):  # the first event of each new thread: profile it with a Profile of its own
    sys.setprofile(None)
    profile = cProfile.Profile()
    profiles.append(profile)
    profile.enable()
def dump():
    profiles[0].disable()
    pstats.Stats(*profiles).dump_stats(out)
threading.setprofile(start_profile)
atexit.register(dump)
sys.argv[0] = "odradek"
profiles[0].enable()
runpy.run_module("odradek.cli", run_name="__main__")
"""
"""``odradek.cli`` with cProfile in every thread (``--profile``): cProfile alone sees only the
main thread, and the tasks run in threads of their own."""
FILE_NAME = re.compile(r"\+(\d+)\+(\d+)\.(?:parquet|jsonl)$")


def write_lines(path: Path, records: int, value_size: int) -> list[bytes]:
    """The source file, and its lines (for the plain producer)."""
    alphabet = (string.ascii_letters + string.digits).encode()
    rng = random.Random(13)
    block = bytes(rng.choices(alphabet, k=RANDOM_BLOCK_BYTES + value_size))
    lines = []
    for i in range(records):
        start = (i * 7919) % RANDOM_BLOCK_BYTES
        lines.append(block[start : start + value_size])
    path.write_bytes(b"\n".join(lines) + b"\n")
    return lines


def create_topic(admin: AdminClient, name: str, partitions: int, replication_factor: int) -> None:
    # The cluster's brokers default to min.insync.replicas 2; acks=all needs at most RF - 1 here.
    min_insync = max(1, min(2, replication_factor - 1))
    topic = NewTopic(
        name, partitions, replication_factor, config={"min.insync.replicas": str(min_insync)}
    )
    admin.create_topics([topic])[name].result(timeout=30)
    wait_for_leaders(admin, name, partitions, WAIT_S)


def plain_producer(bootstrap: str, lines: list[bytes]) -> float:
    """The lines to ``PLAIN_TOPIC`` as the worker's producer would send them; seconds."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    failures: list[object] = []

    def delivered(err: object, _: object) -> None:
        if err is not None:
            failures.append(err)

    started = time.monotonic()
    deadline = started + STEP_TIMEOUT_S
    for line in lines:
        while True:
            try:
                producer.produce(PLAIN_TOPIC, line, on_delivery=delivered)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"plain producer: queue full for {STEP_TIMEOUT_S} s"
                    ) from None
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(WAIT_S) != 0 or failures:
        raise RuntimeError(f"plain producer: records unacknowledged or failed ({failures[:3]})")
    return time.monotonic() - started


def plain_consumer(bootstrap: str, partitions: int, records: int) -> float:
    """Read ``records`` records of ``TOPIC`` from the beginning, touching values; seconds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-connect-plain",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    read = value_bytes = 0
    started = time.monotonic()
    deadline = started + STEP_TIMEOUT_S
    try:
        consumer.assign(
            [TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
        while read < records and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is None:
                    read += 1
                    value_bytes += len(message.value())
    finally:
        consumer.close()
    elapsed = time.monotonic() - started
    if read != records:
        raise RuntimeError(f"plain consumer read {read} of {records} records")
    return elapsed


def high_watermark(consumer: Consumer, partitions: int) -> int:
    return sum(
        consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)[1]
        for p in range(partitions)
    )


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, log_path: Path) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            tail = log_path.read_text()[-LOG_TAIL_CHARS:]
            raise TimeoutError(f"timed out waiting for {what}; the worker's log ends:\n{tail}")
        time.sleep(POLL_S)


class Progress:
    """Polls a count of records done until it reaches ``records``; remembers when it first
    moved, so a step's start (task start, group join, first batch) is told apart from its
    steady rate."""

    def __init__(self, records: int, count: Callable[[], int]) -> None:
        self.records = records
        self.count = count
        self.started = time.monotonic()
        self.first: tuple[float, int] | None = None  # (seconds since start, count then)

    def done(self) -> bool:
        count = self.count()
        if count and self.first is None:
            self.first = (time.monotonic() - self.started, count)
        return count >= self.records

    def wait(self, what: str, log_path: Path) -> Timing:
        wait_for(what, self.done, STEP_TIMEOUT_S, log_path)
        elapsed = time.monotonic() - self.started
        first_s, first_count = self.first or (elapsed, self.records)
        return Timing(elapsed, first_s, first_count)


@dataclass(frozen=True)
class Timing:
    """A step's wall time, when its first records were seen done, and how many there were."""

    total_s: float
    first_s: float
    first_count: int

    def steady(self, records: int) -> str:
        """Records/s after the first records were seen (blank when they were all at once)."""
        rest_s = self.total_s - self.first_s
        if records <= self.first_count or rest_s <= 0:
            return ""
        return f"{(records - self.first_count) / rest_s:,.0f}"


class Worker:
    """A running ``odradek connect standalone`` process and its REST API."""

    def __init__(self, process: subprocess.Popen, url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as r:
                content = r.read()
                return json.loads(content) if content else None
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()!r}") from e

    def running(self, name: str) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the worker exited:\n{self.log_path.read_text()[-LOG_TAIL_CHARS:]}")
        status = self.call("GET", f"/connectors/{name}/status")
        failed = [t for t in status["tasks"] if t["state"] == "FAILED"]
        if failed:
            raise RuntimeError(f"{name}: task failed: {failed[0].get('trace', '')[:2000]}")
        return bool(status["tasks"]) and all(t["state"] == "RUNNING" for t in status["tasks"])


@contextlib.contextmanager
def standalone(work: Path, bootstrap: str, args: argparse.Namespace) -> Iterator[Worker]:
    properties = work / "worker.properties"
    properties.write_text(
        "\n".join(
            [
                f"bootstrap.servers={bootstrap}",
                f"key.converter={STRING_CONVERTER}",
                f"value.converter={STRING_CONVERTER}",
                f"offset.storage.file.filename={work / 'offsets.json'}",
                f"offset.flush.interval.ms={args.offset_flush_ms}",
                "task.shutdown.graceful.timeout.ms=5000",
                "listeners=http://127.0.0.1:0",
                "rest.advertised.host.name=127.0.0.1",
            ]
        )
        + "\n"
    )
    log_path = work / "worker.log"
    profile_path = work / "worker.prof"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT / "services"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    if args.profile:
        python = [sys.executable, "-c", PROFILING_LAUNCHER, str(profile_path)]
    else:
        python = [sys.executable, "-m", "odradek.cli"]
    command = [*python, "connect", "standalone", str(properties)]
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:

        def advertised() -> str | None:
            if process.poll() is not None:
                raise RuntimeError(f"the worker exited:\n{log_path.read_text()[-LOG_TAIL_CHARS:]}")
            found = re.search(r"serving the REST API at (http://\S+)", log_path.read_text())
            return found.group(1) if found else None

        yield Worker(
            process, wait_for("the REST API", advertised, START_TIMEOUT_S, log_path), log_path
        )
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(f"the worker (pid {process.pid}) ignored SIGTERM: SIGKILL", flush=True)
                os.kill(process.pid, signal.SIGKILL)
                process.wait(STOP_TIMEOUT_S)
    if args.profile and profile_path.exists():
        print("\nthe worker's profile, all its threads together, by own time:")
        stats = pstats.Stats(str(profile_path))
        stats.sort_stats("tottime").print_stats(25)
        print("the worker's own code (odradek/connect), by cumulative time:")
        stats.sort_stats("cumulative").print_stats("odradek/connect/", 30)


def source_step(worker: Worker, bootstrap: str, work: Path, args: argparse.Namespace) -> Timing:
    config = {
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "file": str(work / "lines.txt"),
        "topic": TOPIC,
        "batch.size": str(args.batch_size),
    }
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-connect-hw"})
    try:
        progress = Progress(args.records, lambda: high_watermark(watermarks, args.partitions))
        worker.call("POST", "/connectors", {"name": "bench-source", "config": config})
        timing = progress.wait(f"{TOPIC}'s high watermark at {args.records}", worker.log_path)
        if not worker.running("bench-source"):
            raise RuntimeError("bench-source is not running")
        if (got := high_watermark(watermarks, args.partitions)) != args.records:
            raise RuntimeError(f"{TOPIC} holds {got} records, not {args.records}")
    finally:
        watermarks.close()
    worker.call("DELETE", "/connectors/bench-source")
    return timing


def committed_records(directory: Path) -> int:
    """Records in the sink's committed files, from their names (first and last offset)."""
    total = 0
    for path in directory.rglob("*"):
        found = FILE_NAME.search(path.name)
        if found and not path.name.startswith("."):
            total += int(found.group(2)) - int(found.group(1)) + 1
    return total


def counted_records(directory: Path, format_: str) -> int:
    """Records in the committed files, read back (pyarrow for Parquet, lines for JSON lines)."""
    if format_ == "parquet":
        return sum(pq.read_metadata(p).num_rows for p in directory.rglob("*.parquet"))
    return sum(p.read_bytes().count(b"\n") for p in directory.rglob("*.jsonl"))


def sink_step(worker: Worker, work: Path, format_: str, args: argparse.Namespace) -> Timing:
    name = f"bench-sink-{format_}"
    directory = work / f"sink-{format_}"
    config = {
        "connector.class": FILE_SINK_CLASS,
        "tasks.max": "1",
        "topics": TOPIC,
        "format": format_,
        "path": str(directory),
        "flush.size": str(args.flush_size),
    }
    if args.records % args.flush_size:
        config["rotate.schedule.interval.ms"] = "1000"  # commits the last, smaller file
    progress = Progress(args.records, lambda: committed_records(directory))
    worker.call("POST", "/connectors", {"name": name, "config": config})
    timing = progress.wait(f"{name}'s files to hold {args.records} records", worker.log_path)
    if not worker.running(name):
        raise RuntimeError(f"{name} is not running")
    worker.call("DELETE", f"/connectors/{name}")
    if (got := counted_records(directory, format_)) != args.records:
        raise RuntimeError(f"{name}: the files hold {got} records, not {args.records}")
    files = sum(1 for p in directory.rglob(f"*.{format_}"))
    size = sum(p.stat().st_size for p in directory.rglob(f"*.{format_}"))
    print(f"  {name}: {files} files, {size / 1e6:.1f} MB, {got:,} records read back", flush=True)
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=10_000, help="the source's batch.size")
    parser.add_argument("--flush-size", type=int, default=20_000, help="the sink's flush.size")
    parser.add_argument("--offset-flush-ms", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="cProfile the worker")
    args = parser.parse_args()

    (REPO_ROOT / "var").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="connect-bench-", dir=REPO_ROOT / "var"))
    data_dir = work / "cluster"
    print(run_header(), flush=True)
    lines = write_lines(work / "lines.txt", args.records, args.value_size)
    mb = args.records * args.value_size / 1e6
    rows: list[tuple[str, Timing, float | None]] = []
    try:
        state, _ = cluster.up(data_dir, brokers=3)
        bootstrap = state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for name in (TOPIC, PLAIN_TOPIC):
            create_topic(admin, name, args.partitions, args.replication_factor)
        print(
            f"\n{args.records:,} records of {args.value_size} B, {args.partitions} partition(s), "
            f"3 brokers, replication factor {args.replication_factor}, 1 task each; "
            f"source batch.size {args.batch_size}, sink flush.size {args.flush_size}, "
            f"offset.flush.interval.ms {args.offset_flush_ms}",
            flush=True,
        )
        with standalone(work, bootstrap, args) as worker:
            produce_s = plain_producer(bootstrap, lines)
            rows.append(("plain producer (acks=all, idempotent)", plain(produce_s), None))
            source = source_step(worker, bootstrap, work, args)
            rows.append(("FileStreamSource -> topic", source, produce_s))
            consume_s = plain_consumer(bootstrap, args.partitions, args.records)
            rows.append(("plain consumer (assign, from the start)", plain(consume_s), None))
            for format_ in ("parquet", "jsonl"):
                sink = sink_step(worker, work, format_, args)
                rows.append((f"topic -> FileSink, {format_}", sink, consume_s))
            print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        cluster.down(data_dir)
        print_table(rows, args.records, mb)
        shutil.rmtree(work, ignore_errors=True)


def plain(seconds: float) -> Timing:
    return Timing(seconds, seconds, 0)


def print_table(rows: list[tuple[str, Timing, float | None]], records: int, mb: float) -> None:
    """Markdown, as docs/benchmarks.md shows it: "first records" is the time from the POST
    until the first records were seen in the topic (source) or in a committed file (sink), and
    "steady" the records/s after that."""
    print(
        "\n| step | records/s | MB/s | seconds | / plain client | first records (s) | steady "
        "records/s |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for label, timing, plain_s in rows:
        seconds = timing.total_s
        ratio = "" if plain_s is None else f"{plain_s / seconds:.2f}"
        first = "" if plain_s is None else f"{timing.first_s:.1f}"
        print(
            f"| {label} | {records / seconds:,.0f} | {mb / seconds:.1f} | {seconds:.1f} | "
            f"{ratio} | {first} | {timing.steady(records) if plain_s else ''} |"
        )


if __name__ == "__main__":
    main()
