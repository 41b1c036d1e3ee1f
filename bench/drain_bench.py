"""Drain benchmark: how long ``odradek cluster drain`` takes to empty a broker holding 1 GiB
across 30 partitions, throttled and unthrottled, and what producers see meanwhile.

The cluster (``odradek.local.cluster.up``): ZooKeeper, 1 controller and 4 brokers on 127.0.0.1,
data under ``var/`` (removed at the end). One topic of ``--partitions`` (30) partitions with 2
replicas, every partition with a replica on broker 4 (the one drained) and the other on brokers
1-3 in turn, ``min.insync.replicas`` 1. It is filled with ``--gib`` (1) GiB of 1 KiB records
(confluent-kafka, acks=1, no compression, so the bytes on disk are the bytes written), and the
size broker 4 holds is read from DescribeLogDirs.

Each round drains broker 4 exactly as the CLI does (``odradek.ops``: plan, execute with or
without a throttle, watch until every reassignment is done) while a producer sends 1 KiB records
with acks=all at a fixed ``--rate`` (records/s) to the same topic; then puts the replicas back on
broker 4 (the plan's rollback, unthrottled, not timed) for the next round. Per round it prints
the drain time (from the AlterPartitionReassignments call to the last partition done), the
bytes copied, the copy rate, and the producer's throughput (records acknowledged per second)
and ack latency (p50, p99, max) before the drain (``--baseline-s``, after a second of warm-up)
and during it. The rounds:
``--throttles`` (default ``20000000,50000000,0``: 20 MB/s, 50 MB/s, then unthrottled; 0 means
no throttle).

Every round starts with broker 4 leading every partition (a preferred leader election after
the rollback), so the copy has one source and a throttle, which is per broker
(``leader.replication.throttled.rate`` on the sending broker, ``follower...`` on each receiving
one), bounds the whole drain; with leaders spread over N brokers a drain may copy up to N times
the rate. A throttle applies to the moving replicas only (the topic's
``*.replication.throttled.replicas`` list them), so the producer's own replication is never held
back, though, as in Kafka, the leader counts its bytes to in-sync followers of listed partitions
against its rate. A throttle below the rate the topic grows at would never let a move finish,
which is why the producer here runs at a fixed rate.

Usage: ``.venv/bin/python bench/drain_bench.py [--gib 1] [--partitions 30] [--rate 2000]
[--throttles 20000000,50000000,0] [--baseline-s 5] [--timeout-s 900]`` (``make bench-drain``). Every
process started is stopped by pid at the end, on error too; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import ops
from odradek.client.admin import ClusterClient
from odradek.local import cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
DRAINED = 4
BROKERS = 4
RECORD_BYTES = 1024
ADMIN_TIMEOUT_S = 30.0
FILL_QUEUE_RECORDS = 200_000
POLL_S = 0.2
WATCH_INTERVAL_S = 0.5
WARM_UP_S = 1.0


@dataclass
class LoadWindow:
    """Acks of the fixed-rate producer between two instants."""

    acked: int = 0
    failed: int = 0
    latencies_ms: list[float] = field(default_factory=list)


class FixedRateProducer:
    """acks=all, 1 KiB records at ``rate`` records/s, in a thread; ack latencies recorded."""

    def __init__(self, bootstrap: str, topic: str, rate: int):
        self.topic = topic
        self.rate = rate
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "enable.idempotence": True,
                "compression.type": "none",
            }
        )
        self.acks: list[tuple[float, float | None]] = []  # (ack time, latency ms; None: failed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fixed-rate-producer", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.producer.flush(30)

    def window(self, start_s: float, end_s: float) -> LoadWindow:
        window = LoadWindow()
        with self._lock:
            acks = list(self.acks)
        for at_s, latency_ms in acks:
            if start_s <= at_s < end_s:
                if latency_ms is None:
                    window.failed += 1
                else:
                    window.acked += 1
                    window.latencies_ms.append(latency_ms)
        return window

    def _run(self) -> None:
        value = os.urandom(RECORD_BYTES)
        interval_s = 1.0 / self.rate
        next_s = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_s:
                time.sleep(min(next_s - now, 0.01))
                self.producer.poll(0)
                continue
            sent_s = now

            def acked(error, _message, sent_s=sent_s) -> None:
                at_s = time.monotonic()
                with self._lock:
                    self.acks.append((at_s, None if error else (at_s - sent_s) * 1000))

            try:
                self.producer.produce(self.topic, value, on_delivery=acked)
            except BufferError:
                self.producer.poll(0.01)
                continue
            next_s += interval_s
            self.producer.poll(0)


def describe_window(name: str, window: LoadWindow, seconds: float) -> str:
    latencies = sorted(window.latencies_ms)
    if not latencies:
        return f"  {name}: no acks in {seconds:.1f} s ({window.failed} failed)"
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return (
        f"  {name}: {window.acked / seconds:,.0f} records/s acked over {seconds:.1f} s, ack "
        f"latency p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {latencies[-1]:.1f} ms, "
        f"{window.failed} failed"
    )


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    others = [b for b in range(1, BROKERS + 1) if b != DRAINED]
    assignment = [[DRAINED, others[p % len(others)]] for p in range(partitions)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replica_assignment=assignment,
        config={"min.insync.replicas": "1", "segment.bytes": str(256 << 20)},
    )
    admin.create_topics([new])[topic].result(timeout=ADMIN_TIMEOUT_S)
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics.get(topic)
        led = described is not None and all(p.leader >= 0 for p in described.partitions.values())
        if led and described.error is None and len(described.partitions) == partitions:
            return
        time.sleep(POLL_S)
    raise TimeoutError(f"topic {topic} not led after {ADMIN_TIMEOUT_S} s")


def fill(bootstrap: str, topic: str, total_bytes: int, timeout_s: float) -> float:
    """Write ``total_bytes`` of 1 KiB records as fast as acks=1 allows; returns seconds."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": FILL_QUEUE_RECORDS,
            "compression.type": "none",
        }
    )
    value = os.urandom(RECORD_BYTES)
    records = total_bytes // RECORD_BYTES
    started = time.monotonic()
    deadline = started + timeout_s
    failed = 0

    def acked(error, _message) -> None:
        nonlocal failed
        if error:
            failed += 1

    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=acked)
                break
            except BufferError:
                producer.poll(0.05)
                if time.monotonic() > deadline:
                    raise TimeoutError("filling took too long") from None
        if n % 10_000 == 0:
            producer.poll(0)
    if producer.flush(max(1.0, deadline - time.monotonic())):
        raise TimeoutError("filling: records left unacknowledged")
    if failed:
        raise RuntimeError(f"filling: {failed} records failed")
    return time.monotonic() - started


