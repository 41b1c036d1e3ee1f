"""The group coordinator's memory bounds (``groups.limits``) on the runtime with the in-memory
log: the account follows joins, leaves and expiries back to zero, and each bound refuses with
its code while changing nothing."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.groups.classic.messages import JoinAnswer, JoinRequest, LeaveMember
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.limits import PENDING_MEMBER_BYTES, GroupLimits
from odradek.groups.shard import ShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded

CONFIG = GroupCoordinatorConfig(
    group_initial_rebalance_delay_ms=20,
    group_min_session_timeout_ms=10,
    offsets_topic_num_partitions=1,
    group_member_metadata_max_bytes=10_000,
    group_metadata_max_bytes=45_000,
    group_coordinator_metadata_max_bytes=60_000,
    group_max_pending_members_per_connection=3,
)


async def start(config: GroupCoordinatorConfig = CONFIG):
    log = MemoryLog()
    log.leader_epoch[0] = 0
    limits = GroupLimits(config)
    runtime = group_runtime(
        log,
        lambda partition, timer: ShardContext(
            partition,
            config,
            timer,
            None,  # type: ignore[arg-type]
            lambda: 0,
            limits=limits,
        ),
        write_timeout_ms=200,
    )
    runtime.on_elected(0, 0)
    await loaded(runtime, 0)
    return runtime, limits


def request(group: str, member_id: str = "", metadata: bytes = b"m", **fields) -> JoinRequest:
    values = dict(
        group_id=group,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(("range", metadata),),
        session_timeout_ms=1000,
        rebalance_timeout_ms=1000,
        client_id="client",
        client_host="/127.0.0.1",
        require_known_member_id=True,
        connection_id="c1",
    )
    return JoinRequest(**{**values, **fields})


async def join(runtime: CoordinatorRuntime, req: JoinRequest) -> JoinAnswer:
    return await runtime.write(0, lambda shard: shard.classic.join(req))


@in_loop
async def test_pending_ids_are_bounded_per_connection_and_released() -> None:
    runtime, limits = await start()
    firsts = [await join(runtime, request(f"g{i}")) for i in range(3)]
    assert {a.error for a in firsts} == {ErrorCode.member_id_required}
    assert limits.total_bytes == 3 * PENDING_MEMBER_BYTES
    refused = await join(runtime, request("g3"))
    assert refused.error == ErrorCode.group_max_size_reached
    other = await join(runtime, request("g3", connection_id="c2"))
    assert other.error == ErrorCode.member_id_required
    # A pending id that leaves frees its connection's place.
    await runtime.write(
        0, lambda shard: shard.classic.leave("g0", [LeaveMember(firsts[0].member_id, None)])
    )
    assert (await join(runtime, request("g4"))).error == ErrorCode.member_id_required
    await runtime.close()


@in_loop
async def test_metadata_bounds_refuse_with_kafkas_codes_and_the_account_returns_to_zero() -> None:
    runtime, limits = await start()
    too_big = await join(runtime, request("g", metadata=b"x" * 10_001))
    assert too_big.error == ErrorCode.invalid_request
    assert limits.total_bytes == 0
    joined = []
    for i in range(5):
        member = {"session_timeout_ms": 300, "connection_id": f"c{i}"}
        first = await join(runtime, request("g", metadata=b"x" * 9_000, **member))
        assert first.error == ErrorCode.member_id_required
        joining = join(runtime, request("g", first.member_id, b"x" * 9_000, **member))
        joined.append(asyncio.ensure_future(joining))
    answers = await asyncio.gather(*joined)
    codes = [a.error for a in answers]
    # 4 x (9,000 + ~1 KiB) and the pending ids fit in 45,000 bytes; the fifth would not.
    assert codes.count(ErrorCode.none) == 4, codes
    assert codes.count(ErrorCode.group_max_size_reached) == 1, codes
    leader = next(a for a in answers if a.members)
    assert sum(len(m.metadata) for m in leader.members) <= CONFIG.group_metadata_max_bytes
    # The group is at its bound: a member's rejoin with the same metadata is still served.
    rejoin = request("g", leader.member_id, b"x" * 9_000, session_timeout_ms=300)
    assert (await join(runtime, rejoin)).error == ErrorCode.none
    # Another group: within its own bound, but not within the coordinator's.
    big = replace(CONFIG, group_coordinator_metadata_max_bytes=limits.total_bytes + 5_000)
    runtime2, limits2 = await start(big)
    limits2.set_held("other", limits.total_bytes)
    first = await join(runtime2, request("g2", metadata=b"x" * 9_000))
    second = await join(runtime2, request("g2", first.member_id, b"x" * 9_000))
    assert second.error == ErrorCode.coordinator_not_available
    await runtime2.close()
    # Sessions expire (nobody syncs or heartbeats): the account goes back to zero.
    for _ in range(200):
        if limits.total_bytes == 0:
            break
        await asyncio.sleep(0.02)
    assert limits.total_bytes == 0
    await runtime.close()
