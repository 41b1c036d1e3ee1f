"""Issue 23, scenario 7, on broker processes: an acks=all produce whose producer disconnects
while it waits for replication, then whose ISR falls below min.insync.replicas, leaves no
"Future exception was never retrieved: NotEnoughReplicasAfterAppendError" in the leader's log
(asyncio's report of a bug)."""

from __future__ import annotations

import os
import signal
import socket
import time
from datetime import timedelta

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local import cluster
from odradek.protocol.apis import ApiKey
from support.raw_socket import send
from support.requests import entry_type, fill, request
from support.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "left-behind"
VERSION = 7
WAIT_S = 30.0
OVERRIDES = {
    "default.replication.factor": "2",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "200",
}
NO_REBALANCE = {"auto.leader.rebalance.enable": "false"}


def _isr(state) -> tuple[int, ...]:
    found = cluster.partition_state(state, TOPIC, 0)
    return () if found is None else tuple(found.isr)


def test_a_delayed_produce_whose_producer_left_logs_no_unretrieved_exception(
    tmp_path, local_cluster, kafka_batch
):
    with local_cluster(
        tmp_path, brokers=2, broker_overrides=OVERRIDES, controller_overrides=NO_REBALANCE
    ) as state:
        admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2]])])[
            TOPIC
        ].result(WAIT_S)
        wait_until(lambda: len(_isr(state)) == 2, "a full ISR", WAIT_S)
        leader, follower = state.member("broker", 1), state.member("broker", 2)
        produce_type = type(request(ApiKey.PRODUCE, VERSION))
        topic_type = entry_type(produce_type, "topic_data")
        partition_type = entry_type(produce_type, "topic_data", "partition_data")
        produce = request(
            ApiKey.PRODUCE,
            VERSION,
            acks=-1,
            timeout=timedelta(seconds=WAIT_S),
            topic_data=(
                fill(
                    topic_type,
                    name=TOPIC,
                    partition_data=(
                        fill(partition_type, index=0, records=kafka_batch([(b"k", b"v")])),
                    ),
                ),
            ),
        )
        os.kill(follower.pid, signal.SIGSTOP)  # the follower stops fetching: the HW stays
        try:
            host, port = leader.address.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
                send(sock, produce, correlation_id=1)
                time.sleep(0.5)  # appended; its answer waits for the follower
            started = time.monotonic()  # the producer is gone; the ISR shrinks to the leader
            wait_until(lambda: _isr(state) == (1,), "the ISR shrunk to the leader", WAIT_S)
            shrunk_s = time.monotonic() - started
            time.sleep(1.0)  # the waiter completes with the ISR below min.insync.replicas
        finally:
            os.kill(follower.pid, signal.SIGCONT)
        with open(leader.log) as log:
            text = log.read()
        print(f"\nISR shrunk to the leader {shrunk_s:.1f} s after the producer left")
        assert "shrinking ISR" in text
        assert "never retrieved" not in text, text[text.find("never retrieved") - 500 :][:2000]
