"""`odradek local down` signals only the processes its cluster started, never a reused PID.

The state file names the PID of an unrelated process the test started (``sleep``), as happens
when a member died and the kernel gave its PID to something else: `down` must leave it alone.
Every process here is stopped by its own PID at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.local import cluster
from odradek.local.cluster import STATE_FILE, ClusterState, Member, ProcessIdentity

pytestmark = pytest.mark.integration

WAIT_S = 20.0


@pytest.fixture
def sleeper():
    process = subprocess.Popen(["sleep", "60"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=WAIT_S)


def _state_file(data_dir: Path, member: dict) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "data_dir": str(data_dir),
        "zookeeper_connect": "127.0.0.1:1/odradek",
        "bootstrap_servers": "127.0.0.1:1",
        "members": [member],
    }
    (data_dir / STATE_FILE).write_text(json.dumps(state))


def _member(pid: int, data_dir: Path) -> dict:
    return {
        "role": "broker",
        "id": 1,
        "pid": pid,
        "address": "127.0.0.1:1",
        "admin": None,
        "data_dir": str(data_dir),
        "log": str(data_dir / "broker.log"),
    }


def _alive_after_down(process: subprocess.Popen, data_dir: Path) -> bool:
    cluster.down(data_dir)
    try:
        process.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        return True
    return False


def test_a_pid_recorded_without_its_process_identity_is_not_signalled(sleeper, tmp_path, caplog):
    _state_file(tmp_path, _member(sleeper.pid, tmp_path))
    assert _alive_after_down(sleeper, tmp_path)
    assert f"not signalling pid {sleeper.pid}" in caplog.text


def test_a_reused_pid_is_not_signalled(sleeper, tmp_path, caplog):
    """The member was a broker started at another time; its PID now belongs to `sleep`."""
    now = ProcessIdentity.of_started(sleeper.pid)
    recorded = {
        **_member(sleeper.pid, tmp_path),
        "start_ticks": now.start_ticks - 1,
        "cmdline": [sys.executable, "-m", "odradek.cli", "broker"],
    }
    _state_file(tmp_path, recorded)
    assert _alive_after_down(sleeper, tmp_path)
    assert f"not signalling pid {sleeper.pid}" in caplog.text
    # A start time that matches is not enough either: the command line must too.
    _state_file(tmp_path, {**recorded, "start_ticks": now.start_ticks})
    assert _alive_after_down(sleeper, tmp_path)


def test_the_process_a_member_started_is_stopped(sleeper, tmp_path):
    member = Member(**_member(sleeper.pid, tmp_path))
    member.identify()
    assert member.cmdline == ["sleep", "60"] and member.is_ours()
    ClusterState(str(tmp_path), "127.0.0.1:1", "127.0.0.1:1", [member]).write(tmp_path)
    assert not _alive_after_down(sleeper, tmp_path)
