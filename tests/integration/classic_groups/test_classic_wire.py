"""Classic groups on the wire against a real broker process, through the project's client:
KIP-394's first join, a two-member rebalance (the leader gets everyone's metadata, the followers
their assignment), heartbeats and their errors, LeaveGroup v0 and batched v3+, static
membership (a restarted instance keeps the generation, its old member id is fenced), a member
removed after its session timeout, every JoinGroup version, and bad input answered with Kafka's
error codes while the broker keeps serving."""

from __future__ import annotations

import asyncio
import time

import pytest
from classic_wire import (
    call,
    call_retrying,
    coordinator,
    heartbeat,
    join,
    leave,
    send,
    sync,
)

from odradek.errors import ErrorCode

pytestmark = [pytest.mark.integration]


def joined_member(where, group: str, **options):
    first = call_retrying(where, join(group, **options))
    assert first.error_code == ErrorCode.member_id_required
    return first.member_id


def test_two_members_rebalance_sync_and_heartbeat(classic_cluster, unique):
    group = unique("group")
    where = coordinator(classic_cluster.bootstrap_servers, group)
    a_id = joined_member(where, group)
    b_id = joined_member(where, group)

    async def both():
        return await asyncio.gather(send(where, join(group, a_id)), send(where, join(group, b_id)))

    a, b = asyncio.run(both())
    assert a.error_code == b.error_code == ErrorCode.none
    assert a.generation_id == b.generation_id >= 1
    assert a.leader == b.leader in {a_id, b_id}
    leader, follower = (a, b) if a.leader == a_id else (b, a)
    assert {m.member_id for m in leader.members} == {a_id, b_id}
    assert {bytes(m.metadata) for m in leader.members} == {b"\x00\x01opaque"}
    assert follower.members == ()
    generation = leader.generation_id

    async def synced():
        waiting = asyncio.ensure_future(send(where, sync(group, generation, follower.member_id)))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # the follower waits for the leader's assignment
        assignments = {leader.member_id: b"for-leader", follower.member_id: b"for-follower"}
        mine = await send(where, sync(group, generation, leader.member_id, assignments, version=5))
        return mine, await waiting

    mine, theirs = asyncio.run(synced())
    assert (mine.error_code, bytes(mine.assignment)) == (ErrorCode.none, b"for-leader")
    assert (mine.protocol_type, mine.protocol_name) == ("consumer", "range")
    assert (theirs.error_code, bytes(theirs.assignment)) == (ErrorCode.none, b"for-follower")

    for version in (0, 3, 4):
        beat = heartbeat(group, generation, follower.member_id, version=version)
        assert call(where, beat).error_code == ErrorCode.none
    assert call(where, heartbeat(group, generation, "nobody")).error_code == (
        ErrorCode.unknown_member_id
    )
    assert call(where, heartbeat(group, generation + 1, leader.member_id)).error_code == (
        ErrorCode.illegal_generation
    )

    # The follower leaves (v0): the group rebalances; the leader learns it from a heartbeat.
    assert call(where, leave(group, (follower.member_id, None), version=0)).error_code == 0
    assert call(where, heartbeat(group, generation, leader.member_id)).error_code == (
        ErrorCode.rebalance_in_progress
    )
    rejoined = call(where, join(group, leader.member_id))
    assert rejoined.error_code == ErrorCode.none
    assert rejoined.generation_id == generation + 1
    assert [m.member_id for m in rejoined.members] == [leader.member_id]

    # Batched leave (v3+): one error per member.
    answer = call(where, leave(group, (leader.member_id, None), ("ghost", None), version=5))
    assert answer.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in answer.members] == [
        (leader.member_id, ErrorCode.none),
        ("ghost", ErrorCode.unknown_member_id),
    ]


