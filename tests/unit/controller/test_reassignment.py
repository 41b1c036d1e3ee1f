"""Partition reassignment (KIP-455) in the controller without ZooKeeper: every phase (start,
catch-up, finish on an ISR change, cancel, a new target replacing one, resume after failover and
after a broker returns), every refusal, ListPartitionReassignments and the metrics, checked in
the store's writes, the state tables and the requests sent."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from controller_doubles import (
    FakeElection,
    RecordingChannel,
    alter_request,
    element_type,
    list_request,
    partition_states,
    serve,
)

from odradek.controller.controller import Controller
from odradek.controller.model import BrokerRegistration, ReplicaAssignment, topic_uuid
from odradek.controller.states import ReplicaState
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.zk.paths import PartitionState as LeaderAndIsr

T = "orders"
TP = (T, 0)


def run(coroutine):
    return asyncio.run(coroutine)


def isr_request(harness, leader: int, isr: tuple[int, ...], tp=TP):
    """AlterPartition v2 from ``leader`` asking for ``isr`` at the current epochs."""
    request_type = schemas.request_schema(ApiKey.ALTER_PARTITION, 2)
    topic_type = element_type(request_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    state, version = harness.store.states[tp]
    return request_type(
        broker_id=leader,
        broker_epoch=harness.store.brokers[leader].epoch,
        topics=(
            topic_type(
                topic_id=topic_uuid(harness.store.topics[tp[0]].topic_id),
                partitions=(
                    partition_type(
                        partition_index=tp[1],
                        leader_epoch=state.leader_epoch,
                        new_isr=isr,
                        leader_recovery_state=0,
                        partition_epoch=version,
                    ),
                ),
            ),
        ),
    )


async def answer(harness, call):
    """Run a request through ``Controller.decide`` while the harness processes events."""
    answering = asyncio.ensure_future(call)
    await harness.settle()
    return await asyncio.wait_for(answering, 5)


async def alter(harness, targets: dict, version: int = 0, **fields):
    response = await answer(
        harness,
        serve(harness.controller, alter_request(targets, version, **fields)),
    )
    await harness.settle()  # the watch fired by the assignment write, and what follows
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }


async def isr_change(harness, leader: int, isr: tuple[int, ...], tp=TP):
    response = await answer(
        harness, serve(harness.controller, isr_request(harness, leader, isr, tp))
    )
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    await harness.settle()


async def listed(harness, topics=None):
    response = await answer(harness, serve(harness.controller, list_request(topics)))
    assert response.error_code == ErrorCode.none
    return {
        (t.name, p.partition_index): (
            tuple(p.replicas),
            tuple(p.adding_replicas),
            tuple(p.removing_replicas),
        )
        for t in response.topics
        for p in t.partitions
    }


def assignment(harness, tp=TP) -> ReplicaAssignment:
    """The partition's assignment as the store (ZooKeeper) holds it."""
    topic = harness.store.topics[tp[0]]
    return ReplicaAssignment(
        tuple(topic.partitions[tp[1]]),
        tuple(topic.adding_replicas.get(tp[1], ())),
        tuple(topic.removing_replicas.get(tp[1], ())),
    )


def sent_of(sent, name):
    return [(b, r) for b, r in sent if type(r).__name__ == name]


def stopped(sent) -> dict[int, set]:
    """StopReplica requests by broker: the partitions each was told to delete."""
    found: dict[int, set] = {}
    for broker_id, request in sent_of(sent, "StopReplicaRequest"):
        for topic in request.topic_states:
            for p in topic.partition_states:
                assert p.delete_partition
                found.setdefault(broker_id, set()).add((topic.topic_name, p.partition_index))
    return found


async def moving(harness, brokers=(1, 2, 3, 4, 5, 6)):
    """Six brokers, ``orders``-0 on 1,2,3 (led by 1), being moved to 4,5,6."""
    await harness.start(brokers=brokers)
    harness.store.create_topic(T, {0: (1, 2, 3), 1: (1, 2, 3)})
    await harness.settle()
    harness.channel.take()
    assert await alter(harness, {TP: (4, 5, 6)}) == {TP: (ErrorCode.none, None)}


# -- the assignment arithmetic ---------------------------------------------------------------


