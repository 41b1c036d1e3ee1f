"""The controller's events without ZooKeeper: election, topic creation, broker departure (clean,
none alive, unclean only when the topic allows it), arrival, bounce, deletion and fencing, each
checked in the store's writes, the state tables and the requests sent."""

from __future__ import annotations

import asyncio
import logging

import pytest
from controller_doubles import partition_states

from odradek.controller.states import PartitionState, ReplicaState
from odradek.zk.paths import PartitionState as LeaderAndIsr

T = "orders"


def run(coroutine):
    return asyncio.run(coroutine)


def _leader_and_isr(channel, sent):
    return [(b, r) for b, r in sent if type(r).__name__ == "LeaderAndIsrRequest"]


def _update_metadata(channel, sent):
    return [(b, r) for b, r in sent if type(r).__name__ == "UpdateMetadataRequest"]


def test_a_new_topic_gets_its_first_live_replica_as_leader_and_new_replicas(harness):
    async def scenario():
        await harness.start()
        harness.channel.take()
        harness.store.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1)})
        await harness.settle()
        assert harness.state(T, 0) == (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0)
        assert harness.state(T, 1) == (LeaderAndIsr(2, 0, (2, 3, 1), 1), 0)
        model = harness.model
        assert model.partition_states.get((T, 0)) is PartitionState.ONLINE
        assert all(model.replica_states.get(((T, 0), b)) is ReplicaState.ONLINE for b in (1, 2, 3))
        sent = harness.channel.take()
        lai = _leader_and_isr(harness.channel, sent)
        assert sorted(b for b, _ in lai) == [1, 2, 3]
        for broker_id, request in lai:
            assert request.broker_epoch == harness.store.brokers[broker_id].epoch
            states = partition_states(request)
            assert set(states) == {(T, 0), (T, 1)}
            assert all(s.is_new for s in states.values())
            assert states[(T, 0)].partition_epoch == 0
        um = _update_metadata(harness.channel, sent)
        assert sorted(b for b, _ in um) == [1, 2, 3]
        # Kafka's order for one broker: LeaderAndIsr before UpdateMetadata.
        first = [type(r).__name__ for b, r in sent if b == 1]
        assert first == ["LeaderAndIsrRequest", "UpdateMetadataRequest"]

    run(scenario())


def test_a_partition_without_a_live_replica_stays_new_until_one_arrives(harness):
    async def scenario():
        await harness.start(brokers=(1, 2))
        harness.store.create_topic(T, {0: (3,)})
        await harness.settle()
        assert (T, 0) not in harness.store.states
        assert harness.model.partition_states.get((T, 0)) is PartitionState.NEW
        harness.channel.take()
        harness.store.register_broker(3)
        await harness.settle()
        assert harness.state(T, 0) == (LeaderAndIsr(3, 0, (3,), 1), 0)
        assert harness.model.partition_states.get((T, 0)) is PartitionState.ONLINE
        lai = _leader_and_isr(harness.channel, harness.channel.take())
        assert [b for b, _ in lai] == [3]
        assert partition_states(lai[0][1])[(T, 0)].is_new

    run(scenario())


def test_a_dead_leader_is_replaced_from_the_isr_which_loses_it(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        harness.channel.take()
        harness.store.unregister_broker(1)
        await harness.settle()
        state, version = harness.state(T, 0)
        assert state == LeaderAndIsr(2, 1, (2, 3), 1)
        assert version == 1  # one write: the election already left broker 1 out of the ISR
        assert harness.model.partition_states.get((T, 0)) is PartitionState.ONLINE
        assert harness.model.replica_states.get(((T, 0), 1)) is ReplicaState.OFFLINE
        sent = harness.channel.take()
        lai = _leader_and_isr(harness.channel, sent)
        assert sorted(b for b, _ in lai) == [2, 3]
        assert partition_states(lai[0][1])[(T, 0)].leader == 2
        assert partition_states(lai[0][1])[(T, 0)].partition_epoch == 1
        um = _update_metadata(harness.channel, sent)
        assert sorted(b for b, _ in um) == [2, 3]
        assert [b.id_ for b in um[0][1].live_brokers] == [2, 3]

    run(scenario())


def test_a_dead_follower_leaves_the_isr_with_a_new_leader_epoch(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        harness.channel.take()
        harness.store.unregister_broker(3)
        await harness.settle()
        assert harness.state(T, 0) == (LeaderAndIsr(1, 1, (1, 2), 1), 1)
        lai = _leader_and_isr(harness.channel, harness.channel.take())
        assert sorted(b for b, _ in lai) == [1, 2]  # the old leader epoch is fenced

    run(scenario())


def test_with_no_live_isr_replica_the_partition_goes_offline_keeping_its_last_isr_member(
    harness, caplog
):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2)})
        await harness.settle()
        harness.store.unregister_broker(2)  # ISR (1, 2) -> (1,)
        await harness.settle()
        assert harness.state(T, 0)[0] == LeaderAndIsr(1, 1, (1,), 1)
        harness.store.register_broker(2)  # back, but not in the ISR (nothing re-added it)
        await harness.settle()
        harness.store.unregister_broker(1)
        with caplog.at_level(logging.WARNING):
            await harness.settle()
        # Broker 2 is live but out of the ISR, and unclean election is off: no leader.
        assert harness.state(T, 0)[0] == LeaderAndIsr(-1, 2, (1,), 1)
        assert harness.model.partition_states.get((T, 0)) is PartitionState.OFFLINE
        assert harness.metrics.offline_partitions._value.get() == 1
        assert harness.metrics.unclean_leader_elections._value.get() == 0
        assert "stays offline" in caplog.text
        # The last ISR member returns: a clean election makes it leader again.
        harness.store.register_broker(1)
        await harness.settle()
        assert harness.state(T, 0)[0] == LeaderAndIsr(1, 3, (1,), 1)
        assert harness.model.partition_states.get((T, 0)) is PartitionState.ONLINE
        assert harness.metrics.offline_partitions._value.get() == 0

    run(scenario())


