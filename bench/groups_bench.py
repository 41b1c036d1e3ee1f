"""Consumer-group benchmark: rebalance time, commit throughput, and consuming in a group next
to plain ``assign()``, on one replicated 3-broker cluster, all driven by confluent-kafka.

The cluster (``odradek.local.cluster.up``): ZooKeeper, a controller and 3 brokers on 127.0.0.1,
data under ``var/`` (removed at the end), ``__consumer_offsets`` with 3 replicas and
``min.insync.replicas`` 2, ``group.initial.rebalance.delay.ms`` 0 (Kafka's 3 s wait for more
members of a new group would be most of every figure; it is a setting, not work). One topic of
``--partitions`` (60) partitions, filled with ``--records`` (1,000,000) records of 100 bytes.

- **Rebalance**, per protocol (classic eager with the range assignor, classic cooperative-sticky,
  KIP-848 with the uniform server assignor): ``--members`` (10) consumers start together, each
  in its own thread polling; *join* is the time from the start until every partition is held by
  exactly one member and every member holds some (each thread reports its ``assignment()``);
  then one member closes (a clean leave) and *leave* is the time until its partitions are held
  by the others. ``--rounds`` (3)
  rounds each, median and spread printed, with a new group each round.
- **Commits**: one consumer commits synchronously, one partition per commit (``--commits``,
  2000), then 60 partitions per commit: commits/s and latency p50/p99. Each commit is
  acknowledged only once ``__consumer_offsets`` replicated it to the ISR.
- **Consume**: records/s reading the whole topic from the start, once with ``assign()`` of every
  partition (no group), once as the only member of a group (``subscribe``), in the same run.

Usage: ``.venv/bin/python bench/groups_bench.py [--partitions 60] [--members 10] [--rounds 3]
[--records 1000000] [--commits 2000]`` (``make bench-groups``). Every process started is stopped
by pid at the end, on error too; every wait is bounded.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
from cluster_bench import machine_facts, source_state, wait_for_leaders  # noqa: E402

WAIT_S = 120.0
POLL_S = 0.05
OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
}
PROTOCOLS = {
    "classic eager (range)": {"partition.assignment.strategy": "range"},
    "classic cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky"},
    "KIP-848 (uniform)": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def create_and_fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=30)
    wait_for_leaders(admin, topic, partitions, WAIT_S)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20}
    )
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(WAIT_S) != 0:
        raise RuntimeError("fill: records left unacknowledged")


class Member(threading.Thread):
    """A consumer polling in its own thread, publishing the partitions it holds."""

    def __init__(self, bootstrap: str, group: str, topic: str, config: dict[str, Any]):
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                **config,
            }
        )
        self.topic = topic
        self.held: frozenset[int] = frozenset()
        self.stop = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self.stop.is_set():
            self.consumer.poll(POLL_S)
            self.held = frozenset(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()


def wait_until_covered(members: list[Member], partitions: int) -> float:
    """When every partition is held by exactly one member and every member holds some (the
    first member alone holds them all for a while: that is not the group's join)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        held = [p for m in members for p in m.held]
        covered = len(held) == partitions and set(held) == set(range(partitions))
        if covered and all(m.held for m in members[:partitions]):
            return time.monotonic()
        time.sleep(0.01)
    raise TimeoutError("the group never shared every partition exactly once between members")


def rebalance_round(
    bootstrap: str, topic: str, partitions: int, count: int, config: dict
) -> tuple[float, float]:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, topic, config) for _ in range(count)]
    started = time.monotonic()
    for member in members:
        member.start()
    try:
        join_s = wait_until_covered(members, partitions) - started
        time.sleep(1)  # let the group settle (cooperative protocols finish in two steps)
        leaving = members.pop()
        left = time.monotonic()
        leaving.stop.set()
        leaving.join(WAIT_S)
        leave_s = wait_until_covered(members, partitions) - left
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(WAIT_S)
    return join_s, leave_s


def commits(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-commits-{uuid.uuid4().hex[:8]}"}
    )
    try:
        for width in (1, partitions):
            latencies = []
            started = time.monotonic()
            rounds = count if width == 1 else max(count // 10, 10)
            for i in range(rounds):
                offsets = [TopicPartition(topic, (i + j) % partitions, i + 1) for j in range(width)]
                sent = time.monotonic()
                consumer.commit(offsets=offsets, asynchronous=False)
                latencies.append(time.monotonic() - sent)
            elapsed = time.monotonic() - started
            print(
                f"  commits of {width:>2} partition(s): {rounds / elapsed:8.0f} commits/s "
                f"({rounds * width / elapsed:8.0f} offsets/s), latency p50 "
                f"{percentile(latencies, 0.5) * 1000:.1f} ms, "
                f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms"
            )
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str, partitions: int, records: int, *, group: bool) -> float:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-consume-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(config)
    if group:
        consumer.subscribe([topic])
    else:
        consumer.assign(
            [TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
    seen = 0
    started = None
    deadline = time.monotonic() + WAIT_S * 5
    try:
        while seen < records and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=0.5)
            if batch and started is None:
                started = time.monotonic()
            seen += sum(1 for m in batch if m.error() is None)
    finally:
        consumer.close()
    if seen < records or started is None:
        raise TimeoutError(f"read {seen} of {records} records")
    return records / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args()

    (REPO_ROOT / "var").mkdir(exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="groups-bench-", dir=REPO_ROOT / "var"))
    print(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Odradek {source_state()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, {machine_facts()}"
    )
    try:
        state, _ = cluster.up(data_dir, brokers=3, broker_overrides=OVERRIDES)
        bootstrap = state.bootstrap_servers
        topic = "bench-groups"
        create_and_fill(bootstrap, topic, args.partitions, args.records)
        print(
            f"\nrebalance: {args.members} members, {args.partitions} partitions, "
            f"{args.rounds} rounds"
        )
        for name, config in PROTOCOLS.items():
            joins, leaves = [], []
            for _ in range(args.rounds):
                join_s, leave_s = rebalance_round(
                    bootstrap, topic, args.partitions, args.members, config
                )
                joins.append(join_s)
                leaves.append(leave_s)
            print(
                f"  {name:<28} join {statistics.median(joins):6.2f} s "
                f"[{min(joins):.2f}-{max(joins):.2f}]   "
                f"one leaves {statistics.median(leaves):6.2f} s "
                f"[{min(leaves):.2f}-{max(leaves):.2f}]"
            )
        print("\ncommits (acknowledged once replicated):")
        commits(bootstrap, topic, args.partitions, args.commits)
        print(f"\nconsume {args.records} records of 100 B from {args.partitions} partitions:")
        for name, group in (("assign()", False), ("group member", True)):
            rate = consume_all(bootstrap, topic, args.partitions, args.records, group=group)
            print(f"  {name:<14} {rate:10.0f} records/s")
    finally:
        cluster.down(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
