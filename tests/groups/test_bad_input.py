"""Proves that the group coordinator answers bad requests from a client on the wire with Kafka's
error codes and keeps serving: a join without a member id, an unknown member, a wrong
generation, a fenced static instance, a session timeout out of bounds, commits to an unknown
topic or with oversized metadata, and group metadata too large to be written."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from group_proof.traffic import create_topic

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from support.proof_lookups import GROUP_KEY, coordinator_of

pytestmark = [pytest.mark.integration]

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT = 11, 14, 12, 8
TIMEOUT_S = 30.0


def coordinator_address(state, group: str) -> tuple[str, int]:
    broker_id = coordinator_of(state.bootstrap_servers, group, GROUP_KEY)
    member = next(m for m in state.members if m.role == "broker" and m.id == broker_id)
    host, port = member.address.rsplit(":", 1)
    return host, int(port)


def join(group: str, member_id: str = "", instance: str | None = None, **changes):
    protocol = schemas.request_schema(JOIN_GROUP, 5).__dataclass_fields__["protocols"].type
    protocol_type = protocol.__args__[0]
    values = {
        "group_id": group,
        "session_timeout": timedelta(seconds=10),
        "rebalance_timeout": timedelta(seconds=10),
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": (protocol_type(name="range", metadata=b"\x00\x01opaque"),),
    }
    values.update(changes)
    return schemas.request_schema(JOIN_GROUP, 5)(**values)


def heartbeat(group: str, generation: int, member_id: str, instance: str | None = None):
    return schemas.request_schema(HEARTBEAT, 3)(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance
    )


def sync(group: str, generation: int, member_id: str, assignment: bytes = b"\x00\x01"):
    request_type = schemas.request_schema(SYNC_GROUP, 3)
    entry = request_type.__dataclass_fields__["assignments"].type.__args__[0]
    return request_type(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        assignments=(entry(member_id=member_id, assignment=assignment),),
    )


def commit(group: str, topic: str, metadata: str = ""):
    request_type = schemas.request_schema(OFFSET_COMMIT, 8)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    return request_type(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            topic_type(
                name=topic,
                partitions=(
                    partition_type(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    ),
                ),
            ),
        ),
    )


async def send(address: tuple[str, int], request):
    connection = await BrokerConnection.open(*address)
    try:
        return await connection.send(request, timeout_s=TIMEOUT_S)
    finally:
        await connection.close()


def call(address: tuple[str, int], request):
    return asyncio.run(send(address, request))


def test_membership_errors(group_cluster, unique):
    group = unique("group")
    address = coordinator_address(group_cluster, group)

    first = call(address, join(group))
    assert first.error_code == ErrorCode.member_id_required  # KIP-394
    member_id = first.member_id
    assert member_id

    joined = call(address, join(group, member_id))
    assert joined.error_code == ErrorCode.none
    assert joined.leader == member_id
    generation = joined.generation_id
    assert call(address, sync(group, generation, member_id)).error_code == ErrorCode.none

    assert call(address, heartbeat(group, generation, member_id)).error_code == ErrorCode.none
    assert call(address, heartbeat(group, generation, "nobody")).error_code == (
        ErrorCode.unknown_member_id
    )
    assert call(address, heartbeat(group, generation + 1, member_id)).error_code == (
        ErrorCode.illegal_generation
    )
    too_short = join(group, member_id, session_timeout=timedelta(milliseconds=10))
    assert call(address, too_short).error_code == ErrorCode.invalid_session_timeout


def test_a_static_instance_replaced_by_a_newer_member_is_fenced(group_cluster, unique):
    group = unique("group")
    address = coordinator_address(group_cluster, group)
    old = call(address, join(group, instance="instance-1"))
    assert old.error_code == ErrorCode.none
    assert call(address, sync(group, old.generation_id, old.member_id)).error_code == 0
    new = call(address, join(group, instance="instance-1"))  # the instance restarted
    assert new.error_code == ErrorCode.none
    assert new.member_id != old.member_id
    stale = heartbeat(group, new.generation_id, old.member_id, instance="instance-1")
    assert call(address, stale).error_code == ErrorCode.fenced_instance_id


def test_bad_commits_get_kafka_error_codes(group_cluster, unique):
    group, topic = unique("group"), unique("topic")
    create_topic(group_cluster.bootstrap_servers, topic, 1)
    address = coordinator_address(group_cluster, group)

    def error_of(request) -> ErrorCode:
        response = call(address, request)
        return response.topics[0].partitions[0].error_code

    assert error_of(commit(group, unique("missing"))) == ErrorCode.unknown_topic_or_partition
    assert error_of(commit(group, topic, "m" * 5000)) == ErrorCode.offset_metadata_too_large
    assert error_of(commit(group, topic, "fine")) == ErrorCode.none


def test_group_metadata_too_large_to_write_fails_the_sync_not_the_broker(group_cluster, unique):
    group = unique("group")
    address = coordinator_address(group_cluster, group)
    protocol_type = (
        schemas.request_schema(JOIN_GROUP, 5).__dataclass_fields__["protocols"].type.__args__[0]
    )
    huge = (protocol_type(name="range", metadata=b"x" * (2 << 20)),)  # 2 MiB > message.max.bytes
    joined = call(address, join(group, instance="big", protocols=huge))
    assert joined.error_code == ErrorCode.none
    synced = call(address, sync(group, joined.generation_id, joined.member_id))
    assert synced.error_code != ErrorCode.none
    # The coordinator still serves this group's partition.
    other = unique("group")
    assert call(coordinator_address(group_cluster, other), join(other)).error_code == (
        ErrorCode.member_id_required
    )
