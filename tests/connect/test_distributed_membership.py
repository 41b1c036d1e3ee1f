"""The distributed workers' group membership on the real cluster: two members join (member ids
through MEMBER_ID_REQUIRED), the leader sees both members' metadata and its assignments reach
each member; a member that stops leaves at once (the other rebalances long before its session
would expire); a member whose coordinator connection is lost finds it again and rejoins with
its member id; a Java Connect worker's protocol in the same group gets
INCONSISTENT_GROUP_PROTOCOL, not our bytes."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.connection import BrokerConnection
from odradek.client.coordinators import find_coordinator
from odradek.connect.distributed.membership import GroupMember
from odradek.connect.distributed.protocol import Assignment, MemberMetadata
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from support.waiting import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.connect]

WAIT_S = 30.0
POLL_S = 0.05
SESSION_MS = 20_000  # long: the rebalance after a stop must come from LeaveGroup, not expiry


class Member:
    def __init__(self, bootstrap: str, group: str, name: str):
        self.name = name
        self.seen: dict[str, MemberMetadata] = {}
        self.assignments: list[Assignment] = []
        self.member = GroupMember(
            bootstrap_servers=bootstrap,
            group_id=group,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=5_000,
            heartbeat_interval_ms=200,
            metadata=lambda: MemberMetadata(f"http://{name}", 7, (name,)),
            assign=self.assign,
            on_assignment=self.on_assignment,
        )
        self.task: asyncio.Task | None = None

    async def assign(self, generation, members):
        self.seen = dict(members)
        return {
            m: Assignment(generation.member_id, f"http://{self.name}", 7, connectors=(m,))
            for m in members
        }

    async def on_assignment(self, generation, assignment):
        self.assignments.append(assignment)

    def start(self):
        self.task = asyncio.get_running_loop().create_task(self.member.run())


async def java_join(bootstrap: str, group: str) -> int:
    """A JoinGroup as Kafka's Java worker sends it (protocol type connect, its protocol names)."""
    async with ClusterClient(bootstrap) as client:
        node = await find_coordinator(client, group)
        host, port = client.broker_addresses[node]
    connection = await BrokerConnection.open(host, port)
    try:
        await connection.negotiate_versions()
        request_type = schemas.request_schema(11, connection.pick_version(11, 7))
        protocol = element_type(request_type, "protocols")
        request = build(
            request_type,
            group_id=group,
            session_timeout=timedelta(milliseconds=SESSION_MS),
            rebalance_timeout=timedelta(milliseconds=5_000),
            member_id="",
            group_instance_id=None,
            protocol_type="connect",
            protocols=(protocol(name="sessioned", metadata=b"\x00\x02java"),),
        )
        answer = await connection.send(request, timeout_s=WAIT_S)
        return answer.error_code
    finally:
        await connection.close()


def test_members_join_sync_leave_and_refuse_java_workers(connect_cluster, unique):
    bootstrap, group = connect_cluster.bootstrap_servers, unique("group")

    async def scenario():
        a, b = Member(bootstrap, group, "a"), Member(bootstrap, group, "b")
        a.start()
        b.start()
        try:
            await wait_until_async(
                lambda: (
                    a.member.generation
                    and b.member.generation
                    and a.member.generation.generation_id == b.member.generation.generation_id
                    and a.assignments
                    and b.assignments
                ),
                "both members in one generation",
                WAIT_S,
                poll_s=POLL_S,
            )
            leader = a if a.member.generation.is_leader else b
            follower = b if leader is a else a
            assert {m.url for m in leader.seen.values()} == {"http://a", "http://b"}
            assert all(m.config_offset == 7 for m in leader.seen.values())
            assert follower.assignments[-1].connectors == (follower.member.member_id,)
            assert follower.assignments[-1].leader_url == f"http://{leader.name}"

            assert await java_join(bootstrap, group) == ErrorCode.inconsistent_group_protocol

            # A lost connection to the coordinator: the member finds it again and rejoins with
            # its member id.
            member_id, joins = follower.member.member_id, follower.member.rebalances
            await follower.member._coordinator.close()
            await wait_until_async(
                lambda: follower.member.rebalances > joins,
                "the follower rejoined",
                WAIT_S,
                poll_s=POLL_S,
            )
            assert follower.member.member_id == member_id

            generation = leader.member.generation.generation_id
            stopped_at = time.monotonic()
            await follower.member.stop()
            await asyncio.wait_for(follower.task, WAIT_S)
            await wait_until_async(
                lambda: (
                    leader.member.generation and leader.member.generation.generation_id > generation
                ),
                "the leader alone in a new generation",
                WAIT_S,
                poll_s=POLL_S,
            )
            assert time.monotonic() - stopped_at < SESSION_MS / 1000 / 2
            assert leader.seen.keys() == {leader.member.member_id}
        finally:
            for m in (a, b):
                await m.member.stop()
                await asyncio.wait_for(m.task, WAIT_S)

    asyncio.run(asyncio.wait_for(scenario(), 90))
