"""AlterPartition (KIP-497) as the controller decides it: each error code, the no-op retry, the
conditional write and its answer, UpdateMetadata (not LeaderAndIsr) to every live broker."""

from __future__ import annotations

import asyncio

import pytest
from controller_doubles import partition_states, serve

from odradek.controller.model import topic_uuid
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.zk.paths import PartitionState as LeaderAndIsr

T = "orders"


def request(version: int, broker_id: int, broker_epoch: int, topic_id, partitions) -> object:
    """An AlterPartition request; ``partitions``: (index, leader_epoch, isr, partition_epoch)
    with ``isr`` a tuple of ids (v2) or of (id, broker_epoch) pairs (v3)."""
    request_type = schemas.request_schema(ApiKey.ALTER_PARTITION, version)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    built = []
    for index, leader_epoch, isr, partition_epoch in partitions:
        if version >= 3:
            state_type = partition_type.__dataclass_fields__["new_isr_with_epochs"].type.__args__[0]
            isr_field = {
                "new_isr_with_epochs": tuple(
                    state_type(broker_id=b, broker_epoch=e) for b, e in isr
                )
            }
        else:
            isr_field = {"new_isr": tuple(isr)}
        built.append(
            partition_type(
                partition_index=index,
                leader_epoch=leader_epoch,
                leader_recovery_state=0,
                partition_epoch=partition_epoch,
                **isr_field,
            )
        )
    return request_type(
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        topics=(topic_type(topic_id=topic_id, partitions=tuple(built)),),
    )


async def _setup(harness):
    await harness.start()
    topic_id = harness.store.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1)})
    await harness.settle()
    harness.channel.take()
    return topic_uuid(topic_id)


async def _send(harness, req):
    answering = asyncio.ensure_future(serve(harness.controller, req))
    await harness.settle()
    async with asyncio.timeout(5):
        return await answering


def _partition(response, index=0):
    return response.topics[0].partitions[index]


