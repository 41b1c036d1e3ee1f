"""A broker process bounds what group members make its coordinator hold (issue 23, scenarios 5
and 6): large protocol metadata, a flood of pending member ids, and group.max.size as a real
client sees it.

One broker (with ZooKeeper and a controller) as real processes, ``group.max.size`` 10, the
coordinator's budget 12 MiB and the other group bounds at their defaults (``groups.limits``);
raw requests through the project's codec, the broker's resident memory read from
``/proc/<pid>/status``, figures printed.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time

import pytest
from classic_wire import JOIN_GROUP, call_retrying, coordinator, join, send

from odradek.errors import ErrorCode
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.framing import encode_frame
from support.processes import rss_bytes

pytestmark = [pytest.mark.integration]

MIB = 1024 * 1024
GROUP_MAX_SIZE = 10
MEMBER_METADATA_MAX_BYTES = 1 * MIB  # odradek.group.member.metadata.max.bytes, default
GROUP_METADATA_MAX_BYTES = 4 * MIB  # odradek.group.metadata.max.bytes, default
PENDING_PER_CONNECTION = 16  # odradek.group.max.pending.members.per.connection, default
COORDINATOR_MAX_BYTES = 12 * MIB  # odradek.group.coordinator.metadata.max.bytes, here
# Scenario 5 (40 members with 10 MiB of metadata each) held 1.3 GB before the bounds, and 10
# of them (group.max.size here) 100 MiB at least. With the bounds the groups hold ~4 MiB; the
# rest of the growth (31-50 MiB measured) is requests in flight (40 x 900 KiB at once, 10 MiB
# ones being decoded) and the allocator's slack.
RSS_GROWTH_MAX = 96 * MIB
PIPELINED = 3_000  # scenario 6: JoinGroups without a member id on one connection
FLOOD_CONNECTIONS = 8


@pytest.fixture(scope="module")
def bounded(tmp_path_factory, local_cluster):
    overrides = {
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "300",
        "group.max.size": str(GROUP_MAX_SIZE),
        "odradek.group.coordinator.metadata.max.bytes": str(COORDINATOR_MAX_BYTES),
    }
    data_dir = tmp_path_factory.mktemp("group-bounds")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        yield state


def ready(state, group: str) -> tuple[tuple[str, int], int]:
    """The group's coordinator, loaded (a first JoinGroup answered), and the broker's pid."""
    where = coordinator(state.bootstrap_servers, group)
    first = call_retrying(where, join(f"{group}-warmup"))
    assert first.error_code == ErrorCode.member_id_required, first
    (broker,) = [m for m in state.members if m.role == "broker"]
    return where, broker.pid


async def two_step(where, group: str, metadata: bytes, session_ms: int = 30_000):
    """KIP-394's join: a member id first, then the join with it (waits for the join phase)."""
    protocols = (("range", metadata),)
    first = await send(where, join(group, protocols=protocols, session_ms=session_ms))
    if first.error_code != ErrorCode.member_id_required:
        return first
    return await send(
        where, join(group, first.member_id, protocols=protocols, session_ms=session_ms)
    )


def test_large_member_metadata_is_refused_and_the_coordinator_stays_small(bounded, unique):
    group = unique("large")
    where, pid = ready(bounded, group)
    before = rss_bytes(pid)

    async def scenario() -> tuple[list, list]:
        # Scenario 5 as reported: 40 members with 10 MiB of protocol metadata each.
        huge = [await two_step(where, group, os.urandom(10 * MIB)) for _ in range(40)]
        # Under the member bound: the group's bound (4 MiB) stops them.
        large = await asyncio.gather(
            *(two_step(where, f"{group}-2", os.urandom(900 * 1024)) for _ in range(40))
        )
        return huge, large

    started = time.monotonic()
    huge, large = asyncio.run(scenario())
    after = rss_bytes(pid)
    assert {a.error_code for a in huge} == {ErrorCode.invalid_request}
    joined = [a for a in large if a.error_code == ErrorCode.none]
    refused = [a for a in large if a.error_code == ErrorCode.group_max_size_reached]
    assert len(joined) + len(refused) == 40, {a.error_code for a in large}
    assert 1 <= len(joined) <= GROUP_METADATA_MAX_BYTES // (900 * 1024)
    (leader,) = [a for a in joined if a.members]
    answer_bytes = sum(len(m.metadata) for m in leader.members)
    print(
        f"\nscenario 5: rss {before / MIB:.0f} MiB before, {after / MIB:.0f} MiB after "
        f"(+{(after - before) / MIB:.1f} MiB; 1.3 GB without bounds); 40 x 10 MiB refused "
        f"INVALID_REQUEST; 40 x 900 KiB: {len(joined)} joined, {len(refused)} "
        f"GROUP_MAX_SIZE_REACHED; leader's JoinGroup answer {answer_bytes / MIB:.2f} MiB "
        f"(250 MiB without bounds); {time.monotonic() - started:.1f} s"
    )
    assert answer_bytes <= GROUP_METADATA_MAX_BYTES
    assert after - before < RSS_GROWTH_MAX