@pytest.mark.parametrize(
    ("controller_default", "topic_override", "unclean"),
    [
        (False, None, False),
        (False, "true", True),
        (True, None, True),
        (True, "false", False),
    ],
)
def test_unclean_election_only_when_the_topic_allows_it_logged_and_counted(
    make_harness, caplog, controller_default, topic_override, unclean
):
    harness = make_harness(unclean_leader_election_enable=controller_default)

    async def scenario():
        await harness.start(brokers=(1,))
        config = (
            {} if topic_override is None else {"unclean_leader_election_enable": topic_override}
        )
        harness.store.create_topic(T, {0: (1, 2)}, **config)
        await harness.settle()
        assert harness.state(T, 0)[0].isr == (1,)  # 2 was not live at creation
        harness.store.register_broker(2)
        await harness.settle()
        harness.store.unregister_broker(1)
        with caplog.at_level(logging.WARNING):
            await harness.settle()
        state = harness.state(T, 0)[0]
        if unclean:
            assert state == LeaderAndIsr(2, 1, (2,), 1)
            assert harness.metrics.unclean_leader_elections._value.get() == 1
            assert "unclean leader election for orders-0" in caplog.text
        else:
            assert state == LeaderAndIsr(-1, 1, (1,), 1)
            assert harness.metrics.unclean_leader_elections._value.get() == 0

    run(scenario())


def test_a_returning_preferred_leader_takes_its_partition_back_when_in_the_isr(harness):
    async def scenario():
        await harness.start(brokers=(1, 2))
        harness.store.create_topic(T, {0: (1,), 1: (2,)})
        await harness.settle()
        harness.store.unregister_broker(1)
        await harness.settle()
        assert harness.state(T, 0)[0] == LeaderAndIsr(-1, 1, (1,), 1)
        harness.channel.take()
        epoch = harness.store.register_broker(1)
        await harness.settle()
        assert harness.state(T, 0)[0] == LeaderAndIsr(1, 2, (1,), 1)
        sent = harness.channel.take()
        # The arriving broker gets the whole state: every partition in UpdateMetadata...
        um = dict(_update_metadata(harness.channel, sent))
        assert set(um) == {1, 2}
        assert set(partition_states(um[1])) == {(T, 0), (T, 1)}
        # ...and LeaderAndIsr for its own, under its broker epoch.
        lai = _leader_and_isr(harness.channel, sent)
        assert {b for b, _ in lai} == {1}
        assert all(r.broker_epoch == epoch for _, r in lai)
        assert harness.model.replica_states.get(((T, 0), 1)) is ReplicaState.ONLINE

    run(scenario())


def test_a_bounced_broker_leaves_and_arrives_and_hears_under_its_new_epoch(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2)})
        await harness.settle()
        old_epoch = harness.store.brokers[1].epoch
        harness.channel.take()
        new_epoch = harness.store.register_broker(1)  # a new session, before any departure
        await harness.settle()
        assert new_epoch != old_epoch
        # As Kafka treats a bounced broker: it failed (leadership moved, it left the ISR)...
        assert harness.state(T, 0)[0] == LeaderAndIsr(2, 1, (2,), 1)
        # ...and started: the full state, under the new broker epoch.
        sent = harness.channel.take()
        to_1 = [r for b, r in sent if b == 1]
        assert to_1 and all(r.broker_epoch == new_epoch for r in to_1)
        assert "LeaderAndIsrRequest" in [type(r).__name__ for r in to_1]
        assert harness.model.broker_epochs[1] == new_epoch

    run(scenario())


