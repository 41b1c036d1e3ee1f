"""Leader balance in the controller without ZooKeeper: the imbalance per broker and its gauge, the
automatic preferred replica election (above the percentage only, preferred replica live and in
the ISR, partitions being reassigned skipped), and ElectLeaders (preferred, unclean, not needed,
unknown, v0, refusals) answered as Kafka answers them."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from controller_doubles import partition_states, serve
from test_controller_server import TIMEOUT_S, _serving, _stop

from odradek.client.connection import BrokerConnection
from odradek.cluster.elect_leaders import outcomes_of, request_of
from odradek.cluster.election import ElectionType
from odradek.controller import leader_balance
from odradek.controller.handlers import served
from odradek.controller.model import topic_uuid
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.zk.paths import PartitionState as LeaderAndIsr

T = "orders"
PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def run(coroutine):
    return asyncio.run(coroutine)


async def _answer(harness, coroutine):
    answering = asyncio.ensure_future(coroutine)
    await harness.settle()
    async with asyncio.timeout(5):
        return await answering


async def _rejoin_isr(harness, tp, broker_id: int) -> None:
    """The partition's leader adds ``broker_id`` back to its ISR (AlterPartition v2), as a
    leader does once a returning follower has caught up."""
    state, version = harness.state(*tp)
    request_type = schemas.request_schema(ApiKey.ALTER_PARTITION, 2)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    request = request_type(
        broker_id=state.leader,
        broker_epoch=harness.store.brokers[state.leader].epoch,
        topics=(
            topic_type(
                topic_id=topic_uuid(harness.store.topics[tp[0]].topic_id),
                partitions=(
                    partition_type(
                        partition_index=tp[1],
                        leader_epoch=state.leader_epoch,
                        new_isr=(*state.isr, broker_id),
                        leader_recovery_state=0,
                        partition_epoch=version,
                    ),
                ),
            ),
        ),
    )
    response = await _answer(harness, serve(harness.controller, request))
    assert response.topics[0].partitions[0].error_code == ErrorCode.none


async def _broker_1_bounced(harness, partitions: int = 6) -> None:
    """Partitions preferring 1, 2, 3 in turn; broker 1 stops (its leaderships move) and comes
    back, out of every ISR."""
    await harness.start()
    harness.store.create_topic(
        T, {p: ((1, 2, 3), (2, 3, 1), (3, 1, 2))[p % 3] for p in range(partitions)}
    )
    await harness.settle()
    harness.store.unregister_broker(1)
    await harness.settle()
    harness.store.register_broker(1)
    await harness.settle()
    harness.channel.take()


def _preferred_by_1(partitions: int = 6) -> list[tuple[str, int]]:
    return [(T, p) for p in range(0, partitions, 3)]


def _imbalance_gauge(harness) -> float:
    return harness.metrics.preferred_replica_imbalance._value.get()


# -- imbalance -------------------------------------------------------------------------------


def test_imbalance_counts_each_brokers_preferred_partitions_led_elsewhere(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        model = harness.model
        by_broker = leader_balance.imbalance(model)
        assert by_broker[1] == leader_balance.BrokerImbalance(1, 2, tuple(_preferred_by_1()))
        assert by_broker[2].led_elsewhere == by_broker[3].led_elsewhere == ()
        assert by_broker[1].above(99) and not by_broker[2].above(0)
        assert leader_balance.imbalance_count(model) == 2
        assert _imbalance_gauge(harness) == 2
        # Back, but out of the ISR: the preferred replica cannot lead yet.
        assert not any(leader_balance.can_preferred_lead(model, tp) for tp in _preferred_by_1())
        assert leader_balance.rebalance_candidates(model, 10) == []

    run(scenario())


def test_a_topic_being_deleted_is_left_out_of_the_imbalance(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        harness.model.deleting.add(T)
        assert leader_balance.imbalance(harness.model) == {}
        assert leader_balance.imbalance_count(harness.model) == 0

    run(scenario())


# -- the automatic rebalance -----------------------------------------------------------------


def test_the_automatic_check_moves_leadership_back_once_the_preferred_replica_is_in_sync(
    harness,
):
    async def scenario():
        await _broker_1_bounced(harness)
        harness.controller.check_leader_balance()
        await harness.settle()
        assert [harness.state(*tp)[0].leader for tp in _preferred_by_1()] == [2, 2]  # 1 not in ISR
        for tp in _preferred_by_1():
            await _rejoin_isr(harness, tp, 1)
        harness.channel.take()
        harness.controller.check_leader_balance()
        await harness.settle()
        for tp in _preferred_by_1():
            state = harness.state(*tp)[0]
            assert state.leader == 1
            assert state.leader_epoch == 2  # one for the failover, one for this election
            assert sorted(state.isr) == [1, 2, 3]
        sent = harness.channel.take()
        leader_and_isr = [(b, r) for b, r in sent if type(r).__name__ == "LeaderAndIsrRequest"]
        assert sorted(b for b, _ in leader_and_isr) == [1, 2, 3]
        assert set(partition_states(leader_and_isr[0][1])) == set(_preferred_by_1())
        assert _imbalance_gauge(harness) == 0
        # Balanced: the next check changes nothing.
        writes = len(harness.store.writes)
        harness.controller.check_leader_balance()
        await harness.settle()
        assert len(harness.store.writes) == writes

    run(scenario())


@pytest.mark.parametrize(("percentage", "moves"), [(50, False), (49, True)])
def test_the_automatic_check_leaves_a_broker_at_or_under_the_percentage(harness, percentage, moves):
    async def scenario():
        await _broker_1_bounced(harness)
        for tp in _preferred_by_1():
            await _rejoin_isr(harness, tp, 1)
        # Back to broker 1 by hand for one of its two partitions: 1 of 2 led elsewhere, 50 %.
        response = await _answer(
            harness,
            serve(harness.controller, request_of(2, PREFERRED, [(T, 0)], 5000)),
        )
        assert outcomes_of(response)[(T, 0)].error is ErrorCode.none
        harness.controller.leader_imbalance_per_broker_percentage = percentage
        harness.controller.check_leader_balance()
        await harness.settle()
        assert harness.state(T, 3)[0].leader == (1 if moves else 2)

    run(scenario())


def test_the_automatic_check_skips_partitions_being_reassigned(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        for tp in _preferred_by_1():
            await _rejoin_isr(harness, tp, 1)
        harness.controller._being_reassigned = lambda tp: tp == (T, 0)
        harness.controller.check_leader_balance()
        await harness.settle()
        assert harness.state(T, 0)[0].leader == 2
        assert harness.state(T, 3)[0].leader == 1

    run(scenario())


def test_the_automatic_check_does_nothing_on_a_controller_that_is_not_active(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        for tp in _preferred_by_1():
            await _rejoin_isr(harness, tp, 1)
        await harness.controller._step_down()
        assert _imbalance_gauge(harness) == 0
        writes = len(harness.store.writes)
        harness.controller.check_leader_balance()
        await harness.settle()
        assert len(harness.store.writes) == writes

    run(scenario())


# -- ElectLeaders ----------------------------------------------------------------------------


def test_elect_leaders_preferred_answers_each_partition_as_kafka(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        await _rejoin_isr(harness, (T, 0), 1)
        asked = [(T, 0), (T, 3), (T, 1), (T, 0), (T, 99), ("nope", 0)]
        response = await _answer(
            harness, serve(harness.controller, request_of(2, PREFERRED, asked, 5000))
        )
        assert response.error_code == ErrorCode.none
        outcomes = outcomes_of(response)
        assert list(outcomes) == [(T, 0), (T, 3), (T, 1), (T, 99), ("nope", 0)]  # once each
        assert {tp: o.error for tp, o in outcomes.items()} == {
            (T, 0): ErrorCode.none,
            (T, 3): ErrorCode.preferred_leader_not_available,  # 1 is not in its ISR yet
            (T, 1): ErrorCode.election_not_needed,
            (T, 99): ErrorCode.unknown_topic_or_partition,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert "not live and in the ISR" in outcomes[(T, 3)].message
        assert harness.state(T, 0)[0].leader == 1
        assert harness.state(T, 3)[0].leader == 2
        assert _imbalance_gauge(harness) == 1

    run(scenario())


def test_elect_leaders_for_every_partition_lists_only_those_that_needed_one(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        for tp in _preferred_by_1():
            await _rejoin_isr(harness, tp, 1)
        response = await _answer(
            harness, serve(harness.controller, request_of(1, PREFERRED, None, 5000))
        )
        assert {tp: o.error for tp, o in outcomes_of(response).items()} == {
            (T, 0): ErrorCode.none,
            (T, 3): ErrorCode.none,
        }
        assert [harness.state(T, p)[0].leader for p in range(6)] == [1, 2, 3, 1, 2, 3]

    run(scenario())


def test_elect_leaders_v0_is_a_preferred_election_without_a_top_level_error(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        await _rejoin_isr(harness, (T, 0), 1)
        response = await _answer(
            harness,
            serve(harness.controller, request_of(0, PREFERRED, [(T, 0), (T, 1)], 5000)),
        )
        assert not hasattr(response, "error_code")
        assert {tp: o.error for tp, o in outcomes_of(response).items()} == {
            (T, 0): ErrorCode.none,
            (T, 1): ErrorCode.election_not_needed,
        }

    run(scenario())


def test_elect_leaders_unclean_elects_a_live_replica_outside_the_isr_logged_and_counted(
    harness, caplog
):
    async def scenario():
        await harness.start()
        harness.store.create_topic(T, {0: (1, 2), 1: (3, 2), 2: (1,)})
        await harness.settle()
        harness.store.unregister_broker(2)  # ISR of 0: (1,)
        await harness.settle()
        harness.store.register_broker(2)  # back, out of the ISR
        await harness.settle()
        harness.store.unregister_broker(1)  # 0 and 2 go offline: unclean is off for the topic
        await harness.settle()
        assert harness.state(T, 0)[0].leader == -1
        with caplog.at_level(logging.WARNING):
            response = await _answer(
                harness,
                serve(harness.controller, request_of(2, UNCLEAN, [(T, 0), (T, 1), (T, 2)], 5000)),
            )
        outcomes = outcomes_of(response)
        assert {tp: o.error for tp, o in outcomes.items()} == {
            (T, 0): ErrorCode.none,
            (T, 1): ErrorCode.election_not_needed,  # 3 leads it
            (T, 2): ErrorCode.eligible_leaders_not_available,  # its only replica is down
        }
        assert harness.state(T, 0)[0] == LeaderAndIsr(2, 3, (2,), 1)
        assert harness.metrics.unclean_leader_elections._value.get() == 1
        assert "unclean leader election for orders-0" in caplog.text

    run(scenario())


def test_elect_leaders_with_an_unknown_election_type_is_an_invalid_request(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        request = request_of(2, PREFERRED, [(T, 0)], 5000)
        request = type(request)(
            election_type=7, topic_partitions=request.topic_partitions, timeout=request.timeout
        )
        response = await _answer(harness, serve(harness.controller, request))
        assert response.error_code == ErrorCode.invalid_request
        assert outcomes_of(response)[(T, 0)].error is ErrorCode.invalid_request
        assert harness.state(T, 0)[0].leader == 2

    run(scenario())


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_on_a_controller_that_is_not_active_is_not_controller(harness, version):
    async def scenario():
        harness.controller.loop = asyncio.get_running_loop()
        response = await serve(harness.controller, request_of(version, PREFERRED, [(T, 0)], 5000))
        if version >= 1:
            assert response.error_code == ErrorCode.not_controller
        assert outcomes_of(response)[(T, 0)].error is ErrorCode.not_controller

    run(scenario())


def test_the_controller_listener_serves_elect_leaders_v0_to_v2(harness):
    table = served(harness.controller)
    assert table[ApiKey.ELECT_LEADERS].versions == (0, 2)
    assert timedelta(milliseconds=1) == request_of(1, UNCLEAN, None, 1).timeout


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_over_the_controller_listener_round_trips_every_version(harness, version):
    async def scenario():
        server, port, _, stop, runner = await _serving(harness)
        try:
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                response = await connection.send(
                    request_of(version, PREFERRED, [("t", 0), ("t", 5)], 5000),
                    timeout_s=TIMEOUT_S,
                )
            assert {tp: o.error for tp, o in outcomes_of(response).items()} == {
                ("t", 0): ErrorCode.election_not_needed,
                ("t", 5): ErrorCode.unknown_topic_or_partition,
            }
        finally:
            await _stop(server, stop, runner)

    run(scenario())
