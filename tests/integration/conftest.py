"""Fixtures for tests with real processes: one ZooKeeper server per module, a chroot per test."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from odradek.local.zookeeper import ZooKeeperProcess

TICK_TIME_MS = 200  # short ticks: sessions expire within seconds in tests


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
