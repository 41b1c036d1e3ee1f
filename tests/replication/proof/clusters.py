"""The proofs' cluster plumbing: a cluster of real processes stopped by pid whatever happens,
and a bounded wait for a condition on it.

``running_cluster`` is ``odradek local up`` with two controllers (so that one can be killed)
and the proofs' ZooKeeper tick; at the end ``odradek local down`` stops every member by pid,
including brokers added or restarted meanwhile (read back from the state file), and fails the
test if any is still running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from odradek.local.cluster import ClusterState
from support import clusters as shared
from support import waiting

T = TypeVar("T")

ZK_TICK_MS = 500  # ZooKeeper allows sessions of 2 to 20 ticks: 1 to 10 s
CONTROLLERS = 2
WAIT_S = 60.0  # the longest a step waits for the cluster (a loaded 2-core machine)


def wait_until(condition: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    """``support.waiting.wait_until``, with the proofs' bound by default."""
    return waiting.wait_until(condition, what, timeout_s)


@contextlib.contextmanager
def running_cluster(
    data_dir: Path,
    brokers: int,
    *,
    broker_overrides: Mapping[str, str],
    controller_overrides: Mapping[str, str],
    **options: Any,
) -> Iterator[ClusterState]:
    """``odradek local up`` (its replication defaults unless overridden), down at the end."""
    with shared.running_cluster(
        data_dir,
        brokers=brokers,
        controllers=CONTROLLERS,
        broker_overrides=broker_overrides,
        controller_overrides=controller_overrides,
        zookeeper_tick_time_ms=ZK_TICK_MS,
        **options,
    ) as state:
        yield state