def test_reassign_to_lists_the_target_first_and_derives_adding_and_removing():
    ors = ReplicaAssignment((1, 2, 3))
    moving_ = ors.reassign_to((4, 5, 6))
    assert moving_ == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert moving_.origin == (1, 2, 3) and moving_.target == (4, 5, 6)
    # A new target replaces the old one, from the original replicas.
    assert moving_.reassign_to((3, 4, 5)) == ReplicaAssignment((3, 4, 5, 1, 2), (4, 5), (1, 2))
    # Back to the original replicas: nothing to add or remove (a cancellation).
    assert moving_.reassign_to((1, 2, 3)) == ReplicaAssignment((1, 2, 3))
    # Overlapping sets: the order of the original ones cannot be kept (Kafka's note).
    assert ors.reassign_to((3, 4, 2)) == ReplicaAssignment((3, 4, 2, 1), (4,), (1,))


# -- phase U and A: starting -------------------------------------------------------------------


def test_a_reassignment_writes_rs_ar_rr_bumps_the_epoch_and_starts_the_new_replicas(harness):
    async def scenario():
        await harness.start(brokers=(1, 2, 3, 4, 5, 6))
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        harness.channel.take()
        before, _ = harness.store.states[TP]
        assert await alter(harness, {TP: (4, 5, 6)}) == {TP: (ErrorCode.none, None)}
        assert assignment(harness) == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
        assert harness.model.assignment(TP) == assignment(harness)
        state, _ = harness.store.states[TP]
        assert state == LeaderAndIsr(1, before.leader_epoch + 1, (1, 2, 3), 1)
        sent = harness.channel.take()
        lai = dict(sent_of(sent, "LeaderAndIsrRequest"))
        assert sorted(lai) == [1, 2, 3, 4, 5, 6]
        for broker_id, request in lai.items():
            carried = partition_states(request)[TP]
            assert tuple(carried.replicas) == (4, 5, 6, 1, 2, 3)
            assert tuple(carried.adding_replicas) == (4, 5, 6)
            assert tuple(carried.removing_replicas) == (1, 2, 3)
            assert carried.leader_epoch == before.leader_epoch + 1
            assert carried.is_new is (broker_id in (4, 5, 6))
        assert not stopped(sent)
        model = harness.model
        assert [model.replica_states.get((TP, b)) for b in (4, 5, 6)] == [ReplicaState.NEW] * 3
        assert model.is_reassigning(TP) and model.reassigning_partitions() == [TP]
        assert harness.metrics.reassigning_partitions._value.get() == 1
        assert await listed(harness) == {TP: ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))}

    run(scenario())


def test_until_every_target_replica_is_in_sync_nothing_is_removed(harness):
    async def scenario():
        await moving(harness)
        harness.channel.take()
        await isr_change(harness, 1, (1, 2, 3, 4, 5))
        assert assignment(harness).is_reassigning
        assert harness.store.states[TP][0].leader == 1
        assert not stopped(harness.channel.take())
        assert harness.metrics.reassignments_completed._value.get() == 0

    run(scenario())


# -- phase B: finishing ------------------------------------------------------------------------


def test_the_isr_change_that_brings_the_last_target_in_sync_finishes_it(harness):
    async def scenario():
        await moving(harness)
        await isr_change(harness, 1, (1, 2, 3, 4, 5))
        harness.channel.take()
        epoch_before = harness.store.states[TP][0].leader_epoch
        await isr_change(harness, 1, (1, 2, 3, 4, 5, 6))
        assert assignment(harness) == ReplicaAssignment((4, 5, 6))
        state, _ = harness.store.states[TP]
        assert state.leader == 4  # the first target replica live and in the ISR
        assert state.isr == (4, 5, 6)
        assert state.leader_epoch > epoch_before
        sent = harness.channel.take()
        assert stopped(sent) == {1: {TP}, 2: {TP}, 3: {TP}}
        lai = dict(sent_of(sent, "LeaderAndIsrRequest"))
        assert sorted(lai) == [4, 5, 6]  # the removed replicas only get StopReplica
        for request in lai.values():
            carried = partition_states(request)[TP]
            assert (carried.leader, tuple(carried.replicas)) == (4, (4, 5, 6))
            assert tuple(carried.isr) == (4, 5, 6) and not carried.adding_replicas
        assert {b for b, _ in sent_of(sent, "UpdateMetadataRequest")} == {1, 2, 3, 4, 5, 6}
        # StopReplica goes before UpdateMetadata to the same broker (the batch's order).
        assert [type(r).__name__ for b, r in sent if b == 1][-2:] == [
            "StopReplicaRequest",
            "UpdateMetadataRequest",
        ]
        model = harness.model
        assert [model.replica_states.get((TP, b)) for b in (1, 2, 3)] == [
            ReplicaState.NON_EXISTENT
        ] * 3
        assert [model.replica_states.get((TP, b)) for b in (4, 5, 6)] == [ReplicaState.ONLINE] * 3
        assert not model.is_reassigning(TP)
        assert harness.metrics.reassigning_partitions._value.get() == 0
        assert harness.metrics.reassignments_completed._value.get() == 1
        assert await listed(harness) == {}

    run(scenario())


