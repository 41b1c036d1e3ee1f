"""ControlledShutdown as the controller decides it: leaderships move to the ISR minus the stopping
broker, it leaves the ISRs it follows (StopReplica without delete), a partition it alone has in
sync is reported and counted, a stale broker epoch changes nothing, and a shutting-down broker is
never made leader or ISR member again until it comes back under a new epoch."""

from __future__ import annotations

import asyncio
import logging

from controller_doubles import partition_states, serve
from test_alter_partition import request as alter_partition_request
from test_controller_server import TIMEOUT_S, _serving, _stop

from odradek.client.connection import BrokerConnection
from odradek.controller.handlers import served
from odradek.controller.model import topic_uuid
from odradek.controller.server import Served
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import ControlledShutdownRequest
from odradek.zk.paths import PartitionState as LeaderAndIsr

T = "orders"
ASSIGNMENT = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}


async def _setup(harness, assignment=ASSIGNMENT) -> str:
    await harness.start()
    topic_id = harness.store.create_topic(T, assignment)
    await harness.settle()
    harness.channel.take()
    return topic_id


async def _ask(harness, broker_id: int, broker_epoch: int | None = None):
    if broker_epoch is None:
        broker_epoch = harness.store.brokers[broker_id].epoch
    answering = asyncio.ensure_future(
        serve(
            harness.controller,
            ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch),
        )
    )
    await harness.settle()
    async with asyncio.timeout(5):
        return await answering


def _remaining(response) -> list[tuple[str, int]]:
    return [(p.topic_name, p.partition_index) for p in response.remaining_partitions]


def _sent(sent, name: str, broker_id: int | None = None) -> list:
    return [r for b, r in sent if type(r).__name__ == name and broker_id in (None, b)]


def test_the_controller_listener_serves_controlled_shutdown_v3(harness):
    api = served(harness.controller)[ApiKey.CONTROLLED_SHUTDOWN]
    assert isinstance(api, Served) and api.versions == (3, 3)


def test_controlled_shutdown_over_tcp_moves_the_leadership(harness):
    async def scenario():
        server, port, _, stop, runner = await _serving(harness)  # "t": {0: (1, 2)}
        try:
            request = ControlledShutdownRequest(
                broker_id=1, broker_epoch=harness.store.brokers[1].epoch
            )
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                response = await connection.send(request, timeout_s=TIMEOUT_S)
            assert (response.error_code, response.remaining_partitions) == (ErrorCode.none, ())
            assert harness.store.states[("t", 0)][0] == LeaderAndIsr(2, 1, (2,), 1)
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())


def test_leaderships_move_to_the_isr_and_the_broker_leaves_the_isrs_it_follows(harness):
    async def scenario():
        await _setup(harness)
        response = await _ask(harness, 1)
        assert response.error_code == ErrorCode.none
        assert _remaining(response) == []
        # Led by 1: the first ISR replica that is not shutting down leads, 1 leaves the ISR.
        assert harness.state(T, 0)[0] == LeaderAndIsr(2, 1, (2, 3), 1)
        # Followed by 1: same leader, 1 out of the ISR, a new leader epoch fences the old ISR.
        assert harness.state(T, 1)[0] == LeaderAndIsr(2, 1, (2, 3), 1)
        assert harness.state(T, 2)[0] == LeaderAndIsr(3, 1, (3, 2), 1)
        sent = harness.channel.take()
        # Broker 1 learns it follows partition 0 (LeaderAndIsr), stops fetching 1 and 2 (its
        # logs stay), and every broker hears the new states.
        (to_1,) = _sent(sent, "LeaderAndIsrRequest", 1)
        assert partition_states(to_1)[(T, 0)].leader == 2
        assert set(partition_states(to_1)) == {(T, 0)}
        (stop,) = _sent(sent, "StopReplicaRequest", 1)
        stopped = {
            (t.topic_name, p.partition_index): p
            for t in stop.topic_states
            for p in t.partition_states
        }
        assert set(stopped) == {(T, 1), (T, 2)}
        assert not any(p.delete_partition for p in stopped.values())
        # The epoch written by the ISR removal: above the one broker 1 holds, so it is obeyed.
        assert {p.leader_epoch for p in stopped.values()} == {1}
        for broker_id in (2, 3):
            led = {}
            for request in _sent(sent, "LeaderAndIsrRequest", broker_id):
                led.update(partition_states(request))
            assert {tp: (s.leader, tuple(s.isr)) for tp, s in led.items()} == {
                (T, 0): (2, (2, 3)),
                (T, 1): (2, (2, 3)),
                (T, 2): (3, (3, 2)),
            }
        assert {b for b, r in sent if type(r).__name__ == "UpdateMetadataRequest"} == {1, 2, 3}
        assert harness.metrics.controlled_shutdowns._value.get() == 1
        assert harness.metrics.controlled_shutdown_unmoved_partitions._value.get() == 0
        assert harness.metrics.shutting_down_brokers._value.get() == 1

    asyncio.run(scenario())


