"""A whole local cluster (ZooKeeper, controllers, brokers: ``odradek local up``) for the length
of a ``with`` block, as the cluster-scoped fixtures of the test packages use it.

The cluster is started in ``data_dir`` (which must hold none yet) and stopped by PID at the end
(``odradek local down``); a member still running after that fails the test. Processes started
before a failed start are stopped too. Members are read back from the state file, so a broker a
test restarted is the one stopped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from odradek.local import cluster
from odradek.local.cluster import ClusterState

__all__ = ["running_cluster"]


@contextlib.contextmanager
def running_cluster(data_dir: Path, **options: Any) -> Iterator[ClusterState]:
    """``cluster.up(data_dir, **options)`` for the block, then down; none may survive it."""
    try:
        state, started = cluster.up(data_dir, **options)
    except BaseException:
        cluster.down(data_dir)  # whatever started before the failure
        raise
    try:
        assert started, f"a cluster was already running in {data_dir}"
        yield state
    finally:
        cluster.down(data_dir)
        latest = ClusterState.read(data_dir) or state
        members = {m.pid: m for m in (*state.members, *latest.members)}.values()
        survivors = [f"{m.role} {m.id} (pid {m.pid})" for m in members if m.is_ours()]
        assert not survivors, f"still running after down: {survivors}"
