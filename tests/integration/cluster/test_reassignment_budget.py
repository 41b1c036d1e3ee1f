"""A reassignment that would put more replicas on a broker than its replica budget is refused by
the controller (INVALID_REPLICA_ASSIGNMENT, saying which broker and max.broker.partitions) before
anything is written, on two real brokers with a budget of a few replicas; the partitions of the
same request that fit move, and `odradek reassign`'s path (ops.execute) reports why.

Each broker's budget is ``max.broker.partitions`` here (the lower of it and what the open-files
limit allows: ``broker.replica_budget``), registered in ``/brokers/ids/<id>``."""

from __future__ import annotations

import asyncio

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidReplicationAssignmentError
from kazoo.client import KazooClient

from odradek import ops
from odradek.client.admin import ClusterClient
from odradek.ops.cluster import read_cluster
from odradek.zk.paths import TopicAssignment, topic_path
from support.waiting import wait_until

pytestmark = pytest.mark.integration

BUDGET = 8  # max.broker.partitions of each broker
OVERRIDES = {"max.broker.partitions": str(BUDGET)}
PARTITIONS = 6  # "left" all on broker 1, "right" all on broker 2
WAIT_S = 60.0


def _assignment(zk: KazooClient, topic: str) -> TopicAssignment:
    data, _ = zk.get(topic_path(topic))
    return TopicAssignment.decode(data, topic_path(topic))


def test_a_reassignment_past_a_brokers_budget_is_refused_before_anything_is_written(
    tmp_path, local_cluster
):
    with local_cluster(tmp_path / "cluster", brokers=2, broker_overrides=OVERRIDES) as state:
        admin = KafkaAdminClient(bootstrap_servers=state.bootstrap_servers)
        zk = KazooClient(hosts=state.zookeeper_connect)
        zk.start(timeout=WAIT_S)
        try:
            admin.create_topics(
                [
                    NewTopic("left", replica_assignments={p: [1] for p in range(PARTITIONS)}),
                    NewTopic("right", replica_assignments={p: [2] for p in range(PARTITIONS)}),
                ]
            )
            # broker 2 hosts 6 of its 8: two more fit, in one request with the third that does not
            left = [TopicPartition("left", p) for p in range(3)]
            answered = admin.alter_partition_reassignments({tp: [2] for tp in left})
            print(f"left-0..2 to broker 2 (budget {BUDGET}, hosting {PARTITIONS}): {answered}")
            assert answered[left[0]] is None and answered[left[1]] is None
            assert answered[left[2]] is InvalidReplicationAssignmentError
            assert _assignment(zk, "left").partitions[2] == (1,)  # nothing written for it
            wait_until(
                lambda: not admin.list_partition_reassignments(),
                "the two that fit moved",
                WAIT_S,
            )
            moved = _assignment(zk, "left").partitions
            assert moved[0] == moved[1] == (2,) and moved[2] == (1,)

            # Through `odradek reassign`'s path: the controller's words reach the operator.
            view = asyncio.run(_view(state.bootstrap_servers))
            plan = ops.Plan(
                (ops.PartitionMove("left", 2, view.partitions[("left", 2)].replicas, (2,)),)
            )
            with pytest.raises(ops.ClusterRequestError) as refused:
                asyncio.run(ops.execute(state.bootstrap_servers, plan))
            error, message = refused.value.refusals["left-2"]
            print(f"odradek reassign of left-2 to broker 2: {error.name}: {message}")
            assert error.name == "invalid_replica_assignment"
            assert "Broker 2" in message and "max.broker.partitions" in message
            assert _assignment(zk, "left").partitions[2] == (1,)
            assert not admin.list_partition_reassignments()

            # Room on broker 1 (it hosts 4 now): a move there is accepted and completes.
            right = TopicPartition("right", 0)
            assert admin.alter_partition_reassignments({right: [1]}) == {right: None}
            wait_until(
                lambda: _assignment(zk, "right").partitions[0] == (1,),
                "right-0 on broker 1",
                WAIT_S,
            )
        finally:
            zk.stop()
            zk.close()
            admin.close()


async def _view(bootstrap: str) -> ops.ClusterView:
    async with ClusterClient(bootstrap) as client:
        return await read_cluster(client)
