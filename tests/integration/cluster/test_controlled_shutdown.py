"""SIGTERM makes a broker ask the controller to move what it holds before it stops (controlled
shutdown), a partition only it has in sync is reported and the broker stops anyway after its
retries, and with no controller answering it stops anyway too, within a bounded time.

Real processes on 127.0.0.1 (``odradek local up``): ZooKeeper, one controller, brokers. What the
broker did is read from its log, what the controller decided from ZooKeeper, its log and its
``/metrics``. Every process is stopped by its PID (``local_cluster``).
"""

from __future__ import annotations

import signal
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster
from odradek.local.cluster import ClusterState
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
POLL_S = 0.1
ADMIN_TIMEOUT_S = 15.0
RETRIES = 2
BACKOFF_MS = 500
REQUEST_TIMEOUT_MS = 1_500
SHUTDOWN_OVERRIDES = {
    "controlled.shutdown.max.retries": str(RETRIES),
    "controlled.shutdown.retry.backoff.ms": str(BACKOFF_MS),
    "controller.socket.timeout.ms": str(REQUEST_TIMEOUT_MS),
}
# Attempts x (request timeout + backoff), and the stop itself, on a loaded machine.
STOP_BOUND_S = RETRIES * (REQUEST_TIMEOUT_MS + BACKOFF_MS) / 1000 + 15.0


def _create_topic(state: ClusterState, topic: str, partitions: int, replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(ADMIN_TIMEOUT_S)
    wait_until(
        lambda: all(
            (s := cluster.partition_state(state, topic, p)) is not None
            and s.leader >= 0
            and len(s.isr) == replicas
            for p in range(partitions)
        ),
        f"{topic} led with a full ISR",
        WAIT_S,
        poll_s=POLL_S,
    )


def _sigterm_and_wait(state: ClusterState, broker_id: int) -> float:
    """SIGTERM one broker by its pid; seconds until it exited (bounded)."""
    member = state.member("broker", broker_id)
    began = time.monotonic()
    assert cluster.kill(member, signal.SIGTERM)
    wait_until(
        lambda: not member.is_ours(), f"broker {broker_id} to exit", STOP_BOUND_S, poll_s=POLL_S
    )
    return time.monotonic() - began


def _log(member: cluster.Member) -> str:
    return Path(member.log).read_text(errors="replace")


def _controller_metric(state: ClusterState, name: str) -> float:
    controller = next(m for m in state.members if m.role == "controller")
    with urllib.request.urlopen(f"http://{controller.admin}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_sigterm_moves_the_leaderships_to_the_isr_before_the_broker_stops(tmp_path, local_cluster):
    overrides = {"default.replication.factor": "3", "min.insync.replicas": "2"}
    with local_cluster(tmp_path, brokers=3, broker_overrides=overrides) as state:
        _create_topic(state, "orders", 6, 3)
        led = [p for p in range(6) if cluster.partition_state(state, "orders", p).leader == 1]
        assert led, "broker 1 leads nothing: placement changed?"
        _sigterm_and_wait(state, 1)
        log = _log(state.member("broker", 1))
        assert "broker 1 shutting down (controlled)" in log
        assert "controlled shutdown succeeded after 1 attempt(s)" in log
        for p in range(6):
            after = cluster.partition_state(state, "orders", p)
            assert after.leader in (2, 3) and 1 not in after.isr, (p, after)
        assert _controller_metric(state, "odradek_controller_controlled_shutdowns_total") == 1
        assert (
            _controller_metric(
                state, "odradek_controller_controlled_shutdown_unmoved_partitions_total"
            )
            == 0
        )


def test_a_partition_only_the_stopping_broker_has_in_sync_is_reported_then_it_stops_anyway(
    tmp_path, local_cluster
):
    overrides = {
        "default.replication.factor": "2",
        "min.insync.replicas": "1",
        **SHUTDOWN_OVERRIDES,
    }
    with local_cluster(tmp_path, brokers=2, broker_overrides=overrides) as state:
        _create_topic(state, "lonely", 1, 2)
        leader = cluster.partition_state(state, "lonely", 0).leader
        follower = 3 - leader
        # The follower stops first (controlled: it leaves the ISR), so only the leader is in sync.
        _sigterm_and_wait(state, follower)
        wait_until(
            lambda: cluster.partition_state(state, "lonely", 0).isr == (leader,),
            f"ISR of lonely-0 down to {leader}",
            WAIT_S,
            poll_s=POLL_S,
        )
        took_s = _sigterm_and_wait(state, leader)
        log = _log(state.member("broker", leader))
        assert f"controlled shutdown attempt {RETRIES} failed" in log
        assert (
            f"proceeding to stop without a completed controlled shutdown after {RETRIES} "
            "attempt(s)" in log
        )
        assert "still leading 1 partitions: lonely-0" in log
        assert took_s >= (RETRIES - 1) * BACKOFF_MS / 1000  # it waited between its attempts
        controller = next(m for m in state.members if m.role == "controller")
        assert f"lonely-0 (ISR [{leader}])" in _log(controller)
        assert (
            _controller_metric(
                state, "odradek_controller_controlled_shutdown_unmoved_partitions_total"
            )
            == RETRIES
        )


def test_with_no_controller_answering_the_broker_stops_after_its_retries(tmp_path, local_cluster):
    with local_cluster(tmp_path, brokers=1, broker_overrides=SHUTDOWN_OVERRIDES) as state:
        controller = next(m for m in state.members if m.role == "controller")
        assert cluster.kill(controller, signal.SIGKILL)
        wait_until(lambda: not controller.is_ours(), "the controller gone", WAIT_S, poll_s=POLL_S)
        took_s = _sigterm_and_wait(state, 1)
        log = _log(state.member("broker", 1))
        for attempt in range(1, RETRIES + 1):
            assert f"controlled shutdown attempt {attempt} failed" in log
        assert (
            f"proceeding to stop without a completed controlled shutdown after {RETRIES} "
            "attempt(s)" in log
        )
        assert took_s >= (RETRIES - 1) * BACKOFF_MS / 1000
        assert took_s < STOP_BOUND_S
