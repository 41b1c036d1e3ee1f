"""Proves `odradek local up` gives new topics (and __consumer_offsets, __transaction_state) 3
replicas and min.insync.replicas 2 (fewer on a smaller cluster), and that a process started
through a launcher is identified once it execs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from odradek.local.cluster import ProcessIdentity, replication_defaults


@pytest.mark.parametrize(
    ("brokers", "replication_factor", "min_insync"),
    [(1, "1", "1"), (2, "2", "1"), (3, "3", "2"), (5, "3", "2")],
)
def test_replication_defaults_follow_the_cluster_size(brokers, replication_factor, min_insync):
    assert replication_defaults(brokers) == {
        "default.replication.factor": replication_factor,
        "min.insync.replicas": min_insync,
        "offsets.topic.replication.factor": replication_factor,
        "transaction.state.log.replication.factor": replication_factor,
        "transaction.state.log.min.isr": min_insync,
    }


def test_a_process_started_through_a_launcher_is_identified_by_its_final_command_line():
    # `env` execs python in turn, as `ip netns exec` does: the pid stays, the command changes.
    argv = [sys.executable, "-c", "import time; time.sleep(30)"]
    process = subprocess.Popen(["env", *argv])
    try:
        identity = ProcessIdentity.of_started(process.pid, argv)
        assert identity is not None
        assert identity.cmdline == tuple(argv)
    finally:
        process.kill()
        process.wait(timeout=10)
