"""Fixtures for tests with real processes: one ZooKeeper server per module, a chroot per test,
and whole clusters of processes (``local_cluster``)."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.local.cluster import ClusterState
from odradek.local.zookeeper import ZooKeeperProcess
from support.clusters import running_cluster

TICK_TIME_MS = 200  # short ticks: sessions expire within seconds in tests
# `odradek local up` gives new topics 3 replicas and min.insync.replicas 2; the tests here
# that do not test replication pin one replica, so each keeps its cluster small and quick.
# A test that wants replication says so in its broker_overrides.
UNREPLICATED = {"default.replication.factor": "1", "min.insync.replicas": "1"}


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper server for the module, stopped by its PID at the end."""
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), tick_time_ms=TICK_TIME_MS)
    server.start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def hosts(zookeeper: ZooKeeperProcess, request: pytest.FixtureRequest) -> str:
    """A connect string with a chroot of this test's own, so tests never see each other."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    return f"{zookeeper.connect_string}/{name}-{uuid.uuid4().hex[:8]}"


def _running_cluster(
    data_dir: Path, **options: Any
) -> contextlib.AbstractContextManager[ClusterState]:
    options["broker_overrides"] = {**UNREPLICATED, **(options.get("broker_overrides") or {})}
    return running_cluster(data_dir, **options)


@pytest.fixture(scope="session")
def local_cluster() -> Callable[..., contextlib.AbstractContextManager[ClusterState]]:
    """``with local_cluster(data_dir, brokers=3, controllers=1, broker_overrides={...}):``

    ZooKeeper, controllers and brokers as real processes on 127.0.0.1 (``odradek local up``),
    stopped by PID at the end (``odradek local down``), which must leave none of them running.
    New topics get one replica (``UNREPLICATED``) unless ``broker_overrides`` say otherwise.
    """
    return _running_cluster