def test_a_retry_after_success_writes_nothing_and_answers_nothing_remaining(harness):
    async def scenario():
        await _setup(harness)
        await _ask(harness, 1)
        writes = len(harness.store.writes)
        response = await _ask(harness, 1)
        assert (response.error_code, _remaining(response)) == (ErrorCode.none, [])
        assert len(harness.store.writes) == writes

    asyncio.run(scenario())


def test_a_partition_whose_only_in_sync_replica_is_the_stopping_broker_is_reported(harness, caplog):
    async def scenario():
        topic_id = await _setup(harness)
        # Leader 1 shrinks partition 0's ISR to itself (its followers fell behind).
        epoch_1 = harness.store.brokers[1].epoch
        shrink = alter_partition_request(2, 1, epoch_1, topic_uuid(topic_id), [(0, 0, (1,), 0)])
        answering = asyncio.ensure_future(serve(harness.controller, shrink))
        await harness.settle()
        assert (await answering).topics[0].partitions[0].error_code == ErrorCode.none
        before = harness.state(T, 0)
        with caplog.at_level(logging.WARNING, logger="odradek.controller.controlled_shutdown"):
            response = await _ask(harness, 1)
        assert response.error_code == ErrorCode.none
        assert _remaining(response) == [(T, 0)]
        assert harness.state(T, 0) == before  # it still leads and serves: nothing written
        assert "orders-0 (ISR [1])" in caplog.text
        assert harness.metrics.controlled_shutdown_unmoved_partitions._value.get() == 1
        # The other partitions moved all the same.
        assert harness.state(T, 1)[0].isr == (2, 3)
        # At the retry it is reported and counted again.
        response = await _ask(harness, 1)
        assert _remaining(response) == [(T, 0)]
        assert harness.metrics.controlled_shutdown_unmoved_partitions._value.get() == 2

    asyncio.run(scenario())


def test_a_partition_it_could_not_hand_over_moves_once_a_follower_rejoins(harness):
    async def scenario():
        topic_id = await _setup(harness)
        e = {b: r.epoch for b, r in harness.store.brokers.items()}
        tid = topic_uuid(topic_id)
        answering = asyncio.ensure_future(
            serve(harness.controller, alter_partition_request(2, 1, e[1], tid, [(0, 0, (1,), 0)]))
        )
        await harness.settle()
        await answering
        assert _remaining(await _ask(harness, 1)) == [(T, 0)]
        # The shutting-down leader may still add a caught-up follower to its ISR ...
        answering = asyncio.ensure_future(
            serve(harness.controller, alter_partition_request(2, 1, e[1], tid, [(0, 0, (1, 2), 1)]))
        )
        await harness.settle()
        assert (await answering).topics[0].partitions[0].error_code == ErrorCode.none
        # ... and the next attempt hands the partition over.
        response = await _ask(harness, 1)
        assert _remaining(response) == []
        assert harness.state(T, 0)[0] == LeaderAndIsr(2, 1, (2,), 1)

    asyncio.run(scenario())


