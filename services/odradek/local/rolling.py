"""Rolling restart of a local cluster's brokers, one at a time, never two out of the ISR at once.

``rolling_restart`` (``odradek local restart --rolling``) takes each broker in id order:

1. waits until no partition is under-replicated (``under_replicated_partitions``: a partition
   whose ISR in ZooKeeper lacks one of its assigned replicas, or that has no leader and ISR yet),
   so stopping this broker never takes a partition below what it had;
2. stops it with SIGTERM: its controlled shutdown moves its leaderships to other in-sync
   replicas and takes it out of the ISRs before it exits; SIGKILL only after ``stop_timeout_s``
   (reported: a broker that had to be killed restarts with log recovery);
3. starts it again with the same configuration and data (``cluster.restart_broker``, which
   waits until its Metadata lists itself);
4. waits until no partition is under-replicated again: the restarted broker caught up and is
   back in every ISR. Only then the next broker.

Every wait is bounded: past ``isr_timeout_s`` it raises ``RollingRestartError`` naming the
partitions still under-replicated (their ISR and replicas), and leaves the cluster as it is (the
broker restarted last is running). Progress goes to ``on_progress`` as ``Progress`` values.
Leadership is not moved back to the preferred replicas here: that is the preferred leader
election's job. Runs in the caller's thread; ZooKeeper is read with a short-lived kazoo client
per poll.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.local import cluster
from odradek.local.cluster import ClusterState
from odradek.zk.paths import (
    DELETE_TOPICS_PATH,
    TOPICS_PATH,
    PartitionState,
    TopicAssignment,
    partition_state_path,
    topic_path,
)

ISR_TIMEOUT_S = 120.0  # a restarted broker catches up within this (and the cluster before it)
# Controlled shutdown at the defaults: 3 attempts of up to 30 s, 5 s apart, then the stop itself.
STOP_TIMEOUT_S = 120.0
POLL_S = 0.2
SHOWN_MAX = 10  # under-replicated partitions named in an error


class RollingRestartError(RuntimeError):
    """A step did not finish in time; the message says which and what was left."""


@dataclass(frozen=True, slots=True)
class Progress:
    """One step of one broker: ``phase`` is waiting | stopping | stopped | started | in-sync."""

    broker_id: int
    phase: str
    elapsed_s: float  # since this broker's turn began
    detail: str = ""

    def __str__(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"broker {self.broker_id} {self.phase} ({self.elapsed_s:.1f} s){detail}"


@dataclass(frozen=True, slots=True)
class RestartReport:
    """How one broker's restart went (seconds since its turn began)."""

    broker_id: int
    stopped_s: float
    killed: bool  # did not stop within stop_timeout_s: SIGKILL
    started_s: float
    in_sync_s: float


