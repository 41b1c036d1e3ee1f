"""Proves that the set-up script's ZooKeeper and Java start a real server on loopback.

It runs Debian's ZooKeeper (``ZooKeeperServerMain``) from ``odradek.local.zookeeper``, waits for
the ``srvr`` four-letter command to answer, stops the server by its PID and checks it is gone.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from odradek.local.zookeeper import (
    ZooKeeperProcess,
    ZooKeeperStartError,
    find_classpath,
    four_letter_word,
)

pytestmark = pytest.mark.integration

READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def test_zookeeper_answers_srvr_on_loopback_and_stops(tmp_path: Path) -> None:
    zookeeper = ZooKeeperProcess(tmp_path)
    zookeeper.start()
    pid = zookeeper.pid
    try:
        config = zookeeper.config_path.read_text()
        assert zookeeper.config_path.parent == tmp_path
        assert f"dataDir={tmp_path / 'data'}" in config
        assert "clientPortAddress=127.0.0.1" in config
        assert "admin.enableServer=false" in config
        assert "tickTime=2000" in config

        reply = zookeeper.wait_ready(timeout_s=READY_TIMEOUT_S)
        assert "Zookeeper version" in reply
        assert "Mode: standalone" in reply
        # A second query on a fresh connection, straight from the socket helper.
        assert "Zookeeper version" in four_letter_word(zookeeper.port, "srvr")
    finally:
        zookeeper.stop(grace_s=STOP_GRACE_S)

    assert not _pid_exists(pid), f"ZooKeeper (pid {pid}) survived stop()"
    assert not _port_accepts(zookeeper.port)
    assert not zookeeper.is_running()


def test_classpath_is_debians() -> None:
    # netty-codec (Debian's libnetty-java, a dependency of its zookeeper) for the TLS port
    assert find_classpath() == (
        "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:"
        "/usr/share/java/netty-codec.jar"
    )


def test_wait_ready_reports_a_server_that_exits(tmp_path: Path) -> None:
    # A classpath without ZooKeeper: java exits at once, and wait_ready says so without waiting.
    zookeeper = ZooKeeperProcess(tmp_path, classpath=str(tmp_path / "missing.jar"))
    zookeeper.start()
    try:
        with pytest.raises(ZooKeeperStartError, match="exited with code"):
            zookeeper.wait_ready(timeout_s=READY_TIMEOUT_S)
    finally:
        zookeeper.stop(grace_s=STOP_GRACE_S)
    assert not _pid_exists(zookeeper.pid)