def test_partitions_added_later_are_initialised(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2)})
        await harness.settle()
        harness.store.add_partitions(T, {1: (3, 1)})
        await harness.settle()
        assert harness.state(T, 1) == (LeaderAndIsr(3, 0, (3, 1), 1), 0)
        assert harness.state(T, 0)[1] == 0  # untouched

    run(scenario())


def test_a_deleted_topic_is_stopped_forgotten_and_gone_from_the_store(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2)})
        await harness.settle()
        harness.store.unregister_broker(2)
        await harness.settle()
        harness.channel.take()
        harness.store.request_deletion(T)
        await harness.settle()
        sent = harness.channel.take()
        stops = [(b, r) for b, r in sent if type(r).__name__ == "StopReplicaRequest"]
        assert [b for b, _ in stops] == [1]
        assert stops[0][1].topic_states[0].partition_states[0].delete_partition
        um = _update_metadata(harness.channel, sent)
        assert partition_states(um[0][1])[(T, 0)].leader == -2
        assert T not in harness.store.topics and (T, 0) not in harness.store.states
        model = harness.model
        assert model.partition_states.get((T, 0)) is PartitionState.NON_EXISTENT
        assert len(model.replica_states) == 0 and T not in model.topics

    run(scenario())


def test_a_controller_whose_epoch_was_superseded_writes_nothing_and_steps_down(harness):
    async def scenario():
        await harness.start()
        harness.store.another_controller_elected()
        harness.store.create_topic(T, {0: (1,)})
        await harness.settle()
        assert (T, 0) not in harness.store.states
        assert harness.controller.model is None
        assert harness.channel.live == set()
        assert harness.metrics.active._value.get() == 0

    run(scenario())


def test_a_failover_controller_adopts_the_states_it_finds(make_harness):
    first = make_harness()

    async def scenario():
        await first.start()
        first.store.create_topic(T, {0: (1, 2, 3)})
        await first.settle()
        first.store.unregister_broker(1)
        await first.settle()
        # A second controller on the same store (ZooKeeper) wins the next epoch.
        second = make_harness()
        second.store = first.store
        second.controller.store = first.store
        second.controller.partition_machine.store = first.store
        second.controller.replica_machine.store = first.store
        second.election.store = first.store
        second.controller.loop = asyncio.get_running_loop()
        second.election.win(2)
        await second.settle()
        assert second.model.partition_states.get((T, 0)) is PartitionState.ONLINE
        assert second.model.states[(T, 0)] == LeaderAndIsr(2, 1, (2, 3), 1)
        assert second.model.state_versions[(T, 0)] == 1
        assert second.model.replica_states.get(((T, 0), 1)) is ReplicaState.DELETION_INELIGIBLE
        lai = [b for b, r in second.channel.sent if type(r).__name__ == "LeaderAndIsrRequest"]
        assert sorted(lai) == [2, 3]
        # The first one is fenced now.
        first.store.unregister_broker(2)
        await first.settle()
        assert first.controller.model is None

    run(scenario())


def test_watch_events_fired_together_run_once(harness):
    async def scenario():
        await harness.start(brokers=(1,))
        for broker_id in (2, 3):
            harness.store.register_broker(broker_id)  # the second finds no armed watch
        ran = await harness.settle()
        assert ran == 1
        assert harness.model.live_broker_ids == {1, 2, 3}

    run(scenario())


def test_a_new_topic_whose_state_znode_exists_keeps_that_state(harness):
    async def scenario():
        await harness.start()
        # The previous controller wrote the state, then died before telling the brokers.
        harness.store.states[(T, 0)] = (LeaderAndIsr(2, 3, (2, 3), 1), 4)
        harness.channel.take()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        assert harness.state(T, 0) == (LeaderAndIsr(2, 3, (2, 3), 1), 4)
        assert harness.model.partition_states.get((T, 0)) is PartitionState.ONLINE
        lai = _leader_and_isr(harness.channel, harness.channel.take())
        assert sorted(b for b, _ in lai) == [1, 2, 3]
        state = partition_states(lai[0][1])[(T, 0)]
        assert (state.leader, state.leader_epoch, state.partition_epoch, state.is_new) == (
            2,
            3,
            4,
            True,
        )

    run(scenario())
