"""A failed log dir, the controller's way: a log dir event notification makes it ask the broker
(LeaderAndIsr), KAFKA_STORAGE_ERROR answers move leadership and ISR membership off those replicas
(never back onto them while they are offline), the broker is asked once more to re-create them,
a NONE answer or a restart makes them serving again, and the notification is deleted."""

from __future__ import annotations

import asyncio

from controller_doubles import partition_states

from odradek.controller.handlers.broker_responses import on_response
from odradek.errors import ErrorCode
from odradek.protocol.interbroker import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)

T = "orders"


def answer(harness, errors: dict[int, ErrorCode]) -> LeaderAndIsrResponse:
    """A broker's LeaderAndIsr answer for partitions of ``T``."""
    topic_id = next(i for i, name in harness.model.topic_id_names().items() if name == T)
    return LeaderAndIsrResponse(
        error_code=ErrorCode.none,
        topics=(
            LeaderAndIsrTopicError(
                topic_id=topic_id,
                partition_errors=tuple(
                    LeaderAndIsrPartitionError(partition_index=p, error_code=e)
                    for p, e in errors.items()
                ),
            ),
        ),
    )


def leader_and_isr_to(harness, sent, broker_id):
    return [
        partition_states(r)
        for b, r in sent
        if b == broker_id and type(r).__name__ == "LeaderAndIsrRequest"
    ]


def test_a_notification_moves_leadership_off_the_failed_replicas_and_asks_again(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3), 1: (2, 1, 3), 2: (3, 2, 1)})
        await harness.settle()
        harness.channel.take()

        harness.store.notify_log_dir_failure(1)
        await harness.settle()

        asked = leader_and_isr_to(harness, harness.channel.take(), 1)
        assert {tp for states in asked for tp in states} == {(T, 0), (T, 1), (T, 2)}
        assert harness.store.log_dir_events == {}, "the notification was not deleted"

        # Broker 1's answer: partitions 0 and 1 are on its failed dir, 2 is fine.
        storage = ErrorCode.kafka_storage_error
        reply = answer(harness, {0: storage, 1: storage, 2: ErrorCode.none})
        on_response(harness.controller)(1, reply)
        await harness.settle()

        state_0, _ = harness.state(T, 0)
        assert state_0.leader == 2 and 1 not in state_0.isr
        state_1, _ = harness.state(T, 1)
        assert state_1.leader == 2 and 1 not in state_1.isr
        state_2, _ = harness.state(T, 2)
        assert 1 in state_2.isr, "a healthy replica must stay in the ISR"
        assert harness.model.offline_replicas == {1: {(T, 0), (T, 1)}}
        sent = harness.channel.take()
        again = leader_and_isr_to(harness, sent, 1)
        assert {tp for states in again for tp in states} == {(T, 0), (T, 1)}
        for states in again:
            for s in states.values():
                assert 1 not in s.isr and s.leader != 1

        # The same answer again (the broker still runs with the failed dir): nothing more.
        on_response(harness.controller)(1, reply)
        await harness.settle()
        assert harness.channel.take() == []

        # Partition 0's leader dies: its replica on broker 1 is offline, so 3 leads, not 1.
        harness.store.unregister_broker(2)
        await harness.settle()
        assert harness.state(T, 0)[0].leader == 3

        # Broker 1 re-created partition 0 on a healthy dir: it serves it again.
        on_response(harness.controller)(1, answer(harness, {0: ErrorCode.none}))
        await harness.settle()
        assert harness.model.offline_replicas == {1: {(T, 1)}}

    asyncio.run(scenario())


def test_a_broker_that_registers_again_starts_with_every_replica_serving(harness):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        storage = ErrorCode.kafka_storage_error
        on_response(harness.controller)(1, answer(harness, {0: storage}))
        await harness.settle()
        assert harness.model.offline_replicas == {1: {(T, 0)}}

        harness.store.register_broker(1)  # a restart: a new broker epoch
        await harness.settle()

        assert harness.model.offline_replicas == {}

    asyncio.run(scenario())


def test_a_pending_notification_is_handled_by_a_newly_elected_controller(harness):
    async def scenario():
        harness.store.notify_log_dir_failure(2)
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.start()
        assert harness.store.log_dir_events == {}

    asyncio.run(scenario())


def test_a_leader_may_not_add_a_replica_on_a_failed_dir_to_the_isr(harness):
    async def scenario():
        from odradek.controller import alter_partition as ap

        await harness.start()
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        storage = ErrorCode.kafka_storage_error
        on_response(harness.controller)(3, answer(harness, {0: storage}))
        await harness.settle()
        state, version = harness.state(T, 0)
        assert 3 not in state.isr
        proposed = ap.ProposedIsr(
            topic_id=None,
            partition_index=0,
            leader_epoch=state.leader_epoch,
            new_isr=(*state.isr, 3),
            partition_epoch=version,
            leader_recovery_state=0,
            broker_epochs=None,
        )
        decided = ap.check_partition(harness.model, state.leader, (T, 0), proposed)
        assert decided is ErrorCode.ineligible_replica

    asyncio.run(scenario())
