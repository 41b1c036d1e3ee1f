"""Where one transaction's time goes: the phases of a transaction of 1,000 records of 1 KiB next
to the same records without a transaction and to one small ``acks=all`` write, on the cluster of
``bench/transactions.py`` (3 brokers, 3 replicas, ``min.insync.replicas`` 2).

- **1-record acks=all produce**: one record, then ``flush``, 200 times (the first 20 not counted):
  a replicated write's round trip (leader append, follower fetch, high watermark, answer), what
  each of the coordinator's writes and each marker costs at least.
- **1,000 records, idempotent**: produce them, then ``flush``, 20 times (3 not counted): the data
  of one transaction, filled and drained as one burst.
- **transaction**: ``begin``, produce the 1,000 records, ``flush`` (this includes
  AddPartitionsToTxn, which the producer awaits before sending the data, and which waits for the
  previous transaction's markers and CompleteCommit), then ``commit_transaction`` (EndTxn alone:
  everything is flushed); ``--transactions`` (40) times, the first 5 not counted.

p50 of each printed. ``begin..flushed`` minus the idempotent burst is what the transaction adds
before its data is acknowledged (the previous transaction's markers, its CompleteCommit, the
AddPartitionsToTxn record).

Usage: ``.venv/bin/python bench/transactions_phases.py [--transactions 40]``. Every process
started is stopped by pid at the end, on error too; every wait is bounded.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from odradek.local import cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
from cluster_bench import machine_facts, source_state  # noqa: E402
from transactions import OVERRIDES, PRODUCER, create_topic, produce_all  # noqa: E402

PARTITIONS = 6
TIMEOUT_S = 30.0


def p50_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def timed(step, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.monotonic()
        step()
        times.append(time.monotonic() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=40)
    parser.add_argument("--per-transaction", type=int, default=1000)
    args = parser.parse_args()
    per = args.per_transaction
    (REPO_ROOT / "var").mkdir(exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="txn-phases-", dir=REPO_ROOT / "var"))
    print(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Odradek {source_state()}, "
        f"{machine_facts()}"
    )
    try:
        state, _ = cluster.up(data_dir, brokers=3, broker_overrides=OVERRIDES)
        bootstrap = state.bootstrap_servers
        topic = create_topic(bootstrap, PARTITIONS)

        single = Producer({"bootstrap.servers": bootstrap, **PRODUCER, "linger.ms": 0})
        sent = iter(range(1 << 30))

        def one() -> None:
            single.produce(topic, b"x", partition=next(sent) % PARTITIONS)
            if single.flush(TIMEOUT_S) != 0:
                raise TimeoutError("a record was not acknowledged")

        print(f"1-record acks=all produce       p50 {p50_ms(timed(one, 200)[20:]):6.1f} ms")

        plain = Producer({"bootstrap.servers": bootstrap, **PRODUCER})

        def burst() -> None:
            produce_all(plain, topic, 0, per, PARTITIONS)
            if plain.flush(TIMEOUT_S) != 0:
                raise TimeoutError("records were not acknowledged")

        print(f"{per} records, idempotent       p50 {p50_ms(timed(burst, 20)[3:]):6.1f} ms")

        producer = Producer(
            {**PRODUCER, "bootstrap.servers": bootstrap, "transactional.id": f"phases-{topic}"}
        )
        producer.init_transactions(TIMEOUT_S)
        flushed, committed, total = [], [], []
        for _ in range(args.transactions):
            started = time.monotonic()
            producer.begin_transaction()
            produce_all(producer, topic, 0, per, PARTITIONS)
            if producer.flush(TIMEOUT_S) != 0:
                raise TimeoutError("transactional records were not acknowledged")
            middle = time.monotonic()
            producer.commit_transaction(TIMEOUT_S)
            ended = time.monotonic()
            flushed.append(middle - started)
            committed.append(ended - middle)
            total.append(ended - started)
        print(
            f"transaction: begin..flushed   p50 {p50_ms(flushed[5:]):6.1f} ms, "
            f"EndTxn p50 {p50_ms(committed[5:]):.1f} ms, whole p50 {p50_ms(total[5:]):.1f} ms"
        )
    finally:
        cluster.down(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
