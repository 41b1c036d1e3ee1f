"""Issue 23, scenario 3, on a real three-broker cluster: idle client connections filling a
broker's max.connections do not keep a restarted follower out of its ISR, because followers
replicate over the INTERNAL listener, protected as KIP-402's inter-broker listener is."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster
from support.raw_socket import closed, open_idle
from support.waiting import wait_until

pytestmark = pytest.mark.integration

MAX_CONNECTIONS = 50
FLOOD = MAX_CONNECTIONS + 5  # more than fit: the last ones are refused
PARTITIONS = 3
WAIT_S = 30.0  # a restart and an ISR expansion on a loaded machine
OVERRIDES = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "max.connections": str(MAX_CONNECTIONS),
}
NO_REBALANCE = {"auto.leader.rebalance.enable": "false"}  # leaders stay where they are


def _isr_of(state, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """partition -> (leader, ISR), as the controller last wrote them."""
    found = {}
    for p in range(PARTITIONS):
        ps = cluster.partition_state(state, topic, p)
        if ps is not None:
            found[p] = (ps.leader, tuple(ps.isr))
    return found


def test_a_restarted_follower_rejoins_the_isr_while_idle_clients_fill_max_connections(
    tmp_path, local_cluster
):
    topic = "flooded"
    with local_cluster(
        tmp_path, brokers=3, broker_overrides=OVERRIDES, controller_overrides=NO_REBALANCE
    ) as state:
        admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
        admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=WAIT_S)
        full = wait_until(
            lambda: (
                (s := _isr_of(state, topic))
                and len(s) == PARTITIONS
                and all(len(isr) == 3 for _, isr in s.values())
                and s
            ),
            f"{topic} with full ISRs",
            WAIT_S,
        )
        flooded_id = full[0][0]  # the leader of partition 0 gets the flood
        follower_id = next(b for b in full[0][1] if b != flooded_id)
        led = [p for p, (leader, _) in full.items() if leader == flooded_id]
        producer = Producer({"bootstrap.servers": state.bootstrap_servers, "acks": "all"})
        for i in range(200):
            producer.produce(topic, b"x" * 100, partition=i % PARTITIONS)
        assert producer.flush(WAIT_S) == 0
        flooded = state.member("broker", flooded_id)

        flood = [open_idle(flooded.address) for _ in range(FLOOD)]
        try:
            time.sleep(1.0)  # refusals are immediate; let them land
            refused = sum(closed(s) for s in flood)
            assert refused >= FLOOD - MAX_CONNECTIONS, "the client listener is not full"

            cluster.stop_broker(tmp_path, follower_id)
            wait_until(
                lambda: all(follower_id not in isr for _, isr in _isr_of(state, topic).values()),
                f"broker {follower_id} out of the ISRs",
                WAIT_S,
            )
            # an attacker takes back at once the slots the stopped follower gave up
            top_up = [open_idle(flooded.address) for _ in range(FLOOD - MAX_CONNECTIONS)]
            flood += top_up
            time.sleep(1.0)
            assert any(closed(s) for s in top_up), "the client listener is not full again"
            started = time.monotonic()
            cluster.restart_broker(tmp_path, follower_id)
            wait_until(
                lambda: all(
                    follower_id in _isr_of(state, topic)[p][1]
                    for p in led
                    if _isr_of(state, topic)[p][0] == flooded_id
                ),
                f"broker {follower_id} back in the ISRs that broker {flooded_id} leads",
                WAIT_S,
            )
            rejoined_s = time.monotonic() - started
            held = sum(not closed(s) for s in flood)
            print(
                f"\nbroker {follower_id} rejoined the ISR of broker {flooded_id}'s partitions "
                f"{led} {rejoined_s:.1f} s after its restart began, with {held} idle client "
                f"connections held there (max.connections={MAX_CONNECTIONS}, {refused} refused)"
            )
            assert rejoined_s < WAIT_S
            assert held >= MAX_CONNECTIONS - 10  # the flood still holds its sockets
        finally:
            for s in flood:
                s.close()