def test_a_leader_that_stays_in_the_target_keeps_leading_with_a_new_epoch(harness):
    async def scenario():
        await harness.start(brokers=(1, 2, 3, 4))
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        assert await alter(harness, {TP: (1, 4, 2)}) == {TP: (ErrorCode.none, None)}
        assert assignment(harness) == ReplicaAssignment((1, 4, 2, 3), (4,), (3,))
        await isr_change(harness, 1, (1, 2, 3, 4))
        state, _ = harness.store.states[TP]
        assert (state.leader, state.isr) == (1, (1, 2, 4))
        assert assignment(harness) == ReplicaAssignment((1, 4, 2))

    run(scenario())


def test_shrinking_the_replicas_finishes_at_once(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        harness.channel.take()
        assert await alter(harness, {TP: (1, 2)}) == {TP: (ErrorCode.none, None)}
        assert assignment(harness) == ReplicaAssignment((1, 2))
        state, _ = harness.store.states[TP]
        assert (state.leader, state.isr) == (1, (1, 2))
        assert stopped(harness.channel.take()) == {3: {TP}}
        assert harness.metrics.reassignments_completed._value.get() == 1

    run(scenario())


# -- cancelling and replacing ------------------------------------------------------------------


def test_cancel_goes_back_to_the_original_replicas_and_deletes_the_added_ones(harness):
    async def scenario():
        await moving(harness)
        await isr_change(harness, 1, (1, 2, 3, 4))
        harness.channel.take()
        assert await alter(harness, {TP: None}) == {TP: (ErrorCode.none, None)}
        assert assignment(harness) == ReplicaAssignment((1, 2, 3))
        state, _ = harness.store.states[TP]
        assert (state.leader, state.isr) == (1, (1, 2, 3))
        sent = harness.channel.take()
        assert stopped(sent) == {4: {TP}, 5: {TP}, 6: {TP}}
        assert sorted(b for b, _ in sent_of(sent, "LeaderAndIsrRequest")) == [1, 2, 3]
        assert harness.metrics.reassignments_cancelled._value.get() == 1
        assert harness.metrics.reassignments_completed._value.get() == 0
        assert not harness.model.is_reassigning(TP)
        # Nothing is in progress any more: a second cancel is refused.
        code, _ = (await alter(harness, {TP: None}))[TP]
        assert code == ErrorCode.no_reassignment_in_progress

    run(scenario())


def test_cancel_moves_leadership_back_from_an_added_replica(harness):
    async def scenario():
        await moving(harness)
        await isr_change(harness, 1, (1, 2, 3, 4))
        harness.store.unregister_broker(1)  # RS order (4,5,6,1,2,3): 4 is elected
        await harness.settle()
        assert harness.store.states[TP][0].leader == 4
        harness.channel.take()
        assert await alter(harness, {TP: None}) == {TP: (ErrorCode.none, None)}
        state, _ = harness.store.states[TP]
        assert state.leader == 2 and 4 not in state.isr
        assert assignment(harness) == ReplicaAssignment((1, 2, 3))
        assert stopped(harness.channel.take()) == {4: {TP}, 5: {TP}, 6: {TP}}

    run(scenario())


def test_a_new_target_replaces_the_one_in_progress(harness):
    async def scenario():
        await moving(harness)
        harness.channel.take()
        assert await alter(harness, {TP: (1, 2, 4)}) == {TP: (ErrorCode.none, None)}
        assert assignment(harness) == ReplicaAssignment((1, 2, 4, 3), (4,), (3,))
        assert stopped(harness.channel.take()) == {5: {TP}, 6: {TP}}
        assert harness.model.replica_states.get((TP, 4)) is ReplicaState.NEW
        await isr_change(harness, 1, (1, 2, 3, 4))
        assert assignment(harness) == ReplicaAssignment((1, 2, 4))
        assert harness.store.states[TP][0].isr == (1, 2, 4)

    run(scenario())


def test_a_new_target_without_the_leader_it_had_moved_to_elects_one_at_once(harness):
    async def scenario():
        await moving(harness)
        await isr_change(harness, 1, (1, 2, 3, 4))
        harness.store.unregister_broker(1)  # RS order (4,5,6,1,2,3): 4 is elected
        await harness.settle()
        assert harness.store.states[TP][0].leader == 4
        assert await alter(harness, {TP: (5, 6, 2)}) == {TP: (ErrorCode.none, None)}
        assert assignment(harness) == ReplicaAssignment((5, 6, 2, 1, 3), (5, 6), (1, 3))
        state, _ = harness.store.states[TP]
        # 4 is stopped; of the new RS, 2 is the first live replica in the ISR.
        assert (state.leader, state.isr) == (2, (2, 3))

    run(scenario())


# -- resuming ----------------------------------------------------------------------------------


def _successor(harness):
    """A second controller on the same store (ZooKeeper), elected with epoch 2."""
    channel = RecordingChannel()
    controller = Controller(1001, harness.store, channel, metrics=harness.metrics)
    election = FakeElection(controller, harness.store)
    controller.election = election
    controller.loop = asyncio.get_running_loop()
    harness.election.epoch = None  # the first one lost its session
    election.win(2)
    return controller, channel


def test_a_new_controller_resumes_a_reassignment_from_the_znode(harness):
    async def scenario():
        await moving(harness)
        await isr_change(harness, 1, (1, 2, 3, 4))
        epoch_before = harness.store.states[TP][0].leader_epoch
        successor, channel = _successor(harness)
        await successor.process_pending()
        assert successor.model.assignment(TP) == ReplicaAssignment(
            (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)
        )
        # A1 again: the epoch moves on and every replica of RS hears RS.
        assert harness.store.states[TP][0].leader_epoch == epoch_before + 1
        lai = dict(sent_of(channel.take(), "LeaderAndIsrRequest"))
        assert tuple(partition_states(lai[5])[TP].adding_replicas) == (4, 5, 6)
        # It finishes on the new controller once the targets are in sync.
        harness.controller = successor  # isr_change sends to it
        await isr_change(harness, 1, (1, 2, 3, 4, 5, 6))
        await successor.process_pending()
        assert assignment(harness) == ReplicaAssignment((4, 5, 6))
        assert stopped(channel.take()) == {1: {TP}, 2: {TP}, 3: {TP}}

    run(scenario())


def test_a_controller_that_died_before_finishing_is_finished_by_its_successor(harness):
    async def scenario():
        await moving(harness)
        # The ISR reached the target while no controller acted on it (it died just then).
        state, _ = harness.store.states[TP]
        harness.store.write_behind_the_controller(
            TP, LeaderAndIsr(1, state.leader_epoch, (1, 2, 3, 4, 5, 6), 1)
        )
        successor, channel = _successor(harness)
        await successor.process_pending()
        assert assignment(harness) == ReplicaAssignment((4, 5, 6))
        assert harness.store.states[TP][0].isr == (4, 5, 6)
        assert stopped(channel.take()) == {1: {TP}, 2: {TP}, 3: {TP}}

    run(scenario())


def test_a_target_broker_that_returns_hears_the_reassignment_again(harness):
    async def scenario():
        await moving(harness)
        harness.store.unregister_broker(5)
        await harness.settle()
        harness.channel.take()
        harness.store.register_broker(5)
        await harness.settle()
        lai = dict(sent_of(harness.channel.take(), "LeaderAndIsrRequest"))
        assert tuple(partition_states(lai[5])[TP].replicas) == (4, 5, 6, 1, 2, 3)
        assert assignment(harness).is_reassigning

    run(scenario())


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ((), ErrorCode.invalid_replica_assignment),
        ((4, 4, 5), ErrorCode.invalid_replica_assignment),
        ((4, -1, 5), ErrorCode.invalid_replica_assignment),
        ((4, 5, 9), ErrorCode.invalid_replica_assignment),  # 9 is not a live broker
    ],
)
def test_bad_targets_are_refused_and_change_nothing(harness, target, error):
    async def scenario():
        await harness.start(brokers=(1, 2, 3, 4, 5))
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        writes = list(harness.store.writes)
        code, message = (await alter(harness, {TP: target}))[TP]
        assert code == error and message
        assert assignment(harness) == ReplicaAssignment((1, 2, 3))
        assert harness.store.writes == writes and not harness.store.assignment_writes

    run(scenario())


