"""Scale benchmark: what thousands of partitions per broker cost the control plane.

For each size (``--sizes``, replicas per broker: 1,000, 3,000 and 10,000 by default) a fresh
cluster (``odradek.local.cluster.up``: ZooKeeper, ``--controllers`` (2) controllers and
``--brokers`` (3) brokers on 127.0.0.1, data under a temporary directory) goes through the steps
of issue 26, each timed from the client side:

1. ``create``: CreateTopics of ``size / 10`` topics of 10 partitions, replication factor 3
   (every broker holds every partition: replicas per broker = partitions), until a broker's
   Metadata gives every partition a leader.
2. ``first_record``: one 100-byte record with acks=all to every partition (confluent-kafka, one
   producer), until the last is acknowledged.
3. ``failover``: kill -9 of the active controller and of broker 1 at the same instant, until a
   live broker's Metadata shows broker 1 leading nothing. Printed with the session timeout
   (``zookeeper.session.timeout.ms``) subtracted too: the part a faster control plane can win.
4. ``controlled_shutdown``: SIGTERM to broker 2, until its process has exited.
5. ``restart_serving``: broker 1 (killed: its logs recover) and broker 2 (shut down cleanly) are
   started again at the same instant; until broker 1's Metadata lists itself (it is registered
   and the controller has told it the cluster) and its ``/readyz`` says ready.
6. ``in_sync``: from the same instant, until no partition is under-replicated.

Each size starts after the previous one's files are written back (``os.sync``), so its
creations do not compete with that writeback. At the end every partition must still hold its
acknowledged record (its high watermark is 1:
``records_lost`` counts those that do not). ``--session-timeout-ms`` shortens the brokers' and
controllers' ZooKeeper session, which the failover waits out (``tests/integration/scale`` runs
these steps at 1,000 partitions with 6 s).

Besides the times, each row has the cost per partition (the time over the partition count, so
the growth curve across sizes is visible), the brokers' resident memory per replica (RSS after
``first_record`` less the RSS before ``create``, over the replicas a broker holds), and every
process's event-loop stalls: the count of ``odradek_event_loop_lag_seconds`` samples over
100 ms during the run and the bucket the worst fell in.

``--profile`` records every controller and broker with py-spy during each step and prints the
functions where the time went (own time, then time including callees), per process and step;
the raw collapsed stacks stay in ``--profile-dir``.

The brokers keep the open-files limit they inherit (raised to its hard limit): a replica holds
one descriptor (``broker/replica_budget.py``), so 10,000 replicas a broker fit in this
machine's 20,000.

Usage: ``.venv/bin/python bench/scale_bench.py [--sizes 1000,3000,10000] [--profile]``
(``make bench-scale``). Every process started is stopped by pid at the end, on error too; every
wait is bounded by ``--timeout-s``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import logging
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek.local import cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
PARTITIONS_PER_TOPIC = 10
REPLICATION_FACTOR = 3
RECORD_BYTES = 100
TOPICS_PER_REQUEST = 500  # CreateTopics requests of at most this many topics
POLL_S = 0.2
METADATA_TIMEOUT_S = 10.0
STALL_S = 0.1  # an event-loop lag above this is a stall
QUIET_DISK_S = 5.0  # after the writeback of a size's files, before the next size
SESSION_TIMEOUT_MS_DEFAULT = 18_000  # Kafka's zookeeper.session.timeout.ms
STEPS = (  # what a Row times, in order
    "create",
    "first_record",
    "failover",
    "controlled_shutdown",
    "restart_serving",
    "in_sync",
)


@dataclass
class Row:
    size: int
    steps: dict[str, float] = field(default_factory=dict)
    rss_kib_per_replica: float | None = None
    rss_mib: list[float] = field(default_factory=list)
    stalls: dict[str, tuple[int, str]] = field(default_factory=dict)
    session_timeout_s: float = SESSION_TIMEOUT_MS_DEFAULT / 1000
    records_lost: int | None = None  # acknowledged first records missing at the end


class Profiler:
    """py-spy recording every controller and broker while a step runs (``--profile``)."""

    def __init__(self, out_dir: Path | None, state: cluster.ClusterState):
        self.out_dir = out_dir
        self.state = state
        self.running: list[tuple[str, subprocess.Popen, Path]] = []
        self.name = ""

    @contextlib.contextmanager
    def step(self, name: str):
        """Record every running member while the body runs; ``attach`` adds members the body
        started (a restart)."""
        self.name = name
        if self.out_dir is None:
            yield
            return
        self.attach(self.state.members)
        time.sleep(0.5)  # py-spy attaches
        try:
            yield
        finally:
            self._stop(name)

    def attach(self, members: list[cluster.Member]) -> None:
        if self.out_dir is None:
            return
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for member in members:
            if member.role == "zookeeper" or not member.is_ours():
                continue
            label = f"{member.role}-{member.id}"
            if any(running == label for running, _, _ in self.running):
                continue
            out = self.out_dir / f"{self.name}.{label}.txt"
            proc = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(member.pid),
                    "--format",
                    "raw",
                    "--rate",
                    "50",
                    "--nonblocking",
                    "--output",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.running.append((label, proc, out))

    def _stop(self, name: str) -> None:
        for _, proc, _ in self.running:
            proc.send_signal(signal.SIGINT)
        for label, proc, out in self.running:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            summarize_profile(f"{name} {label}", out)
        self.running.clear()


def summarize_profile(title: str, path: Path, top: int = 12) -> None:
    """Print the functions with the most samples in a py-spy raw (collapsed) file."""
    if not path.exists():
        print(f"  [profile {title}: no samples]")
        return
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [
            f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].rstrip(")") for f in stack.split(";")
        ]
        idle = any("select" in f or "epoll" in f for f in frames[-2:])
        samples += n
        if idle:
            own["<idle>"] += n
            continue
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    if not samples:
        return
    print(f"  [profile {title}: {samples} samples]")
    for frame, n in own.most_common(top):
        print(f"    own {100 * n / samples:5.1f}%  {frame}")
    busy = [
        (f, n)
        for f, n in total.most_common(top * 4)
        if not f.startswith(("<module>", "run ", "_run "))
    ]
    for frame, n in busy[:top]:
        print(f"    all {100 * n / samples:5.1f}%  {frame}")


QUIET = logging.getLogger("scale_bench.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False  # a killed broker's "Connection refused", once per poll, says nothing
_ADMINS: dict[str, AdminClient] = {}


def admin_client(bootstrap: str) -> AdminClient:
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET})
    return _ADMINS[bootstrap]


def metadata(bootstrap: str):
    return admin_client(bootstrap).list_topics(timeout=METADATA_TIMEOUT_S)


def wait_until(what: str, predicate, timeout_s: float) -> float:
    """Poll ``predicate`` until true; the seconds it took. Bounded in time (and so in count)."""
    start = time.monotonic()
    deadline = start + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as e:  # a broker not answering yet: try again
            last = e
        if last is True:
            return time.monotonic() - start
        time.sleep(POLL_S)
    raise TimeoutError(f"{what}: not after {timeout_s:.0f} s (last: {last!r})")


def bench_topics(size: int) -> list[str]:
    return [f"scale-{n:05d}" for n in range(size // PARTITIONS_PER_TOPIC)]


def partitions_of(md, topics: list[str]):
    for topic in topics:
        described = md.topics.get(topic)
        if described is None or described.error is not None:
            yield topic, None
            continue
        yield from ((topic, p) for p in described.partitions.values())


def all_led(bootstrap: str, topics: list[str], expected: int):
    parts = list(partitions_of(metadata(bootstrap), topics))
    led = sum(1 for _, p in parts if p is not None and p.leader >= 0)
    return True if led == expected else f"{led} of {expected} partitions led"


def step_create(bootstrap: str, topics: list[str], timeout_s: float) -> float:
    admin = admin_client(bootstrap)
    start = time.monotonic()
    for first in range(0, len(topics), TOPICS_PER_REQUEST):
        new = [
            NewTopic(t, PARTITIONS_PER_TOPIC, REPLICATION_FACTOR)
            for t in topics[first : first + TOPICS_PER_REQUEST]
        ]
        for future in admin.create_topics(new, request_timeout=timeout_s).values():
            future.result(timeout=timeout_s)
    expected = len(topics) * PARTITIONS_PER_TOPIC
    remaining = timeout_s - (time.monotonic() - start)
    wait_until("every partition led", lambda: all_led(bootstrap, topics, expected), remaining)
    return time.monotonic() - start


def step_first_record(bootstrap: str, topics: list[str], timeout_s: float) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "logger": QUIET,
        }
    )
    value = b"x" * RECORD_BYTES
    failed: list[str] = []

    def acked(error, _message) -> None:
        if error is not None:
            failed.append(str(error))

    start = time.monotonic()
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            producer.produce(topic, value, partition=partition, on_delivery=acked)
        producer.poll(0)
    left = producer.flush(timeout_s)
    took = time.monotonic() - start
    if left or failed:
        raise RuntimeError(
            f"first records: {left} not acknowledged, {len(failed)} failed: {failed[:3]}"
        )
    return took


def leads_nothing(bootstrap: str, broker_id: int, topics: list[str]):
    md = metadata(bootstrap)
    led = sum(1 for _, p in partitions_of(md, topics) if p is not None and p.leader == broker_id)
    return True if led == 0 else f"broker {broker_id} still leads {led}"


def under_replicated(bootstrap: str, topics: list[str]):
    md = metadata(bootstrap)
    count = sum(
        1
        for _, p in partitions_of(md, topics)
        if p is None or len(p.isrs) < len(p.replicas) or len(p.replicas) < REPLICATION_FACTOR
    )
    return True if count == 0 else f"{count} under-replicated"


def serving(member: cluster.Member) -> object:
    md = metadata(member.address)
    if member.id not in md.brokers:
        return "not in its own Metadata"
    with urllib.request.urlopen(f"http://{member.admin}/readyz", timeout=2) as answer:
        return True if answer.status == 200 else f"/readyz {answer.status}"


def records_lost(bootstrap: str, topics: list[str]) -> int:
    """Partitions whose high watermark is not 1 at the end: each got one acknowledged record."""
    requests = {
        TopicPartition(t, p): OffsetSpec.latest()
        for t in topics
        for p in range(PARTITIONS_PER_TOPIC)
    }
    answers = admin_client(bootstrap).list_offsets(requests, request_timeout=METADATA_TIMEOUT_S)
    return sum(1 for f in answers.values() if f.result(timeout=METADATA_TIMEOUT_S).offset != 1)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def loop_stalls(member: cluster.Member) -> tuple[int, str]:
    """Samples of the member's event-loop lag over STALL_S, and the worst sample's bucket."""
    try:
        with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return -1, "?"
    buckets = {}
    for line in text.splitlines():
        if line.startswith("odradek_event_loop_lag_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[bound] = float(line.rsplit(" ", 1)[1])
    total = buckets.get("+Inf", 0)
    over = total - buckets.get(str(STALL_S), total)
    bounds = sorted((float(b), n) for b, n in buckets.items() if b != "+Inf")
    worst = next((f"<= {b:g} s" for b, n in bounds if n == total), "> 10 s")
    return int(over), worst


def session_timeout_s(state: cluster.ClusterState) -> float:
    ms = state.broker_overrides.get("zookeeper.session.timeout.ms", SESSION_TIMEOUT_MS_DEFAULT)
    return int(ms) / 1000


def wait_exit(member: cluster.Member, timeout_s: float) -> float:
    return wait_until(f"{member.role} {member.id} exited", lambda: not member.is_ours(), timeout_s)


def run_size(size: int, args: argparse.Namespace) -> Row:
    row = Row(size)
    data_dir = Path(tempfile.mkdtemp(prefix=f"odradek-scale-{size}-"))
    try:
        session = {}
        if args.session_timeout_ms is not None:
            session = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
        state, _ = cluster.up(
            data_dir,
            brokers=args.brokers,
            controllers=args.controllers,
            broker_overrides={**session, **dict(o.split("=", 1) for o in args.broker_override)},
            controller_overrides=session,
        )
        row.session_timeout_s = session_timeout_s(state)
        bootstrap = state.bootstrap_servers
        brokers = {m.id: m for m in state.members if m.role == "broker"}
        profile_dir = None
        if args.profile:
            profile_dir = Path(args.profile_dir) / str(size)
            profile_dir.mkdir(parents=True, exist_ok=True)
        profiler = Profiler(profile_dir, state)
        topics = bench_topics(size)
        partitions = len(topics) * PARTITIONS_PER_TOPIC
        rss_before = {b: rss_mib(m.pid) for b, m in brokers.items()}

        with profiler.step("create"):
            row.steps["create"] = step_create(bootstrap, topics, args.timeout_s)
        report(size, "create", row.steps["create"], partitions)
        with profiler.step("first_record"):
            row.steps["first_record"] = step_first_record(bootstrap, topics, args.timeout_s)
        report(size, "first_record", row.steps["first_record"], partitions)
        time.sleep(args.settle_s)  # replication of the first records, checkpoints
        rss_after = {b: rss_mib(m.pid) for b, m in brokers.items()}
        row.rss_mib = [rss_after[b] for b in sorted(brokers)]
        row.rss_kib_per_replica = (
            sum(rss_after[b] - rss_before[b] for b in brokers) * 1024 / len(brokers) / partitions
        )

        # failover: the active controller and broker 1 die at once
        victim, survivor = brokers[1], brokers[3]
        controller_id = cluster.active_controller(state)
        controller = state.member("controller", controller_id)
        with profiler.step("failover"):
            start = time.monotonic()
            cluster.kill(controller)
            cluster.kill(victim)
            wait_until(
                "broker 1 leads nothing",
                lambda: leads_nothing(survivor.address, 1, topics),
                args.timeout_s,
            )
            row.steps["failover"] = time.monotonic() - start
        report(size, "failover", row.steps["failover"], partitions, row.session_timeout_s)

        with profiler.step("controlled_shutdown"):
            start = time.monotonic()
            cluster.kill(brokers[2], signal.SIGTERM)
            wait_exit(brokers[2], args.timeout_s)
            row.steps["controlled_shutdown"] = time.monotonic() - start
        report(size, "controlled_shutdown", row.steps["controlled_shutdown"], partitions)

        with profiler.step("restart"):
            start = time.monotonic()
            for broker_id in (1, 2):
                member = state.member("broker", broker_id)
                cluster._start_broker(member, state)
                state.write(data_dir)
            profiler.attach([state.member("broker", b) for b in (1, 2)])
            restarted = state.member("broker", 1)
            wait_until("broker 1 serving", lambda: serving(restarted), args.timeout_s)
            row.steps["restart_serving"] = time.monotonic() - start
            report(size, "restart_serving", row.steps["restart_serving"], partitions)
            remaining = args.timeout_s - (time.monotonic() - start)
            wait_until("in sync", lambda: under_replicated(survivor.address, topics), remaining)
            row.steps["in_sync"] = time.monotonic() - start
        report(size, "in_sync", row.steps["in_sync"], partitions)

        row.records_lost = records_lost(survivor.address, topics)
        for member in state.members:
            if member.role != "zookeeper" and member.is_ours():
                row.stalls[f"{member.role}-{member.id}"] = loop_stalls(member)
        return row
    finally:
        cluster.down(data_dir)
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        quiet_disk()


def quiet_disk() -> None:
    """Write back every dirty page before the next size starts: a size's cluster made and
    removed thousands of files, and its writeback running under the next size's CreateTopics
    made that one up to twice as slow (creating a log is file-system calls)."""
    os.sync()
    time.sleep(QUIET_DISK_S)


def report(size: int, step: str, seconds: float, partitions: int, session_s: float = 0) -> None:
    beyond = f"  ({seconds - session_s:.1f} s beyond the session timeout)" if session_s else ""
    per = 1000 * seconds / partitions
    print(f"{size:>6} {step:<20} {seconds:8.1f} s  {per:6.2f} ms/partition{beyond}", flush=True)


def print_summary(rows: list[Row]) -> None:
    print("\nreplicas/broker " + " ".join(f"{s:>20}" for s in STEPS) + "  RSS KiB/replica")
    for row in rows:
        cells = []
        for s in STEPS:
            t = row.steps.get(s)
            if t is None:
                cells.append(f"{'-':>20}")
            elif s == "failover":
                cells.append(f"{t:>9.1f} s (+{t - row.session_timeout_s:4.1f})")
            else:
                cells.append(f"{t:>18.1f} s")
        rss = "-" if row.rss_kib_per_replica is None else f"{row.rss_kib_per_replica:.1f}"
        print(f"{row.size:>15} " + " ".join(cells) + f"  {rss:>15}")
    for row in rows:
        stalls = ", ".join(
            f"{m} {n} over {STALL_S * 1000:.0f} ms (worst {w})"
            for m, (n, w) in sorted(row.stalls.items())
        )
        rss = ", ".join(f"{r:.0f}" for r in row.rss_mib)
        print(
            f"{row.size}: acknowledged records lost: {row.records_lost}; broker RSS {rss} MiB; "
            f"loop stalls: {stalls}"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1000,3000,10000", help="replicas per broker, comma-separated"
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--controllers", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=900.0, help="bound of each step")
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        help="zookeeper.session.timeout.ms of brokers and controllers (default: theirs, 18000)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy every process during each step"
    )
    parser.add_argument("--profile-dir", default="/tmp/odradek-scale-profile")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout.strip()
    print(
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, revision {revision}, "
        f"{platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
        f"{shlex.join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])}"
    )
    quiet_disk()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(run_size(size, args))
    print_summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
