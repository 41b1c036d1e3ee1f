"""The classic group protocol on the coordinator runtime with the in-memory log: KIP-394 joins,
the join and sync phases, heartbeats and their errors, session and rebalance timeouts, static
membership (KIP-345), LeaveGroup, loading a group back from its records, and what the rest of
the coordinator asks of a ``Group``."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.groups.classic.group import ClassicGroup, subscribed_topics
from odradek.groups.classic.messages import JoinAnswer, JoinRequest, LeaveMember, SyncAnswer
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupType
from odradek.groups.records import decode
from odradek.groups.records.classic import GroupMetadataKey
from odradek.groups.shard import ShardContext
from support.coordinator_memory import MemoryLog, in_loop, in_real_loop, loaded

CONFIG = GroupCoordinatorConfig(
    group_initial_rebalance_delay_ms=50,
    group_min_session_timeout_ms=10,
    offsets_topic_num_partitions=1,
)
GROUP = "g"


def subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return out + b"\xff\xff\xff\xff"  # null user data


RANGE_T = (("range", subscription("t")),)


async def start(log: MemoryLog | None = None, config: GroupCoordinatorConfig = CONFIG):
    log = log or MemoryLog()
    log.leader_epoch[0] = 0
    runtime = group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, None, lambda: 0),  # type: ignore[arg-type]
        write_timeout_ms=200,
    )
    runtime.on_elected(0, 0)
    await loaded(runtime, 0)
    return runtime, log


def request(
    member_id: str = "",
    *,
    instance: str | None = None,
    session_ms: int = 1000,
    rebalance_ms: int = 1000,
    protocols=RANGE_T,
    protocol_type: str = "consumer",
    require_known: bool = True,
) -> JoinRequest:
    return JoinRequest(
        group_id=GROUP,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=tuple(protocols),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id="client",
        client_host="/127.0.0.1",
        require_known_member_id=require_known,
    )


async def join(runtime: CoordinatorRuntime, req: JoinRequest) -> JoinAnswer:
    return await runtime.write(0, lambda shard: shard.classic.join(req))


async def join_new(runtime: CoordinatorRuntime, **kwargs) -> JoinAnswer:
    """KIP-394: the first join gets a member id, the second one joins with it."""
    first = await join(runtime, request(**kwargs))
    assert first.error == ErrorCode.member_id_required
    return await join(runtime, request(first.member_id, **kwargs))


async def sync(
    runtime: CoordinatorRuntime,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    instance: str | None = None,
) -> SyncAnswer:
    return await runtime.write(
        0,
        lambda shard: shard.classic.sync(
            GROUP, member_id, instance, generation, None, None, assignments or {}
        ),
    )


async def heartbeat(
    runtime: CoordinatorRuntime, member_id: str, generation: int, instance: str | None = None
) -> ErrorCode:
    return await runtime.write(
        0, lambda shard: shard.classic.heartbeat(GROUP, member_id, instance, generation)
    )


async def leave(runtime: CoordinatorRuntime, *members: LeaveMember) -> list[LeaveMember]:
    return await runtime.write(0, lambda shard: shard.classic.leave(GROUP, list(members)))


def group_of(runtime: CoordinatorRuntime) -> ClassicGroup:
    group = runtime._slots[0].shard.groups[GROUP]
    assert isinstance(group, ClassicGroup)
    return group


def group_records(log: MemoryLog) -> list:
    records = [decode(r.key, r.value) for r in log.records.get(0, [])]
    return [r for r in records if isinstance(r.key, GroupMetadataKey)]


async def stable_group_of_two(runtime: CoordinatorRuntime):
    a, b = await asyncio.gather(join_new(runtime), join_new(runtime))
    assert a.error == b.error == ErrorCode.none
    assert a.generation_id == b.generation_id == 1
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    assert follower.leader == leader.member_id
    assert {m.member_id for m in leader.members} == {a.member_id, b.member_id}
    assert follower.members == ()
    assignments = {leader.member_id: b"L", follower.member_id: b"F"}
    follower_sync = asyncio.ensure_future(sync(runtime, follower.member_id, 1))
    await asyncio.sleep(0.01)
    assert not follower_sync.done()  # waits for the leader's assignment
    leader_answer = await sync(runtime, leader.member_id, 1, assignments)
    assert leader_answer == SyncAnswer(ErrorCode.none, b"L", "consumer", "range")
    assert (await follower_sync).assignment == b"F"
    return leader, follower


@in_loop
async def test_a_new_member_first_gets_its_id_then_joins_after_the_initial_delay() -> None:
    runtime, _ = await start()
    first = await join(runtime, request())
    assert first.error == ErrorCode.member_id_required
    assert first.member_id.startswith("client-")
    assert first.generation_id == -1
    joined = await join(runtime, request(first.member_id))
    assert joined.error == ErrorCode.none
    assert joined.member_id == first.member_id == joined.leader
    assert joined.generation_id == 1
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [first.member_id]
    assert group_of(runtime).state_name() == "CompletingRebalance"
    await runtime.close()


@in_loop
async def test_v3_joins_without_asking_for_an_id_first() -> None:
    runtime, _ = await start()
    joined = await join(runtime, request(require_known=False))
    assert joined.error == ErrorCode.none and joined.member_id
    await runtime.close()


@in_loop
async def test_join_sync_stable_and_the_generation_is_written() -> None:
    runtime, log = await start()
    leader, follower = await stable_group_of_two(runtime)
    group = group_of(runtime)
    assert group.state_name() == "Stable"
    (record,) = group_records(log)
    assert record.value.generation == 1
    assert {m.member_id: m.assignment for m in record.value.members} == {
        leader.member_id: b"L",
        follower.member_id: b"F",
    }
    assert await heartbeat(runtime, follower.member_id, 1) == ErrorCode.none
    # A synced member asking again gets its assignment at once.
    assert (await sync(runtime, follower.member_id, 1)).assignment == b"F"
    description = group.describe()
    assert description.state == "Stable" and description.protocol_name == "range"
    assert {m.assignment for m in description.members} == {b"L", b"F"}
    await runtime.close()


@in_loop
async def test_heartbeat_and_sync_errors() -> None:
    runtime, _ = await start()
    leader, follower = await stable_group_of_two(runtime)
    assert await heartbeat(runtime, "nobody", 1) == ErrorCode.unknown_member_id
    assert await heartbeat(runtime, leader.member_id, 2) == ErrorCode.illegal_generation
    assert (await sync(runtime, "nobody", 1)).error == ErrorCode.unknown_member_id
    assert (await sync(runtime, leader.member_id, 7)).error == ErrorCode.illegal_generation
    wrong_protocol = await runtime.write(
        0,
        lambda shard: shard.classic.sync(GROUP, leader.member_id, None, 1, "connect", None, {}),
    )
    assert wrong_protocol.error == ErrorCode.inconsistent_group_protocol
    unknown_group = await runtime.write(
        0, lambda shard: shard.classic.heartbeat("other", "m", None, 1)
    )
    assert unknown_group == ErrorCode.unknown_member_id
    other = await join(runtime, request(protocol_type="connect"))
    assert other.error == ErrorCode.inconsistent_group_protocol
    other = await join(runtime, request(protocols=(("roundrobin", b""),)))
    assert other.error == ErrorCode.inconsistent_group_protocol
    await runtime.close()


@in_loop
async def test_a_joining_member_rebalances_the_group() -> None:
    runtime, _ = await start()
    leader, follower = await stable_group_of_two(runtime)
    newcomer = asyncio.ensure_future(join_new(runtime))
    await asyncio.sleep(0.02)
    assert group_of(runtime).state_name() == "PreparingRebalance"
    assert await heartbeat(runtime, follower.member_id, 1) == ErrorCode.rebalance_in_progress
    assert (await sync(runtime, follower.member_id, 1)).error == ErrorCode.rebalance_in_progress
    rejoined = await asyncio.gather(
        join(runtime, request(leader.member_id)), join(runtime, request(follower.member_id))
    )
    answers = [*rejoined, await newcomer]
    assert {a.generation_id for a in answers} == {2}
    assert {a.error for a in answers} == {ErrorCode.none}
    leaders = [a for a in answers if a.members]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    await runtime.close()


@in_loop
async def test_a_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout() -> None:
    runtime, _ = await start()
    leader, follower = await stable_group_of_two(runtime)
    # The follower rejoins with other metadata; the leader never does.
    changed = request(follower.member_id, protocols=(("range", subscription("t", "u")),))
    answer = await asyncio.wait_for(join(runtime, changed), 3)
    assert answer.error == ErrorCode.none and answer.generation_id == 2
    assert answer.leader == follower.member_id
    assert list(group_of(runtime).members) == [follower.member_id]
    await runtime.close()


@in_loop
async def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() -> None:
    runtime, log = await start()
    joined = await join_new(runtime, session_ms=100)
    assert (await sync(runtime, joined.member_id, 1, {joined.member_id: b"A"})).error == 0
    for _ in range(3):
        await asyncio.sleep(0.06)
        assert await heartbeat(runtime, joined.member_id, 1) == ErrorCode.none
    await asyncio.sleep(0.3)
    group = group_of(runtime)
    assert group.state_name() == "Empty" and not group.members
    assert group.generation_id == 2
    assert await heartbeat(runtime, joined.member_id, 1) == ErrorCode.unknown_member_id
    last = group_records(log)[-1]
    assert last.value.generation == 2 and last.value.members == ()
    await runtime.close()


@in_loop
async def test_an_unused_member_id_expires() -> None:
    runtime, _ = await start()
    first = await join(runtime, request(session_ms=50))
    assert first.member_id in group_of(runtime).pending_members
    await asyncio.sleep(0.15)
    assert not group_of(runtime).pending_members
    await runtime.close()


@in_loop
async def test_leave_group_batched_with_errors_per_member() -> None:
    runtime, log = await start()
    leader, follower = await stable_group_of_two(runtime)
    answers = await leave(
        runtime,
        LeaveMember(follower.member_id, None),
        LeaveMember("nobody", None),
        LeaveMember("", "no-such-instance"),
    )
    assert [a.error for a in answers] == [
        ErrorCode.none,
        ErrorCode.unknown_member_id,
        ErrorCode.unknown_member_id,
    ]
    assert group_of(runtime).state_name() == "PreparingRebalance"
    rejoined = await join(runtime, request(leader.member_id))
    assert rejoined.generation_id == 2 and len(rejoined.members) == 1
    (answer,) = await leave(runtime, LeaveMember(leader.member_id, None))
    assert answer.error == ErrorCode.none
    group = group_of(runtime)
    assert group.state_name() == "Empty" and group.generation_id == 3
    assert group_records(log)[-1].value.members == ()
    with pytest.raises(GroupError) as unknown:
        await runtime.write(0, lambda shard: shard.classic.leave("other", []))
    assert unknown.value.error_code == ErrorCode.unknown_member_id
    await runtime.close()


@in_loop
async def test_a_static_member_rejoins_without_a_rebalance_and_fences_its_old_id() -> None:
    runtime, log = await start()
    old = await join(runtime, request(instance="i-1"))  # static: no MEMBER_ID_REQUIRED
    assert old.error == ErrorCode.none and old.generation_id == 1
    assert (await sync(runtime, old.member_id, 1, {old.member_id: b"A"}, "i-1")).error == 0
    new = await join(runtime, request(instance="i-1"))
    assert new.error == ErrorCode.none
    assert new.member_id != old.member_id
    assert new.generation_id == 1
    assert new.leader == old.member_id and not new.members  # before v9: acts as a follower
    group = group_of(runtime)
    assert group.state_name() == "Stable"
    assert group.members[new.member_id].assignment == b"A"
    assert group_records(log)[-1].value.members[0].member_id == new.member_id
    assert await heartbeat(runtime, old.member_id, 1, "i-1") == ErrorCode.fenced_instance_id
    assert await heartbeat(runtime, new.member_id, 1, "i-1") == ErrorCode.none
    assert (await sync(runtime, new.member_id, 1, instance="i-1")).assignment == b"A"
    (fenced,) = await leave(runtime, LeaveMember(old.member_id, "i-1"))
    assert fenced.error == ErrorCode.fenced_instance_id
    # New metadata: the group rebalances.
    changed = request(instance="i-1", protocols=(("range", subscription("t", "u")),))
    again = await join(runtime, changed)
    assert again.error == ErrorCode.none and again.generation_id == 2
    await runtime.close()


@in_loop
async def test_the_group_is_loaded_back_from_its_records() -> None:
    runtime, log = await start()
    leader, follower = await stable_group_of_two(runtime)
    await runtime.close()
    loaded_again, _ = await start(log)
    group = group_of(loaded_again)
    assert group.state_name() == "Stable"
    assert group.generation_id == 1 and group.leader_id == leader.member_id
    assert group.members[follower.member_id].assignment == b"F"
    assert await heartbeat(loaded_again, follower.member_id, 1) == ErrorCode.none
    assert (await sync(loaded_again, leader.member_id, 1)).assignment == b"L"
    await loaded_again.close()


@in_loop
async def test_the_loaded_members_sessions_restart() -> None:
    runtime, log = await start()
    joined = await join_new(runtime, session_ms=100)
    await sync(runtime, joined.member_id, 1, {joined.member_id: b"A"})
    await runtime.close()
    loaded_again, _ = await start(log)
    await asyncio.sleep(0.3)
    assert group_of(loaded_again).state_name() == "Empty"
    await loaded_again.close()


@in_loop
async def test_a_tombstone_makes_the_group_dead() -> None:
    runtime, _ = await start()
    joined = await join_new(runtime)
    await sync(runtime, joined.member_id, 1)
    await leave(runtime, LeaveMember(joined.member_id, None))
    group = group_of(runtime)
    group.validate_delete_group()
    await runtime.write(0, lambda shard: _result(group.tombstones()))
    assert GROUP not in runtime._slots[0].shard.groups
    assert group.state_name() == "Dead"
    await runtime.close()


def _result(records):
    from odradek.coordinator.result import Result

    return Result(records=records)


@in_loop
async def test_bad_joins() -> None:
    runtime, _ = await start(config=replace(CONFIG, group_max_size=1))
    too_short = await join(runtime, request(session_ms=1))
    assert too_short.error == ErrorCode.invalid_session_timeout
    assert (await join(runtime, request("ghost"))).error == ErrorCode.unknown_member_id
    assert (await join(runtime, request(protocols=()))).error == (
        ErrorCode.inconsistent_group_protocol
    )
    assert GROUP not in runtime._slots[0].shard.groups  # nothing created by bad joins
    nameless = await runtime.write(
        0, lambda shard: shard.classic.join(replace(request(), group_id=""))
    )
    assert nameless.error == ErrorCode.invalid_group_id
    joined = await join_new(runtime)
    await sync(runtime, joined.member_id, 1)
    full = await join(runtime, request())
    assert full.error == ErrorCode.group_max_size_reached
    await runtime.close()


@in_loop
async def test_offset_commit_validation() -> None:
    runtime, _ = await start()
    group = ClassicGroup("empty")
    group.validate_offset_commit("", None, -1)  # a simple consumer or an admin
    leader, follower = await stable_group_of_two(runtime)
    stable = group_of(runtime)
    assert stable.type is GroupType.CLASSIC
    stable.validate_offset_commit(leader.member_id, None, 1)
    for args, code in [
        (("", None, -1), ErrorCode.unknown_member_id),
        (("nobody", None, 1), ErrorCode.unknown_member_id),
        ((leader.member_id, None, 2), ErrorCode.illegal_generation),
        ((leader.member_id, "i-9", 1), ErrorCode.unknown_member_id),
    ]:
        with pytest.raises(GroupError) as refused:
            stable.validate_offset_commit(*args)
        assert refused.value.error_code == code
    with pytest.raises(GroupError) as busy:
        stable.validate_delete_group()
    assert busy.value.error_code == ErrorCode.non_empty_group
    assert stable.is_subscribed_to("t") and not stable.is_subscribed_to("u")
    assert stable.protocol_type() == "consumer"
    await runtime.close()


def test_subscribed_topics_of_consumer_metadata() -> None:
    assert subscribed_topics(subscription("a", "b")) == {"a", "b"}
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x01\x00\x09ab") is None


@in_loop
async def test_unloading_answers_what_waits() -> None:
    runtime, _ = await start()
    waiting = asyncio.ensure_future(join_new(runtime))
    await asyncio.sleep(0.01)
    runtime.on_resigned(0)
    answer = await waiting
    assert answer.error == ErrorCode.not_coordinator
    await runtime.close()


@in_loop
async def test_the_initial_delay_waits_again_while_members_keep_arriving() -> None:
    # Margins a busy machine keeps (the unit tier shares 2 cores between 2 workers): the second
    # join has 200 ms to arrive inside the first delay, and the check comes 200 ms before the
    # extended one ends (the rebalance timeout, which caps the extension, is well above both).
    runtime, _ = await start(config=replace(CONFIG, group_initial_rebalance_delay_ms=500))
    first = asyncio.ensure_future(join_new(runtime, rebalance_ms=5000))
    await asyncio.sleep(0.3)
    second = asyncio.ensure_future(join_new(runtime, rebalance_ms=5000))  # wait once more
    await asyncio.sleep(0.3)
    assert not first.done()  # 600 ms > one delay: the second arrival extended it
    a, b = await asyncio.gather(first, second)
    assert a.generation_id == b.generation_id == 1
    await runtime.close()


@in_loop
async def test_a_failed_write_of_the_assignment_fails_the_sync_and_rebalances() -> None:
    runtime, log = await start()
    a, b = await asyncio.gather(join_new(runtime), join_new(runtime))
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    follower_sync = asyncio.ensure_future(sync(runtime, follower.member_id, 1))
    await asyncio.sleep(0.01)
    log.replicate = False  # the ISR does not take the record: the write times out
    with pytest.raises(Exception) as failed:
        await sync(runtime, leader.member_id, 1, {leader.member_id: b"L"})
    assert failed.value.error_code == ErrorCode.coordinator_not_available
    assert (await follower_sync).error == ErrorCode.coordinator_not_available
    await asyncio.sleep(0.05)
    assert group_of(runtime).state_name() == "PreparingRebalance"
    await runtime.close()


@in_loop
async def test_a_follower_that_never_syncs_is_removed() -> None:
    runtime, _ = await start()
    a, b = await asyncio.gather(
        join_new(runtime, rebalance_ms=150), join_new(runtime, rebalance_ms=150)
    )
    leader = a if a.leader == a.member_id else b
    await sync(runtime, leader.member_id, 1, {})
    for _ in range(50):  # the follower never syncs: removed, the group rebalances
        await asyncio.sleep(0.02)
        if await heartbeat(runtime, leader.member_id, 1) == ErrorCode.rebalance_in_progress:
            break
    again = await join(runtime, request(leader.member_id, rebalance_ms=150))
    assert again.generation_id == 2
    assert [m.member_id for m in again.members] == [leader.member_id]
    await runtime.close()


@in_loop
async def test_the_leader_rejoining_a_stable_group_rebalances_it() -> None:
    runtime, _ = await start()
    joined = await join_new(runtime)
    await sync(runtime, joined.member_id, 1)
    again = await join(runtime, request(joined.member_id))
    assert again.generation_id == 2 and again.members  # a new generation for the leader
    await runtime.close()


@in_loop
async def test_commits_wait_while_the_group_completes_its_rebalance() -> None:
    runtime, _ = await start()
    joined = await join_new(runtime)
    group = group_of(runtime)
    with pytest.raises(GroupError) as busy:
        group.validate_offset_commit(joined.member_id, None, 1)
    assert busy.value.error_code == ErrorCode.rebalance_in_progress
    await runtime.close()


class _ConsumerGroup:
    """Stands for a KIP-848 group in the shared namespace."""

    group_id = GROUP
    type = GroupType.CONSUMER


@in_loop
async def test_a_consumer_protocol_group_id_is_not_a_classic_group() -> None:
    runtime, _ = await start()
    runtime._slots[0].shard.groups[GROUP] = _ConsumerGroup()  # type: ignore[assignment]
    assert (await join(runtime, request())).error == ErrorCode.group_id_not_found
    assert await heartbeat(runtime, "m", 1) == ErrorCode.group_id_not_found
    assert (await sync(runtime, "m", 1)).error == ErrorCode.group_id_not_found
    await runtime.close()


@in_loop
async def test_a_static_leader_rejoining_with_v9_skips_the_assignment() -> None:
    runtime, _ = await start()
    old = await join(runtime, request(instance="i-1"))
    await sync(runtime, old.member_id, 1, {old.member_id: b"A"}, "i-1")
    v9 = replace(request(instance="i-1"), supports_skip_assignment=True)
    new = await join(runtime, v9)
    assert new.skip_assignment and [m.member_id for m in new.members] == [new.member_id]
    assert new.generation_id == 1
    await runtime.close()


# On the virtual clock the group ends empty: the leader's timers and the follower's rebalance
# timeout fall on one instant there, microseconds apart on the real one (not yet pinned down).
@in_real_loop
async def test_a_group_loaded_over_its_max_size_rebalances_down_to_it() -> None:
    runtime, log = await start()
    leader, follower = await stable_group_of_two(runtime)
    await runtime.close()
    smaller, _ = await start(log, replace(CONFIG, group_max_size=1))
    group = group_of(smaller)
    assert group.state_name() == "PreparingRebalance"
    first = asyncio.ensure_future(join(smaller, request(leader.member_id)))
    await asyncio.sleep(0.01)
    refused = await join(smaller, request(follower.member_id))
    assert refused.error == ErrorCode.group_max_size_reached
    answer = await first  # the follower did not rejoin: removed at the rebalance timeout
    assert answer.error == ErrorCode.none and answer.generation_id == 2
    assert list(group.members) == [leader.member_id]
    await smaller.close()


@in_loop
async def test_heartbeats_while_completing_and_a_pending_member_leaving() -> None:
    runtime, _ = await start()
    joined = await join_new(runtime)
    assert group_of(runtime).state_name() == "CompletingRebalance"
    assert await heartbeat(runtime, joined.member_id, 1) == ErrorCode.none
    await sync(runtime, joined.member_id, 1)
    pending = await join(runtime, request())
    assert pending.error == ErrorCode.member_id_required
    (left,) = await leave(runtime, LeaveMember(pending.member_id, None))
    assert left.error == ErrorCode.none
    assert not group_of(runtime).pending_members
    assert group_of(runtime).state_name() == "Stable"
    await runtime.close()