@contextlib.contextmanager
def _zookeeper(state: ClusterState) -> Iterator[KazooClient]:
    client = KazooClient(state.zookeeper_connect, timeout=cluster.ZK_CONNECT_TIMEOUT_S)
    client.start(timeout=cluster.ZK_CONNECT_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def under_replicated_partitions(
    state: ClusterState,
) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each partition whose ISR lacks an assigned replica: (topic, partition) -> (ISR, replicas).

    Read from ZooKeeper (assignments and the controller's partition states); a partition without
    a state yet has ISR ``()``. Topics being deleted are left out.
    """
    found = {}
    with _zookeeper(state) as zk:
        deleting = set(zk.get_children(DELETE_TOPICS_PATH)) if zk.exists(DELETE_TOPICS_PATH) else ()
        topics = zk.get_children(TOPICS_PATH) if zk.exists(TOPICS_PATH) else []
        for topic in sorted(set(topics) - set(deleting)):
            path = topic_path(topic)
            with contextlib.suppress(NoNodeError):  # deleted meanwhile
                assignment = TopicAssignment.decode(zk.get(path)[0], path)
                for partition, replicas in sorted(assignment.partitions.items()):
                    state_path = partition_state_path(topic, partition)
                    isr: tuple[int, ...] = ()
                    if zk.exists(state_path):
                        isr = tuple(PartitionState.decode(zk.get(state_path)[0], state_path).isr)
                    if not set(replicas) <= set(isr):
                        found[(topic, partition)] = (isr, tuple(replicas))
    return found


def _describe(missing: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]) -> str:
    shown = [
        f"{t}-{p} (ISR {list(isr)} of {list(replicas)})"
        for (t, p), (isr, replicas) in list(missing.items())[:SHOWN_MAX]
    ]
    more = len(missing) - SHOWN_MAX
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def wait_until_fully_replicated(state: ClusterState, timeout_s: float, what: str) -> float:
    """Seconds it took until no partition is under-replicated; ``RollingRestartError`` past
    ``timeout_s``, saying ``what`` was awaited and which partitions were still missing."""
    began = time.monotonic()
    while True:
        missing = under_replicated_partitions(state)
        if not missing:
            return time.monotonic() - began
        if time.monotonic() - began > timeout_s:
            raise RollingRestartError(
                f"{what}: {len(missing)} partitions still under-replicated after {timeout_s:.0f} "
                f"s: {_describe(missing)}"
            )
        time.sleep(POLL_S)


def _stop(member: cluster.Member, timeout_s: float) -> bool:
    """SIGTERM (controlled shutdown), SIGKILL past ``timeout_s``; True if it had to be killed."""
    if not cluster.kill(member, signal.SIGTERM):
        raise RollingRestartError(f"broker {member.id} (pid {member.pid}) is not running")
    deadline = time.monotonic() + timeout_s
    while member.is_ours():
        if time.monotonic() > deadline:
            return cluster.kill(member, signal.SIGKILL)
        time.sleep(POLL_S)
    return False


def _restart_one(
    data_dir: Path,
    state: ClusterState,
    broker_id: int,
    report: Callable[[Progress], None],
    isr_timeout_s: float,
    stop_timeout_s: float,
) -> RestartReport:
    began = time.monotonic()

    def step(phase: str, detail: str = "") -> float:
        elapsed_s = time.monotonic() - began
        report(Progress(broker_id, phase, elapsed_s, detail))
        return elapsed_s

    step("waiting", "for every partition to be fully replicated")
    wait_until_fully_replicated(
        state, isr_timeout_s, f"not restarting broker {broker_id}: the cluster is not in sync"
    )
    step("stopping", "SIGTERM: controlled shutdown")
    killed = _stop(state.member("broker", broker_id), stop_timeout_s)
    stopped_s = step(
        "stopped", f"killed after {stop_timeout_s:.0f} s" if killed else "exited cleanly"
    )
    member = cluster.restart_broker(data_dir, broker_id)
    started_s = step("started", f"pid {member.pid}")
    wait_until_fully_replicated(
        state, isr_timeout_s, f"broker {broker_id} restarted, but its replicas did not catch up"
    )
    in_sync_s = step("in-sync", "no partition under-replicated")
    return RestartReport(broker_id, stopped_s, killed, started_s, in_sync_s)


def rolling_restart(
    data_dir: Path,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    isr_timeout_s: float = ISR_TIMEOUT_S,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> list[RestartReport]:
    """Restart every broker of the cluster in ``data_dir`` in turn (see the module docstring)."""
    data_dir = data_dir.absolute()
    state = ClusterState.read(data_dir)
    if state is None:
        raise RollingRestartError(f"no cluster in {data_dir}")
    report = on_progress or (lambda progress: None)
    reports = []
    for broker_id in sorted(m.id for m in state.members if m.role == "broker"):
        state = ClusterState.read(data_dir) or state  # each restart records a new pid
        reports.append(
            _restart_one(data_dir, state, broker_id, report, isr_timeout_s, stop_timeout_s)
        )
    return reports
