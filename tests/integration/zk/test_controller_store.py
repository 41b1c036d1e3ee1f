"""The controller's ZooKeeper store with its writes pipelined (controller.pipelined), on a real
ZooKeeper: the partitions of a new topic all get their state znodes at once."""

from __future__ import annotations

import asyncio

import pytest

from odradek.controller.model import ClusterModel
from odradek.controller.pipelined import for_each
from odradek.controller.store import ControllerStore
from odradek.zk.paths import (
    CONTROLLER_EPOCH_PATH,
    PERSISTENT_PATHS,
    PartitionState,
    TopicAssignment,
    partition_state_path,
    topic_path,
)

pytestmark = pytest.mark.integration

PARTITIONS = 40


def test_pipelined_first_states_of_one_topic_race_for_its_parents_and_all_land(make_client):
    # Every partition's first write creates /brokers/topics/t/partitions if it is missing: with
    # several in flight, all but one find it made meanwhile (NodeExists), and must try again
    # without it rather than fail the controller event.
    zk = make_client()
    zk.ensure_paths(PERSISTENT_PATHS)
    zk.create(CONTROLLER_EPOCH_PATH, b"1")
    zk.create(topic_path("t"), TopicAssignment({p: (1,) for p in range(PARTITIONS)}).encode())
    store = ControllerStore(zk)
    model = ClusterModel(epoch=1, epoch_zk_version=0)
    state = PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)

    async def scenario() -> None:
        await for_each(
            [("t", p) for p in range(PARTITIONS)],
            lambda tp: store.write_state(model, tp, state),
        )

    asyncio.run(scenario())
    assert {tp: v for tp, v in model.state_versions.items()} == {
        ("t", p): 0 for p in range(PARTITIONS)
    }
    for p in range(PARTITIONS):
        data, _ = zk.get(partition_state_path("t", p))
        assert PartitionState.decode(data).isr == (1,)