async def drained_bytes(bootstrap: str, topic: str) -> int:
    """What broker ``DRAINED`` holds of ``topic``, from DescribeLogDirs."""
    async with ClusterClient(bootstrap) as client:
        await ops.cluster.read_cluster(client)  # learns the brokers' addresses
        sizes = await ops.cluster.replica_sizes(client, [DRAINED])
    return sum(size for (tp, _), size in sizes.items() if tp.topic == topic)


def read_view(bootstrap: str) -> ops.ClusterView:
    async def read() -> ops.ClusterView:
        async with ClusterClient(bootstrap) as client:
            return await ops.cluster.read_cluster(client)

    return asyncio.run(read())


def wait_in_sync(bootstrap: str, topic: str, timeout_s: float) -> None:
    def in_sync() -> bool:
        parts = [p for p in read_view(bootstrap).partitions.values() if p.topic == topic]
        return bool(parts) and all(set(p.isr) == set(p.replicas) for p in parts)

    deadline = time.monotonic() + timeout_s
    while not in_sync():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: ISRs not full after {timeout_s} s")
        time.sleep(POLL_S)


def drain_round(
    bootstrap: str, topic: str, throttle: int | None, args: argparse.Namespace
) -> dict[str, object]:
    moved = asyncio.run(drained_bytes(bootstrap, topic))
    sources = sorted({p.leader for p in read_view(bootstrap).partitions.values()})
    producer = FixedRateProducer(bootstrap, topic, args.rate)
    producer.start()
    try:
        time.sleep(WARM_UP_S + args.baseline_s)  # the first second: metadata, connections
        prepared = asyncio.run(ops.prepare_drain(bootstrap, DRAINED))
        started = time.monotonic()
        asyncio.run(ops.execute(bootstrap, prepared.plan, throttle))
        report = asyncio.run(
            ops.watch(
                bootstrap, prepared.plan, interval_s=WATCH_INTERVAL_S, timeout_s=args.timeout_s
            )
        )
        ended = time.monotonic()
        if not report.finished:
            raise TimeoutError(f"drain not done after {args.timeout_s} s")
        time.sleep(1.0)  # acks of records sent just before the end
    finally:
        producer.stop()
    seconds = ended - started
    before = producer.window(started - args.baseline_s, started)
    during = producer.window(started, ended)
    row = {
        "throttle": throttle,
        "seconds": seconds,
        "bytes": moved,
        "partitions": len(prepared.plan),
        "sources": sources,
        "before": describe_window("producer before", before, args.baseline_s),
        "during": describe_window("producer during", during, seconds),
        "rate_before": before.acked / args.baseline_s,
        "rate_during": during.acked / seconds,
    }
    # Back to broker 4 for the next round (unthrottled, not timed).
    back = ops.Plan.from_targets(prepared.plan.currents(), read_view(bootstrap))
    asyncio.run(ops.execute(bootstrap, back))
    asyncio.run(ops.watch(bootstrap, back, interval_s=WATCH_INTERVAL_S, timeout_s=args.timeout_s))
    wait_in_sync(bootstrap, topic, args.timeout_s)
    # Broker 4 leads every partition again, as in the first round: one source for the copy.
    asyncio.run(ops.elect_preferred_leaders(bootstrap, back.targets()))
    return row


