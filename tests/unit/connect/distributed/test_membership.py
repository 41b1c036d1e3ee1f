"""The group member's state machine against a scripted coordinator: MEMBER_ID_REQUIRED gives the
id to join with, the leader's assignments go out in SyncGroup, NOT_COORDINATOR makes it look the
coordinator up again, REBALANCE_IN_PROGRESS makes it rejoin, UNKNOWN_MEMBER_ID drops its id and
revokes everything first, INCONSISTENT_GROUP_PROTOCOL stops it with ``MembershipError``."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

import pytest

from odradek.connect.distributed.membership import (
    HEARTBEAT,
    JOIN_GROUP,
    SYNC_GROUP,
    GroupMember,
    MembershipError,
)
from odradek.connect.distributed.protocol import (
    Assignment,
    MemberMetadata,
    decode_assignment,
    encode_assignment,
    encode_metadata,
)
from odradek.errors import ErrorCode

META = encode_metadata(MemberMetadata("http://me", 3))


def join(error=ErrorCode.none, member="m1", generation=1, leader="m1"):
    members = [SimpleNamespace(member_id=member, metadata=META)] if leader == member else []
    return SimpleNamespace(
        error_code=error,
        member_id=member,
        generation_id=generation,
        leader=leader,
        members=members,
    )


def sync(error=ErrorCode.none, assignment=b""):
    return SimpleNamespace(error_code=error, assignment=assignment)


def beat(error=ErrorCode.none):
    return SimpleNamespace(error_code=error)


class _Connection:
    closed = False

    async def close(self):
        self.closed = True


class ScriptedMember(GroupMember):
    """A member whose coordinator answers from a script of (api key, response)."""

    def __init__(self, script, **kwargs):
        self.script = list(script)
        self.sent: list[tuple[int, dict]] = []
        self.lookups = 0
        self.revoked_all = 0
        self.assignments: list[tuple[int, Assignment]] = []
        super().__init__(
            bootstrap_servers="127.0.0.1:9",
            group_id="g",
            session_timeout_ms=3000,
            rebalance_timeout_ms=3000,
            heartbeat_interval_ms=1,
            metadata=lambda: MemberMetadata("http://me", 3),
            assign=self.assign,
            on_assignment=self.on_assignment,
            on_revoke_all=self.revoke_all,
            **kwargs,
        )

    async def assign(self, generation, members):
        return {m: Assignment(generation.member_id, "http://me", 3, ("c",)) for m in members}

    async def on_assignment(self, generation, assignment):
        self.assignments.append((generation.generation_id, assignment))

    async def revoke_all(self):
        self.revoked_all += 1

    async def _connect_coordinator(self):
        self.lookups += 1
        self._coordinator = _Connection()

    async def _send(self, api_key, max_version, timeout_s, **fields):
        self.sent.append((api_key, fields))
        if not self.script:
            await self.stop()
            raise asyncio.CancelledError
        expected, response = self.script.pop(0)
        assert api_key == expected, (api_key, expected, fields)
        return response


def run(member: ScriptedMember):
    async def go():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(member.run(), 10)

    asyncio.run(go())


def test_join_with_the_given_id_sync_heartbeat_and_every_error_path():
    assignment = encode_assignment(Assignment("m1", "http://me", 3, ("c",)))
    script = [
        (JOIN_GROUP, join(ErrorCode.member_id_required)),
        (JOIN_GROUP, join()),
        (SYNC_GROUP, sync(assignment=assignment)),
        (HEARTBEAT, beat()),
        (HEARTBEAT, beat(ErrorCode.not_coordinator)),
        (JOIN_GROUP, join(generation=1)),
        (SYNC_GROUP, sync(assignment=assignment)),
        (HEARTBEAT, beat(ErrorCode.rebalance_in_progress)),
        (JOIN_GROUP, join(generation=2)),
        (SYNC_GROUP, sync(ErrorCode.rebalance_in_progress)),
        (JOIN_GROUP, join(generation=3)),
        (SYNC_GROUP, sync(assignment=assignment)),
        (HEARTBEAT, beat(ErrorCode.unknown_member_id)),
        (JOIN_GROUP, join(ErrorCode.inconsistent_group_protocol, member="")),
    ]
    member = ScriptedMember(script)
    with pytest.raises(MembershipError, match="odradek-cooperative-v1"):
        run(member)
    joins = [fields for key, fields in member.sent if key == JOIN_GROUP]
    assert [j["member_id"] for j in joins] == ["", "m1", "m1", "m1", "m1", ""]
    assert all(j["protocol_type"] == "connect" for j in joins)
    assert joins[0]["protocols"][0][0] == "odradek-cooperative-v1"
    leader_sync = next(fields for key, fields in member.sent if key == SYNC_GROUP)
    ((to, sent),) = leader_sync["assignments"]
    assert to == "m1" and decode_assignment(sent).connectors == ("c",)
    assert [g for g, _ in member.assignments] == [1, 1, 3]
    assert member.lookups == 2  # the first, and after NOT_COORDINATOR
    assert member.revoked_all == 1  # after UNKNOWN_MEMBER_ID, before joining again
