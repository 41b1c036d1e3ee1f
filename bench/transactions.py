"""Transactions benchmark: transactional produce throughput next to plain idempotent produce, and
end-to-end latency read with ``read_committed``, on one replicated 3-broker cluster, driven by
confluent-kafka.

The cluster (``odradek.local.cluster.up``): ZooKeeper, a controller and 3 brokers on 127.0.0.1,
data under ``var/`` (removed at the end); every topic, ``__transaction_state`` and
``__consumer_offsets`` included, has 3 replicas and ``min.insync.replicas`` 2; the internal topics
have 10 partitions each (Kafka's 50 only lengthen the start). One topic of ``--partitions`` (6)
partitions per measurement.

- **Throughput**: ``--records`` (100,000) records of 1 KiB, round robin over the partitions, by one
  producer with ``acks=all``, idempotent, ``linger.ms`` 5; once plain, once transactional with
  ``--per-transaction`` (1,000) records per transaction (begin, produce, commit: the commit waits
  for every record's acknowledgement, then EndTxn, the markers and CompleteCommit). The two
  alternate, ``--rounds`` (3) rounds each, each round on a fresh topic; median and spread printed,
  and the transactional median as a share of the idempotent one (issue 10's target: 70 % or more).
- **Latency**: a ``read_committed`` consumer assigned every partition of a new topic, in its
  own thread, timestamps each record's arrival; a producer sends ``--latency-transactions`` (300)
  transactions of ``--latency-records`` (10) records of 1 KiB, paced ``--latency-rate`` (50) per
  second, each record carrying its send time (``time.monotonic``, same process). A record is
  readable under ``read_committed`` only once its transaction's marker moved the last stable
  offset past it, so its latency includes the commit. The same traffic without transactions
  (idempotent, read by the same kind of consumer) is measured next to it. One batch of warm-up
  is not counted. p50 and p99 printed.

Usage: ``.venv/bin/python bench/transactions.py [--records 100000] [--rounds 3]
[--partitions 6] [--per-transaction 1000]`` (``make bench-transactions``). Every process started
is stopped by pid at the end, on error too; every wait is bounded.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
from cluster_bench import machine_facts, source_state, wait_for_leaders  # noqa: E402

WAIT_S = 120.0
STEP_TIMEOUT_S = 60.0
OVERRIDES = {
    "transaction.state.log.num.partitions": "10",
    "offsets.topic.num.partitions": "10",
}
VALUE_BYTES = 1024
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"bench-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=30)
    wait_for_leaders(admin, topic, partitions, WAIT_S)
    return topic


def produce_all(producer: Producer, topic: str, start: int, count: int, partitions: int) -> None:
    value = b"x" * VALUE_BYTES
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)


def idempotent_throughput(bootstrap: str, partitions: int, records: int) -> float:
    """Records/s: every record produced and acknowledged (flush)."""
    topic = create_topic(bootstrap, partitions)
    failed: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **PRODUCER,
            "on_delivery": lambda e, _m: e and failed.append(str(e)),
        }
    )
    started = time.monotonic()
    produce_all(producer, topic, 0, records, partitions)
    if producer.flush(STEP_TIMEOUT_S * 5) != 0 or failed:
        raise RuntimeError(f"idempotent: unacknowledged records, failures {failed[:3]}")
    return records / (time.monotonic() - started)


def transactional_throughput(
    bootstrap: str, partitions: int, records: int, per_transaction: int
) -> tuple[float, list[float]]:
    """Records/s with every transaction committed; the commit_transaction times (s)."""
    topic = create_topic(bootstrap, partitions)
    producer = Producer(
        {**PRODUCER, "bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}"}
    )
    producer.init_transactions(STEP_TIMEOUT_S)
    commits: list[float] = []
    started = time.monotonic()
    for start in range(0, records, per_transaction):
        producer.begin_transaction()
        produce_all(producer, topic, start, min(per_transaction, records - start), partitions)
        committing = time.monotonic()
        producer.commit_transaction(STEP_TIMEOUT_S)
        commits.append(time.monotonic() - committing)
    return records / (time.monotonic() - started), commits


class Arrivals(threading.Thread):
    """A ``read_committed`` consumer of every partition of a new topic from offset 0, in its own
    thread: each record's latency (arrival time minus the send time it carries)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str):
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for message in self.consumer.consume(num_messages=1000, timeout=0.1):
                    if message.error() is None:
                        (sent,) = struct.unpack_from(">d", message.value())
                        self.latencies.append(time.monotonic() - sent)
        finally:
            self.consumer.close()

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(self.latencies) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(self.latencies)} of {count} records")
            time.sleep(0.01)