@pytest.mark.parametrize("version", [2, 3])
def test_the_leader_shrinks_its_isr_and_gets_the_new_partition_epoch(harness, version):
    async def scenario():
        topic_id = await _setup(harness)
        epochs = {b: r.epoch for b, r in harness.store.brokers.items()}
        isr = (1, 2) if version == 2 else ((1, epochs[1]), (2, epochs[2]))
        response = await _send(harness, request(version, 1, epochs[1], topic_id, [(0, 0, isr, 0)]))
        assert response.error_code == ErrorCode.none
        p = _partition(response)
        assert (p.error_code, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (
            ErrorCode.none,
            1,
            0,
            (1, 2),
            1,
        )
        assert harness.state(T, 0) == (LeaderAndIsr(1, 0, (1, 2), 1), 1)
        sent = harness.channel.take()
        assert {type(r).__name__ for _, r in sent} == {"UpdateMetadataRequest"}
        assert sorted(b for b, _ in sent) == [1, 2, 3]
        assert partition_states(sent[0][1])[(T, 0)].isr == (1, 2)
        # Expanding back works from the new partition epoch.
        isr = (1, 2, 3) if version == 2 else tuple((b, epochs[b]) for b in (1, 2, 3))
        response = await _send(harness, request(version, 1, epochs[1], topic_id, [(0, 0, isr, 1)]))
        assert _partition(response).isr == (1, 2, 3) and _partition(response).partition_epoch == 2

    asyncio.run(scenario())


def test_a_retry_of_what_is_already_written_is_answered_with_the_current_state(harness):
    async def scenario():
        topic_id = await _setup(harness)
        epoch = harness.store.brokers[1].epoch
        await _send(harness, request(2, 1, epoch, topic_id, [(0, 0, (1, 2), 0)]))
        writes = len(harness.store.writes)
        # The same request again (its answer was lost): stale partition epoch, yet no error.
        response = await _send(harness, request(2, 1, epoch, topic_id, [(0, 0, (1, 2), 0)]))
        p = _partition(response)
        assert (p.error_code, p.isr, p.partition_epoch) == (ErrorCode.none, (1, 2), 1)
        assert len(harness.store.writes) == writes

    asyncio.run(scenario())


def test_each_refusal_has_its_error_code_and_writes_nothing(harness):
    async def scenario():
        topic_id = await _setup(harness)
        e = {b: r.epoch for b, r in harness.store.brokers.items()}
        writes = len(harness.store.writes)

        async def top(broker_id, broker_epoch):
            req = request(2, broker_id, broker_epoch, topic_id, [(0, 0, (1, 2), 0)])
            return (await _send(harness, req)).error_code

        async def one(
            partition, leader_epoch, isr, partition_epoch, *, sender=1, tid=topic_id, version=2
        ):
            req = request(
                version, sender, e[sender], tid, [(partition, leader_epoch, isr, partition_epoch)]
            )
            return _partition(await _send(harness, req)).error_code

        assert await top(1, e[1] + 1000) == ErrorCode.stale_broker_epoch
        assert await top(9, 5) == ErrorCode.stale_broker_epoch  # not a live broker
        assert await one(0, 0, (1, 2), 0, tid=topic_uuid(None)) == ErrorCode.unknown_topic_id
        assert await one(7, 0, (1, 2), 0) == ErrorCode.unknown_topic_or_partition
        assert await one(0, 0, (2, 3), 0, sender=2) == ErrorCode.not_leader_or_follower
        assert await one(0, 1, (1, 2), 0) == ErrorCode.fenced_leader_epoch
        assert await one(0, 0, (1, 2), 5) == ErrorCode.invalid_update_version
        assert await one(0, 0, (1, 2, 4), 0) == ErrorCode.ineligible_replica  # not assigned
        assert await one(0, 0, (2, 3), 0) == ErrorCode.invalid_request  # leader left out
        stale = ((1, e[1]), (2, e[2] - 1))
        assert await one(0, 0, stale, 0, version=3) == ErrorCode.ineligible_replica
        unknown = ((1, -1), (2, -1))  # -1: the leader does not know the epochs
        assert await one(0, 0, unknown, 0, version=3) == ErrorCode.none
        harness.store.unregister_broker(3)
        await harness.settle()
        e.update({b: r.epoch for b, r in harness.store.brokers.items()})
        assert harness.state(T, 1)[0].leader == 2
        v = harness.state(T, 1)[1]
        assert await one(1, 1, (2, 3, 1), v, sender=2) == ErrorCode.ineligible_replica  # dead 3
        assert len(harness.store.writes) == writes + 2  # the v3 success, and broker 3's exit

    asyncio.run(scenario())


def test_a_state_written_behind_the_controller_is_invalid_update_version(harness):
    async def scenario():
        topic_id = await _setup(harness)
        epoch = harness.store.brokers[1].epoch
        harness.store.write_behind_the_controller((T, 0), LeaderAndIsr(1, 0, (1, 2, 3), 1))
        response = await _send(harness, request(2, 1, epoch, topic_id, [(0, 0, (1, 2), 0)]))
        assert _partition(response).error_code == ErrorCode.invalid_update_version
        # The controller read the state again: the leader's retry at that version passes.
        assert harness.model.state_versions[(T, 0)] == 1
        response = await _send(harness, request(2, 1, epoch, topic_id, [(0, 0, (1, 2), 1)]))
        assert _partition(response).partition_epoch == 2

    asyncio.run(scenario())


def test_a_controller_that_is_not_active_answers_not_controller(harness):
    async def scenario():
        topic_id = await _setup(harness)
        epoch = harness.store.brokers[1].epoch
        harness.store.another_controller_elected()
        response = await _send(harness, request(2, 1, epoch, topic_id, [(0, 0, (1, 2), 0)]))
        assert response.error_code == ErrorCode.not_controller  # the write was fenced
        assert harness.controller.model is None
        response = await serve(
            harness.controller, request(3, 1, epoch, topic_id, [(0, 0, ((1, epoch),), 0)])
        )
        assert response.error_code == ErrorCode.not_controller

    asyncio.run(scenario())


def test_leader_and_isr_carries_the_partition_epoch_brokers_send_back(harness):
    async def scenario():
        topic_id = await _setup(harness)
        epoch = harness.store.brokers[1].epoch
        await _send(harness, request(2, 1, epoch, topic_id, [(0, 0, (1, 2), 0)]))
        harness.store.unregister_broker(2)  # leaves the ISR: a write, and LeaderAndIsr
        await harness.settle()
        lai = [r for b, r in harness.channel.take() if type(r).__name__ == "LeaderAndIsrRequest"]
        state = partition_states(lai[0])[(T, 0)]
        assert (state.isr, state.leader_epoch, state.partition_epoch) == ((1,), 1, 2)
        assert harness.state(T, 0)[1] == 2

    asyncio.run(scenario())
