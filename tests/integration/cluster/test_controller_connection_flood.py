"""Issue 23 on real processes: idle connections from an outsider filling the controller's
``max.connections`` (its default, 1000) do not keep a broker from being answered: a broker's
new connection evicts the least recently used idle one that never carried a broker's request
(``connection_quotas``' ``evict_to_admit``), so ElectLeaders forwarded by a broker and a
broker's ControlledShutdown at a restart still reach the controller."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster
from support.raw_socket import closed, open_idle
from support.scraping import sample_total

pytestmark = pytest.mark.integration

MAX_CONNECTIONS = 1000  # the controller's default max.connections
FLOOD = MAX_CONNECTIONS + 100  # more than fit
TOPIC = "behind-the-flood"
WAIT_S = 30.0


def _elect(admin: AdminClient) -> float:
    """Seconds an ElectLeaders round trip through the broker to the controller takes."""
    started = time.monotonic()
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(
        timeout=WAIT_S
    )
    (error,) = results.values()
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED  # answered
    return time.monotonic() - started


def test_a_flood_of_idle_connections_does_not_keep_brokers_from_the_controller(
    tmp_path, local_cluster
):
    with local_cluster(tmp_path, brokers=1) as state:
        admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=WAIT_S)
        controller = next(m for m in state.members if m.role == "controller")
        flood = [open_idle(controller.address) for _ in range(FLOOD)]
        try:
            time.sleep(1.0)
            held = sum(not closed(s) for s in flood)
            assert held >= MAX_CONNECTIONS - 10, "the controller's listener is not full"
            elect_s = _elect(admin)
            # A restart: the broker's ControlledShutdown, then its registration and requests.
            broker = state.member("broker", 1)
            started = time.monotonic()
            cluster.stop_broker(tmp_path, 1)  # SIGTERM: a ControlledShutdown first
            cluster.restart_broker(tmp_path, 1)
            restart_s = time.monotonic() - started
            admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
            after_restart_s = _elect(admin)
            with open(broker.log) as log:
                stopped = [line for line in log if "controlled shutdown" in line]
            still_held = sum(not closed(s) for s in flood)
            evicted = sample_total(
                controller, "odradek_connections_evicted_total", listener="CONTROLLER"
            )
            rejected = sample_total(controller, "odradek_connections_rejected_total")
            print(
                f"\nwith {held} idle connections held at the controller "
                f"(max.connections {MAX_CONNECTIONS}, {FLOOD} opened): ElectLeaders answered in "
                f"{elect_s:.2f} s, the broker restarted in {restart_s:.1f} s, ElectLeaders "
                f"after it in {after_restart_s:.2f} s; {still_held} idle ones still held; the "
                f"controller counted {evicted:.0f} evicted, {rejected:.0f} refused"
            )
            # The flood's excess and each of the broker's new connections evicted one each.
            assert evicted >= FLOOD - MAX_CONNECTIONS, evicted
            assert rejected == 0, rejected
            assert any("controlled shutdown succeeded" in line for line in stopped), stopped
        finally:
            for s in flood:
                s.close()