async def pipelined_joins(where, groups: list[str], count: int) -> list[ErrorCode]:
    """``count`` JoinGroup v5 without a member id (to ``groups`` in turn), written at once on one
    connection, and the error code of each answer (in order)."""
    reader, writer = await asyncio.open_connection(*where)
    try:
        requests = [join(group, session_ms=1_800_000) for group in groups]
        frames = [
            b"".join(encode_frame([encode_request(requests[i % len(groups)], i, "flood")]))
            for i in range(count)
        ]
        writer.write(b"".join(frames))
        codes = []
        for _ in range(count):
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
            frame = await asyncio.wait_for(reader.readexactly(size), 30)
            codes.append(ErrorCode(decode_response(JOIN_GROUP, 5, frame).body.error_code))
        return codes
    finally:
        writer.close()


def test_a_flood_of_joins_without_member_id_leaves_few_pending_members(bounded, unique):
    where, pid = ready(bounded, unique("flood-warmup"))
    before = rss_bytes(pid)
    started = time.monotonic()
    # One connection, many groups: its pending member ids are bounded per connection.
    groups = [unique(f"flood-{i}") for i in range(50)]
    one = asyncio.run(pipelined_joins(where, groups, PIPELINED))
    one_elapsed = time.monotonic() - started

    async def many() -> list[list[ErrorCode]]:
        group = unique("flood-many")
        return await asyncio.gather(
            *(pipelined_joins(where, [group], 200) for _ in range(FLOOD_CONNECTIONS))
        )

    spread = asyncio.run(many())
    after = rss_bytes(pid)
    pending_one = one.count(ErrorCode.member_id_required)
    pending_many = sum(codes.count(ErrorCode.member_id_required) for codes in spread)
    print(
        f"\nscenario 6: {PIPELINED} pipelined JoinGroups on one connection: {pending_one} "
        f"pending member ids, {one.count(ErrorCode.group_max_size_reached)} "
        f"GROUP_MAX_SIZE_REACHED in {one_elapsed:.1f} s; {FLOOD_CONNECTIONS} x 200 on one "
        f"group: {pending_many} pending; rss {before / MIB:.0f} -> {after / MIB:.0f} MiB "
        f"(+{(after - before) / MIB:.1f} MiB)"
    )
    assert pending_one == PENDING_PER_CONNECTION
    assert set(one) == {ErrorCode.member_id_required, ErrorCode.group_max_size_reached}
    assert pending_many == GROUP_MAX_SIZE
    assert after - before < RSS_GROWTH_MAX


def test_a_real_consumer_is_refused_by_a_full_group(bounded, unique):
    from kafka import KafkaConsumer
    from kafka.errors import GroupMaxSizeReachedError

    group = unique("full")
    where, _ = ready(bounded, group)

    async def fill() -> list:
        return await asyncio.gather(
            *(two_step(where, group, b"\x00\x01m", 60_000) for _ in range(GROUP_MAX_SIZE))
        )

    members = asyncio.run(fill())
    assert {m.error_code for m in members} == {ErrorCode.none}
    consumer = KafkaConsumer(
        bootstrap_servers=bounded.bootstrap_servers,
        group_id=group,
        session_timeout_ms=6000,
        request_timeout_ms=20000,
    )
    try:
        consumer.subscribe(topics=[unique("topic")])
        with pytest.raises(GroupMaxSizeReachedError) as refused:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
        print(f"\ngroup.max.size {GROUP_MAX_SIZE}: kafka-python consumer got {refused.value!r}")
    finally:
        consumer.close()


def test_the_coordinators_budget_refuses_joins_with_a_retriable_code(bounded, unique):
    where, pid = ready(bounded, unique("budget-warmup"))
    before = rss_bytes(pid)

    async def groups_of_large_members() -> list[list[ErrorCode]]:
        codes = []
        for g in range(6):  # 4 x 900 KiB each: the group's bound holds them, the budget 3 groups
            answers = await asyncio.gather(
                *(two_step(where, unique(f"budget-{g}"), os.urandom(900 * 1024)) for _ in range(4))
            )
            codes.append([a.error_code for a in answers])
        return codes

    codes = asyncio.run(groups_of_large_members())
    after = rss_bytes(pid)
    joined = sum(c.count(ErrorCode.none) for c in codes)
    refused = sum(c.count(ErrorCode.coordinator_not_available) for c in codes)
    print(
        f"\ncoordinator budget {COORDINATOR_MAX_BYTES // MIB} MiB: {joined} of 24 members of "
        f"900 KiB joined, {refused} COORDINATOR_NOT_AVAILABLE; "
        f"rss +{(after - before) / MIB:.1f} MiB"
    )
    assert joined + refused == 24, codes
    assert refused > 0
    assert joined * 900 * 1024 <= COORDINATOR_MAX_BYTES
