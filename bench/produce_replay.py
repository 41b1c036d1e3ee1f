"""Produce benchmark: identical Produce requests replayed to this revision and a baseline one.

What an append costs the broker, without a client library's own CPU in the measurement: the
requests (one partition, one batch each, 1 KiB values of random hex text built with
kafka-python's builder, as ``log_bench.py``) are encoded once, before any timing, then written
to each broker's client listener over one connection with ``--depth`` requests in flight, as a
producer pipelines them (``acks=1``). Two brokers run side by side, each a one-broker cluster
(``odradek local up``): this checkout, and ``--baseline REV`` from a ``git worktree`` of that
revision (``cluster_bench.BaselineBroker``). They take turns, round by round, the order
flipping each round, so a slow spell of the machine hits both.

For every batch size and codec it prints records/s and MB/s of record values (median and best
over the rounds, for both brokers, and their ratio) and the broker process's CPU time per
request (utime + stime of all its threads, from /proc). This is how issue 6 measures the cost
of checking every record on the produce path against the revision before it.

Usage: ``.venv/bin/python bench/produce_replay.py [--baseline 58ee5fc] [--rounds 8]
[--requests 200] [--sizes 16k,1m] [--codecs none,lz4] [--depth 4] [--json PATH]``. Every loop is
bounded; both clusters are stopped by pid at the end, on error too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import shlex
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from datetime import timedelta
from importlib import import_module
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from cluster_bench import (
    REPO_ROOT,
    BaselineBroker,
    Broker,
    OdradekBroker,
    cpu_seconds,
    create_topic,
    machine_facts,
    source_state,
)
from odradek.protocol.codec import encode_request
from odradek.protocol.framing import encode_frame
from odradek.protocol.schemas import request_schema

VALUE_BYTES = 1024
TIMESTAMP_MS = 1_763_769_600_000
SIZES = {"16k": 16 * 1024, "1m": 1_000_000}  # 1m: a librdkafka batch.size of 1,000,000
CODECS = {"none": 0, "lz4": 3}
POOL_BATCHES = 16
RESPONSE_TIMEOUT_S = 60.0


def build_batch(target_bytes: int, codec: int, rng: random.Random) -> tuple[bytes, int]:
    """A batch of 1 KiB records whose uncompressed records add up to about ``target_bytes``."""
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    count = max(1, target_bytes // (VALUE_BYTES + 16))
    for i in range(count):
        builder.append(i, TIMESTAMP_MS, None, rng.randbytes(VALUE_BYTES // 2).hex().encode(), [])
    return bytes(builder.build()), count


def produce_frame(topic: str, records: bytes, correlation_id: int) -> bytes:
    module = import_module(request_schema(0, 9).__module__)
    request = module.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=30),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=(module.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )
    return b"".join(encode_frame([encode_request(request, correlation_id, "replay")]))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = sock.recv(n, socket.MSG_WAITALL)
    if len(data) != n:
        raise ConnectionError(f"the broker closed the connection ({len(data)} of {n} bytes)")
    return data


def replay(broker: Broker, frames: list[bytes], depth: int) -> tuple[float, float]:
    """Send ``frames`` with ``depth`` in flight; (seconds, broker CPU seconds)."""
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=RESPONSE_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cpu_before, started = cpu_seconds(broker.pid), time.perf_counter()
        sent = answered = 0
        while answered < len(frames):
            while sent < len(frames) and sent - answered < depth:
                sock.sendall(frames[sent])
                sent += 1
            (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
            _recv_exactly(sock, size)
            answered += 1
        return time.perf_counter() - started, cpu_seconds(broker.pid) - cpu_before


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="58ee5fc", help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200, help="requests per round")
    parser.add_argument("--sizes", default="16k,1m", help=f"among {', '.join(SIZES)}")
    parser.add_argument("--codecs", default="none,lz4", help=f"among {', '.join(CODECS)}")
    parser.add_argument("--depth", type=int, default=4, help="requests in flight")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    args.sizes = args.sizes.split(",")
    args.codecs = args.codecs.split(",")
    if not set(args.sizes) <= set(SIZES) or not set(args.codecs) <= set(CODECS):
        parser.error("unknown size or codec")
    if min(args.rounds, args.requests, args.depth) < 1:
        parser.error("--rounds, --requests and --depth must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    (REPO_ROOT / "var").mkdir(exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="produce-replay-", dir=REPO_ROOT / "var"))
    brokers: list[Broker] = [
        OdradekBroker(work_dir / "odradek"),
        BaselineBroker(args.baseline, work_dir),
    ]
    rng = random.Random(args.seed)
    results: list[dict[str, object]] = []
    try:
        for broker in brokers:
            broker.start()
            print(f"{broker.describe()}", flush=True)
        for size in args.sizes:
            for codec in args.codecs:
                pool = [build_batch(SIZES[size], CODECS[codec], rng) for _ in range(POOL_BATCHES)]
                records_per_request = statistics.mean(count for _, count in pool)
                runs: dict[str, list[tuple[float, float]]] = {b.name: [] for b in brokers}
                for round_ in range(args.rounds):
                    order = brokers if round_ % 2 == 0 else brokers[::-1]
                    for broker in order:
                        topic = f"replay-{size}-{codec}-{round_}"
                        create_topic(broker, topic, 60.0)
                        frames = [
                            produce_frame(topic, pool[i % POOL_BATCHES][0], i)
                            for i in range(args.requests)
                        ]
                        runs[broker.name].append(replay(broker, frames, args.depth))
                row: dict[str, object] = {"size": size, "codec": codec}
                for name, measured in runs.items():
                    rates = [args.requests * records_per_request / s for s, _ in measured]
                    cpu_us = [cpu / args.requests * 1e6 for _, cpu in measured]
                    row[name] = {
                        "records_s_median": statistics.median(rates),
                        "records_s_best": max(rates),
                        "mb_s_median": statistics.median(rates) * VALUE_BYTES / 1e6,
                        "cpu_us_per_request_median": statistics.median(cpu_us),
                        "cpu_us_per_request_min": min(cpu_us),
                    }
                ours, old = row["odradek"], row["baseline"]
                row["ratio_median"] = ours["records_s_median"] / old["records_s_median"]
                row["ratio_best"] = ours["records_s_best"] / old["records_s_best"]
                results.append(row)
                print(
                    f"{size:>4} {codec:5} records/s median {ours['records_s_median']:>10,.0f} "
                    f"(baseline {old['records_s_median']:>10,.0f}, ratio "
                    f"{row['ratio_median']:.2f}), best ratio {row['ratio_best']:.2f}; broker CPU "
                    f"per request {ours['cpu_us_per_request_median']:,.0f} us (baseline "
                    f"{old['cpu_us_per_request_median']:,.0f} us)",
                    flush=True,
                )
        if args.json:
            header = {
                "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "command": shlex.join([Path(sys.executable).name, *sys.argv]),
                "source": source_state(),
                "baseline": args.baseline,
                "machine": machine_facts(),
                "rounds": args.rounds,
                "requests": args.requests,
                "depth": args.depth,
            }
            Path(args.json).write_text(json.dumps({**header, "rows": results}, indent=2) + "\n")
        return 0
    finally:
        for broker in reversed(brokers):
            try:
                broker.stop()
            except Exception as e:  # noqa: BLE001 - stop the other all the same
                print(f"stopping {broker.name} failed: {e}", file=sys.stderr)
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