def test_a_static_instance_keeps_its_generation_and_fences_the_old_member(classic_cluster, unique):
    group = unique("group")
    where = coordinator(classic_cluster.bootstrap_servers, group)
    old = call_retrying(where, join(group, instance="instance-1"))
    assert old.error_code == ErrorCode.none  # no MEMBER_ID_REQUIRED for a static member
    assignment = {old.member_id: b"mine"}
    synced = call(
        where, sync(group, old.generation_id, old.member_id, assignment, instance="instance-1")
    )
    assert synced.error_code == ErrorCode.none

    new = call(where, join(group, instance="instance-1", version=9))
    assert new.error_code == ErrorCode.none
    assert new.member_id != old.member_id
    assert new.generation_id == old.generation_id  # no rebalance
    assert new.leader == new.member_id and new.skip_assignment  # v9: keep the assignment
    again = call(where, sync(group, new.generation_id, new.member_id, instance="instance-1"))
    assert bytes(again.assignment) == b"mine"
    stale = heartbeat(group, new.generation_id, old.member_id, instance="instance-1")
    assert call(where, stale).error_code == ErrorCode.fenced_instance_id
    fresh = heartbeat(group, new.generation_id, new.member_id, instance="instance-1")
    assert call(where, fresh).error_code == ErrorCode.none
    gone = call(where, leave(group, ("", "instance-1"), version=4))
    assert [m.error_code for m in gone.members] == [ErrorCode.none]


def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout(
    classic_cluster, unique
):
    group = unique("group")
    where = coordinator(classic_cluster.bootstrap_servers, group)
    member_id = joined_member(where, group, session_ms=1000)
    joined = call(where, join(group, member_id, session_ms=1000))
    assert joined.error_code == ErrorCode.none
    generation = joined.generation_id
    assert call(where, sync(group, generation, member_id, {member_id: b"x"})).error_code == 0
    for _ in range(4):  # alive while it heartbeats
        time.sleep(0.4)
        assert call(where, heartbeat(group, generation, member_id)).error_code == ErrorCode.none
    time.sleep(2.0)
    assert call(where, heartbeat(group, generation, member_id)).error_code == (
        ErrorCode.unknown_member_id
    )


@pytest.mark.parametrize("version", range(10))
def test_every_join_group_version(classic_cluster, unique, version):
    group = unique("group")
    where = coordinator(classic_cluster.bootstrap_servers, group)
    answer = call_retrying(where, join(group, version=version))
    if version >= 4:
        assert answer.error_code == ErrorCode.member_id_required
        answer = call(where, join(group, answer.member_id, version=version))
    assert answer.error_code == ErrorCode.none
    assert answer.member_id and answer.leader == answer.member_id
    assert answer.protocol_name == "range"
    if version >= 7:
        assert answer.protocol_type == "consumer"
    sync_version = min(version, 5)
    synced = call(where, sync(group, answer.generation_id, answer.member_id, version=sync_version))
    assert synced.error_code == ErrorCode.none
    left = call(where, leave(group, (answer.member_id, None), version=min(version, 5)))
    assert left.error_code == ErrorCode.none


def test_bad_input_gets_kafka_error_codes(classic_cluster, unique):
    group = unique("group")
    where = coordinator(classic_cluster.bootstrap_servers, group)
    too_short = call_retrying(where, join(group, session_ms=10))
    assert too_short.error_code == ErrorCode.invalid_session_timeout
    assert call(where, join(group, "ghost")).error_code == ErrorCode.unknown_member_id
    no_protocols = call(where, join(group, protocols=()))
    assert no_protocols.error_code == ErrorCode.inconsistent_group_protocol
    assert call(where, join("", version=3)).error_code == ErrorCode.invalid_group_id
    assert call(where, heartbeat(group, 1, "ghost")).error_code == ErrorCode.unknown_member_id
    assert call(where, sync(group, 1, "ghost")).error_code == ErrorCode.unknown_member_id
    assert call(where, leave(group, ("ghost", None))).error_code == ErrorCode.unknown_member_id
    member_id = joined_member(where, group)
    joined = call(where, join(group, member_id))
    assert joined.error_code == ErrorCode.none
    other_type = call(where, join(group, protocol_type="connect"))
    assert other_type.error_code == ErrorCode.inconsistent_group_protocol
    # The broker still serves the group.
    assert call(where, heartbeat(group, joined.generation_id, member_id)).error_code == 0