def print_row(row: dict[str, object]) -> None:
    throttle = row["throttle"]
    label = f"throttle {throttle / 1e6:g} MB/s" if throttle else "unthrottled"
    mb = int(row["bytes"]) / 1e6
    print(
        f"drain broker {DRAINED}, {label}: {row['partitions']} partitions led by brokers "
        f"{row['sources']}, {mb:,.0f} MB in {row['seconds']:.1f} s "
        f"({mb / float(row['seconds']):,.1f} MB/s)"
    )
    print(row["before"])
    print(row["during"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="data on the drained broker")
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--rate", type=int, default=2000, help="producer records/s meanwhile")
    parser.add_argument(
        "--throttles", default="20000000,50000000,0", help="bytes/s per round, 0: unthrottled"
    )
    parser.add_argument("--baseline-s", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    throttles = [int(t) or None for t in args.throttles.split(",")]
    (REPO_ROOT / "var").mkdir(exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="drain-bench-", dir=REPO_ROOT / "var"))
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Drain benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    revision = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(
        f"source: {revision}; machine: {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, librdkafka {confluent_kafka.libversion()[0]}"
    )
    topic = "drain-bench"
    try:
        state, _ = cluster.up(data_dir, brokers=BROKERS, controllers=1)
        bootstrap = state.bootstrap_servers
        create_topic(bootstrap, topic, args.partitions)
        fill_s = fill(bootstrap, topic, int(args.gib * (1 << 30)), args.timeout_s)
        wait_in_sync(bootstrap, topic, args.timeout_s)
        held = asyncio.run(drained_bytes(bootstrap, topic))
        print(
            f"filled {args.gib:g} GiB in {fill_s:.1f} s; broker {DRAINED} holds {held:,} bytes "
            f"in {args.partitions} partitions (DescribeLogDirs)"
        )
        print(f"producer during each round: {args.rate} records/s of 1 KiB, acks=all")
        for throttle in throttles:
            print_row(drain_round(bootstrap, topic, throttle, args))
    finally:
        cluster.down(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
        print(
            f"load average before/after: {load_before} / "
            + " ".join(f"{x:.2f}" for x in os.getloadavg())
        )
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