def test_unknown_partitions_cancels_of_nothing_and_deleted_topics_are_refused(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        harness.store.create_topic("doomed", {0: (1, 2, 3)})
        await harness.settle()
        harness.controller.model.deleting.discard("doomed")
        harness.store.deletions.add("doomed")  # queued; the deletion event has not run yet
        results = await alter(
            harness,
            {("nope", 0): (1, 2), (T, 7): (1, 2), TP: None, ("doomed", 0): (3, 2, 1)},
        )
        assert {tp: code for tp, (code, _) in results.items()} == {
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
            (T, 7): ErrorCode.unknown_topic_or_partition,
            TP: ErrorCode.no_reassignment_in_progress,
            ("doomed", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert not harness.store.assignment_writes

    run(scenario())


def test_a_partition_named_twice_is_refused_both_times(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        request = alter_request({TP: (1, 2)})
        topic = request.topics[0]
        twice = type(request)(topics=(type(topic)(name=T, partitions=topic.partitions * 2),))
        response = await answer(harness, serve(harness.controller, twice))
        codes = [p.error_code for p in response.responses[0].partitions]
        assert codes == [ErrorCode.invalid_request] * 2
        assert not harness.store.assignment_writes

    run(scenario())


def test_v1_refuses_a_replication_factor_change_unless_allowed(harness):
    async def scenario():
        await harness.start(brokers=(1, 2, 3, 4))
        harness.store.create_topic(T, {0: (1, 2, 3), 1: (1, 2, 3)})
        await harness.settle()
        refused = await alter(
            harness, {TP: (1, 2, 3, 4)}, version=1, allow_replication_factor_change=False
        )
        assert refused[TP][0] == ErrorCode.invalid_replication_factor
        same_size = await alter(
            harness, {(T, 1): (4, 2, 3)}, version=1, allow_replication_factor_change=False
        )
        assert same_size == {(T, 1): (ErrorCode.none, None)}
        allowed = await alter(
            harness, {TP: (1, 2, 3, 4)}, version=1, allow_replication_factor_change=True
        )
        assert allowed == {TP: (ErrorCode.none, None)}

    run(scenario())


def test_a_partition_that_never_had_a_leader_cannot_be_reassigned_yet(harness):
    async def scenario():
        await harness.start(brokers=(1, 2))
        harness.store.create_topic(T, {0: (3,)})  # broker 3 never came: no leader and ISR
        await harness.settle()
        code, message = (await alter(harness, {TP: (1,)}))[TP]
        assert code == ErrorCode.leader_not_available and "no leader" in message

    run(scenario())


def test_an_inactive_controller_answers_not_controller(harness):
    async def scenario():
        response = await serve(harness.controller, alter_request({TP: (1, 2)}))
        assert response.error_code == ErrorCode.not_controller
        assert response.responses[0].partitions[0].error_code == ErrorCode.not_controller
        listed_ = await serve(harness.controller, list_request())
        assert listed_.error_code == ErrorCode.not_controller

    run(scenario())


# -- listing -----------------------------------------------------------------------------------


def test_listing_names_only_the_partitions_being_reassigned(harness):
    async def scenario():
        await moving(harness)
        assert await listed(harness, {T: [0, 1, 0], "nope": [0]}) == {
            TP: ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
        }
        assert await listed(harness, {T: [1]}) == {}

    run(scenario())


def test_deleting_a_topic_being_reassigned_stops_every_replica(harness):
    async def scenario():
        await moving(harness)
        harness.channel.take()
        harness.store.request_deletion(T)
        await harness.settle()
        sent = harness.channel.take()
        assert {b for b, tps in stopped(sent).items() if TP in tps} == {1, 2, 3, 4, 5, 6}
        assert T not in harness.store.topics
        assert harness.model.reassigning_partitions() == []

    run(scenario())


def test_a_target_past_a_brokers_replica_budget_is_refused_and_the_request_counts(harness):
    """Broker 4 registers a budget of one replica: the request's first move onto it takes it,
    the second is refused before anything is written (replica_room)."""

    async def scenario():
        await harness.start(brokers=(1, 2, 3, 4))
        registration = harness.store.brokers[4]
        harness.store.brokers[4] = BrokerRegistration(
            dataclasses.replace(registration.info, max_broker_partitions=1), registration.epoch
        )
        harness.store._fire("brokers")
        harness.store.create_topic(T, {0: (1, 2, 3), 1: (1, 2, 3)})
        await harness.settle()
        answered = await alter(harness, {TP: (4, 2, 3), (T, 1): (4, 2, 3)})
        assert answered[TP] == (ErrorCode.none, None)
        code, message = answered[(T, 1)]
        assert code == ErrorCode.invalid_replica_assignment
        assert "Broker 4" in message and "1 of 1" in message and "max.broker.partitions" in message
        assert assignment(harness, (T, 1)) == ReplicaAssignment((1, 2, 3))
        assert (T, 1) not in await listed(harness)

    run(scenario())