def test_a_stale_or_unknown_broker_is_refused_and_nothing_changes(harness):
    async def scenario():
        await _setup(harness)
        epoch = harness.store.brokers[1].epoch
        writes = len(harness.store.writes)
        for broker_id, broker_epoch, error in (
            (1, epoch - 1, ErrorCode.stale_broker_epoch),  # an earlier incarnation
            (1, epoch + 1, ErrorCode.stale_broker_epoch),  # one this controller has not seen
            (1, -1, ErrorCode.stale_broker_epoch),
            (9, 0, ErrorCode.broker_not_available),
        ):
            response = await _ask(harness, broker_id, broker_epoch)
            assert (response.error_code, _remaining(response)) == (error, [])
        assert len(harness.store.writes) == writes
        assert harness.channel.take() == []
        assert harness.model.shutting_down == set()
        assert harness.metrics.controlled_shutdowns._value.get() == 0

    asyncio.run(scenario())


def test_a_controller_that_is_not_active_answers_not_controller(harness):
    async def scenario():
        response = await serve(
            harness.controller, ControlledShutdownRequest(broker_id=1, broker_epoch=1)
        )
        assert response.error_code == ErrorCode.not_controller

    asyncio.run(scenario())


def test_single_replica_partitions_are_not_remaining(harness, caplog):
    async def scenario():
        await _setup(harness, {0: (1,), 1: (1, 2)})
        with caplog.at_level(logging.WARNING, logger="odradek.controller.controlled_shutdown"):
            response = await _ask(harness, 1)
        assert _remaining(response) == []  # as Kafka: nothing can take it over
        assert "single-replica partitions will be offline until it is back: orders-0" in (
            caplog.text
        )
        assert harness.state(T, 0)[0].leader == 1
        assert harness.state(T, 1)[0] == LeaderAndIsr(2, 1, (2,), 1)

    asyncio.run(scenario())


def test_a_shutting_down_broker_is_never_leader_nor_isr_member_until_it_registers_again(harness):
    async def scenario():
        topic_id = await _setup(harness)
        tid = topic_uuid(topic_id)
        await _ask(harness, 1)
        harness.channel.take()
        e = {b: r.epoch for b, r in harness.store.brokers.items()}

        async def expand(leader: int, partition: int, isr: tuple[int, ...]):
            _, version = harness.state(T, partition)
            epoch = harness.state(T, partition)[0].leader_epoch
            answering = asyncio.ensure_future(
                serve(
                    harness.controller,
                    alter_partition_request(
                        2, leader, e[leader], tid, [(partition, epoch, isr, version)]
                    ),
                )
            )
            await harness.settle()
            return (await answering).topics[0].partitions[0].error_code

        # Its fetcher caught up: the leader may not add it back.
        assert await expand(2, 1, (2, 3, 1)) == ErrorCode.ineligible_replica
        # A new topic does not make it a leader or an ISR member.
        harness.store.create_topic("fresh", {0: (1, 2, 3)})
        await harness.settle()
        assert harness.store.states[("fresh", 0)][0] == LeaderAndIsr(2, 0, (2, 3), 1)
        # A leader that dies is replaced from the ISR, never by it.
        harness.store.unregister_broker(2)
        await harness.settle()
        assert harness.state(T, 0)[0].leader == 3
        assert harness.state(T, 0)[0].isr == (3,)
        # Back under a new broker epoch (it restarted): eligible again.
        harness.store.unregister_broker(1)
        await harness.settle()
        assert harness.model.shutting_down == set()
        e[1] = harness.store.register_broker(1)
        await harness.settle()
        assert harness.metrics.shutting_down_brokers._value.get() == 0
        assert await expand(3, 0, (3, 1)) == ErrorCode.none

    asyncio.run(scenario())


def test_a_bounced_broker_is_no_longer_shutting_down(harness):
    async def scenario():
        await _setup(harness)
        await _ask(harness, 3)
        assert harness.model.shutting_down == {3}
        harness.store.register_broker(3)  # a new registration before the old one was seen gone
        await harness.settle()
        assert harness.model.shutting_down == set()

    asyncio.run(scenario())