def latency(
    bootstrap: str,
    partitions: int,
    transactions: int,
    per: int,
    rate: float,
    *,
    txn: bool,
    isolation: str = "read_committed",
) -> list[float]:
    """Latencies of ``transactions`` batches of ``per`` records, after one batch of warm-up
    (connections and fetch sessions in place, not measured)."""
    topic = create_topic(bootstrap, partitions)
    config = {**PRODUCER, "bootstrap.servers": bootstrap, "linger.ms": 0}
    if txn:
        config["transactional.id"] = f"bench-latency-{topic}"
    producer = Producer(config)
    if txn:
        producer.init_transactions(STEP_TIMEOUT_S)
    padding = b"x" * (VALUE_BYTES - 8)

    def batch(n: int) -> None:
        if txn:
            producer.begin_transaction()
        for i in range(per):
            value = struct.pack(">d", time.monotonic()) + padding
            producer.produce(topic, value, partition=(n + i) % partitions)
        if txn:
            producer.commit_transaction(STEP_TIMEOUT_S)
        else:
            producer.flush(STEP_TIMEOUT_S)

    arrivals = Arrivals(bootstrap, topic, partitions, isolation)
    arrivals.start()
    try:
        batch(0)
        arrivals.wait_for(per)
        measured_from = len(arrivals.latencies)
        started = time.monotonic()
        for n in range(transactions):
            while time.monotonic() < started + n / rate:
                time.sleep(0.001)
            batch(n)
        arrivals.wait_for(measured_from + transactions * per)
    finally:
        arrivals.stop.set()
        arrivals.join(WAIT_S)
    return arrivals.latencies[measured_from:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--per-transaction", type=int, default=1000)
    parser.add_argument("--latency-transactions", type=int, default=300)
    parser.add_argument("--latency-records", type=int, default=10)
    parser.add_argument("--latency-rate", type=float, default=50.0)
    args = parser.parse_args()
    (REPO_ROOT / "var").mkdir(exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="txn-bench-", dir=REPO_ROOT / "var"))
    print(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Odradek {source_state()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, {machine_facts()}"
    )
    try:
        state, _ = cluster.up(data_dir, brokers=3, broker_overrides=OVERRIDES)
        bootstrap = state.bootstrap_servers
        print(
            f"\nthroughput: {args.records} records of {VALUE_BYTES} B over {args.partitions} "
            f"partitions, acks=all, idempotent, linger.ms 5; {args.rounds} rounds, alternating"
        )
        plain, transactional, commit_times = [], [], []
        for _ in range(args.rounds):
            plain.append(idempotent_throughput(bootstrap, args.partitions, args.records))
            rate, commits = transactional_throughput(
                bootstrap, args.partitions, args.records, args.per_transaction
            )
            transactional.append(rate)
            commit_times += commits
        for name, rates in (
            ("idempotent", plain),
            (f"transactional, {args.per_transaction}/txn", transactional),
        ):
            print(
                f"  {name:<26} {statistics.median(rates):9.0f} records/s "
                f"[{min(rates):.0f}-{max(rates):.0f}] "
                f"({statistics.median(rates) * VALUE_BYTES / (1 << 20):.1f} MiB/s)"
            )
        share = statistics.median(transactional) / statistics.median(plain)
        print(
            f"  transactional / idempotent: {share:.0%} (target 70 %); commit_transaction "
            f"p50 {percentile(commit_times, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(commit_times, 0.99) * 1000:.1f} ms"
        )
        print(
            f"\nend-to-end latency, read_committed: {args.latency_transactions} x "
            f"{args.latency_records} records of {VALUE_BYTES} B at {args.latency_rate:.0f}/s"
        )
        for name, txn in (("transactional", True), ("idempotent (no transaction)", False)):
            found = latency(
                bootstrap,
                args.partitions,
                args.latency_transactions,
                args.latency_records,
                args.latency_rate,
                txn=txn,
            )
            print(
                f"  {name:<28} p50 {percentile(found, 0.5) * 1000:7.1f} ms   "
                f"p99 {percentile(found, 0.99) * 1000:7.1f} ms"
            )
    finally:
        cluster.down(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
