"""KIP-848 consumer groups on one shard: joins, epochs, reconciliation (a partition moves only
once its previous owner revoked it), leaving, fencing, session and rebalance timeouts, static
members, and recovery: replaying the written records rebuilds the same groups."""

from __future__ import annotations

import contextlib
import random
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.coordinator.result import Result
from odradek.errors import ErrorCode
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.consumer.group import ConsumerGroup
from odradek.groups.consumer.member import MemberState
from odradek.groups.consumer.requests import HeartbeatAnswer, HeartbeatRequest
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupType
from odradek.groups.records import CoordinatorRecord, decode, encode_key, encode_value
from odradek.groups.shard import GroupCoordinatorShard, ShardContext

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class FakeTimer:
    def __init__(self) -> None:
        self.timers: dict[str, tuple[int, Callable[[], Any]]] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any]) -> None:
        self.timers[key] = (delay_ms, operation)

    def cancel(self, key: str) -> None:
        self.timers.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.timers


class FakeTopics:
    def __init__(self, topics: dict[str, tuple[uuid.UUID, int]]):
        self.topics = topics

    def partition_count(self, topic: str) -> int | None:
        return self.topics[topic][1] if topic in self.topics else None

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.topics[topic][0] if topic in self.topics else None

    def topic_names(self) -> list[str]:
        return sorted(self.topics)


class Harness:
    """A shard whose operations' records are encoded, logged and replayed, as the runtime does."""

    def __init__(self, config: GroupCoordinatorConfig | None = None, **topics: Any):
        self.config = config or GroupCoordinatorConfig()
        self.timer = FakeTimer()
        self.topics = FakeTopics(topics or {"a": (T1, 4)})
        self.shard = self.new_shard()
        self.log: list[CoordinatorRecord] = []

    def new_shard(self) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(
            ShardContext(0, self.config, self.timer, self.topics, lambda: 0)  # type: ignore[arg-type]
        )

    def apply(self, result: Result[Any]) -> Any:
        for record in result.records:
            logged = decode(encode_key(record.key), encode_value(record.value))
            self.log.append(logged)
            self.shard.replay(logged)
        check_owners(self.shard)
        return result.response

    def heartbeat(self, member_id: str, epoch: int, **fields: Any) -> HeartbeatAnswer:
        fields.setdefault("group_id", "g")
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 30000)
            fields.setdefault("subscribed_topic_names", ("a",))
            fields.setdefault("owned", {})
        request = HeartbeatRequest(member_id=member_id, member_epoch=epoch, **fields)
        return self.apply(self.shard.consumer.heartbeat(request))

    def fire(self, key: str) -> None:
        _, operation = self.timer.timers.pop(key)
        self.apply(operation())

    def group(self, group_id: str = "g") -> ConsumerGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ConsumerGroup)
        return group


def check_owners(shard: GroupCoordinatorShard) -> None:
    """The invariant: no partition is held (assigned or being revoked) by two members."""
    for group in shard.groups.values():
        if not isinstance(group, ConsumerGroup):
            continue
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for member in group.members.values():
            for assignment in (member.assigned, member.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        assert (topic_id, p) not in seen, f"{(topic_id, p)} held twice"
                        seen[(topic_id, p)] = member.member_id
        assert seen == group.owners


def parts(answer: HeartbeatAnswer, topic: uuid.UUID = T1) -> set[int] | None:
    if answer.assignment is None:
        return None
    return set(answer.assignment.get(topic, ()))


def error_of(call: Callable[[], Any]) -> ErrorCode:
    with pytest.raises(GroupError) as raised:
        call()
    return raised.value.error_code


def test_the_first_member_gets_every_partition_at_epoch_one() -> None:
    h = Harness()
    answer = h.heartbeat("m1", 0)
    assert (answer.member_id, answer.member_epoch) == ("m1", 1)
    assert parts(answer) == {0, 1, 2, 3}
    assert answer.heartbeat_interval_ms == 5000
    group = h.group()
    assert (group.group_epoch, group.target_epoch, group.state_name()) == (1, 1, "Stable")
    again = h.heartbeat("m1", 1)
    assert again.member_epoch == 1 and again.assignment is None  # nothing changed: no assignment


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    joined = h.heartbeat("m2", 0)
    # m2 is at the new epoch but gets nothing yet: m1 still owns every partition.
    assert joined.member_epoch == 2 and parts(joined) == set()
    assert h.group().members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state_name() == "Reconciling"
    target_m2 = set(h.group().target["m2"][T1])
    assert len(target_m2) == 2
    # m1 is told to keep two partitions: it stays at epoch 1 until it revoked the others.
    told = h.heartbeat("m1", 1)
    assert told.member_epoch == 1 and parts(told) == {0, 1, 2, 3} - target_m2
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # m2 asks again: still nothing, m1 has not revoked.
    assert parts(h.heartbeat("m2", 2)) in (None, set())
    # m1 still reports owning everything: nothing moves.
    still = h.heartbeat("m1", 1, owned={T1: frozenset({0, 1, 2, 3})})
    assert still.member_epoch == 1
    # m1 revoked: it reaches epoch 2, and the partitions are free for m2.
    done = h.heartbeat("m1", 1, owned={T1: frozenset({0, 1, 2, 3} - target_m2)})
    assert done.member_epoch == 2
    got = h.heartbeat("m2", 2)
    assert parts(got) == target_m2 and got.member_epoch == 2
    assert h.group().state_name() == "Stable"


def test_epochs_are_checked() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    assert error_of(lambda: h.heartbeat("m1", 5)) == ErrorCode.fenced_member_epoch
    assert error_of(lambda: h.heartbeat("ghost", 1)) == ErrorCode.unknown_member_id
    h.heartbeat("m2", 0)
    h.heartbeat("m1", 1, owned={T1: frozenset({0, 1, 2, 3})})
    m1 = h.group().members["m1"]
    kept = set(m1.assigned[T1])
    h.heartbeat("m1", 1, owned={T1: frozenset(kept)})  # revoked: now at epoch 2
    assert h.group().members["m1"].member_epoch == 2
    # The answer was lost: the member retries with its previous epoch, owning no more than
    # it has; accepted. Owning more, or not saying, is fenced.
    assert h.heartbeat("m1", 1, owned={T1: frozenset(kept)}).member_epoch == 2
    assert error_of(lambda: h.heartbeat("m1", 1, owned={T1: frozenset({0, 1, 2, 3})})) == (
        ErrorCode.fenced_member_epoch
    )
    assert error_of(lambda: h.heartbeat("m1", 1)) == ErrorCode.fenced_member_epoch


def test_a_member_that_leaves_frees_its_partitions_at_once() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    h.heartbeat("m2", 0)
    h.heartbeat("m1", 1, owned={T1: frozenset({0, 1, 2, 3})})
    kept = set(h.group().members["m1"].assigned[T1])
    h.heartbeat("m1", 1, owned={T1: frozenset(kept)})
    h.heartbeat("m2", 2)
    left = h.heartbeat("m1", -1)
    assert left.member_epoch == -1
    assert "m1" not in h.group().members and h.group().group_epoch == 3
    assert not h.timer.is_scheduled("consumer-session:g:m1")
    answer = h.heartbeat("m2", 2)
    assert answer.member_epoch == 3 and parts(answer) == {0, 1, 2, 3}


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    h.heartbeat("m2", 0)
    delay, _ = h.timer.timers["consumer-session:g:m2"]
    assert delay == 45000
    h.fire("consumer-session:g:m2")
    assert set(h.group().members) == {"m1"} and h.group().group_epoch == 3
    # m1 had not been told to give anything up yet: it moves to epoch 3, its assignment as is.
    answer = h.heartbeat("m1", 1)
    assert answer.member_epoch == 3 and answer.assignment is None
    assert h.group().members["m1"].assigned == {T1: frozenset({0, 1, 2, 3})}


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    h.heartbeat("m1", 0, rebalance_timeout_ms=10000)
    h.heartbeat("m2", 0)
    h.heartbeat("m1", 1)  # told to revoke
    delay, _ = h.timer.timers["consumer-rebalance:g:m1"]
    assert delay == 10000
    h.fire("consumer-rebalance:g:m1")
    assert set(h.group().members) == {"m2"}
    assert parts(h.heartbeat("m2", 2)) == {0, 1, 2, 3}
    assert error_of(lambda: h.heartbeat("m1", 1)) == ErrorCode.unknown_member_id


def test_the_rebalance_timer_stops_once_the_member_revoked() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    h.heartbeat("m2", 0)
    h.heartbeat("m1", 1)
    kept = set(h.group().members["m1"].assigned[T1])
    h.heartbeat("m1", 1, owned={T1: frozenset(kept)})
    assert not h.timer.is_scheduled("consumer-rebalance:g:m1")


def test_replaying_the_log_rebuilds_the_same_groups() -> None:
    h = Harness(a=(T1, 4), b=(T2, 3))
    h.heartbeat("m1", 0, subscribed_topic_names=("a", "b"))
    h.heartbeat("m2", 0, subscribed_topic_names=("a",), instance_id="i2", rack_id="r1")
    h.heartbeat("m1", 1)
    h.heartbeat("m3", 0, subscribed_topic_names=("b",))
    h.heartbeat("m3", -1)
    recovered = h.new_shard()
    for record in h.log:
        recovered.replay(record)
    old, new = h.group(), recovered.groups["g"]
    assert isinstance(new, ConsumerGroup)
    for attribute in ("group_epoch", "target_epoch", "members", "target", "topics", "owners"):
        assert getattr(new, attribute) == getattr(old, attribute), attribute


def test_new_partitions_bump_the_epoch_and_are_assigned() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    h.topics.topics["a"] = (T1, 6)
    answer = h.heartbeat("m1", 1)
    assert answer.member_epoch == 2 and parts(answer) == set(range(6))


def test_a_subscription_change_bumps_the_epoch() -> None:
    h = Harness(a=(T1, 2), b=(T2, 2))
    h.heartbeat("m1", 0)
    answer = h.heartbeat("m1", 1, subscribed_topic_names=("a", "b"))
    assert answer.member_epoch == 2
    assert answer.assignment == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}


def test_a_regex_subscription_follows_the_topics() -> None:
    h = Harness(a=(T1, 2), b=(T2, 2))
    answer = h.heartbeat("m1", 0, subscribed_topic_names=None, subscribed_topic_regex="[ab]")
    assert answer.assignment == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    code = error_of(lambda: h.heartbeat("m2", 0, subscribed_topic_regex="("))
    assert code == ErrorCode.invalid_regular_expression


def test_a_static_member_comes_back_without_a_rebalance() -> None:
    h = Harness()
    h.heartbeat("m1", 0, instance_id="i1")
    h.heartbeat("m2", 0, instance_id="i2")
    h.heartbeat("m1", 1, instance_id="i1")
    kept = set(h.group().members["m1"].assigned[T1])
    h.heartbeat("m1", 1, owned={T1: frozenset(kept)})
    h.heartbeat("m2", 2)
    epoch = h.group().group_epoch
    assert h.heartbeat("m1", -2, instance_id="i1").member_epoch == -2
    assert h.group().members["m1"].assigned[T1] == frozenset(kept)  # kept for its return
    assert error_of(lambda: h.heartbeat("m9", 0, instance_id="i2")) == (
        ErrorCode.unreleased_instance_id
    )
    back = h.heartbeat("m1-again", 0, instance_id="i1")
    assert parts(back) == kept and back.member_epoch == epoch
    assert h.group().group_epoch == epoch  # no rebalance
    assert set(h.group().members) == {"m1-again", "m2"}


def test_bad_heartbeats_get_kafkas_error_codes() -> None:
    h = Harness()
    cases = [
        ({"group_id": ""}, ErrorCode.invalid_request),
        ({"rebalance_timeout_ms": -1}, ErrorCode.invalid_request),
        ({"owned": None}, ErrorCode.invalid_request),
        ({"owned": {T1: frozenset({0})}}, ErrorCode.invalid_request),
        ({"subscribed_topic_names": None}, ErrorCode.invalid_request),
        ({"server_assignor": "sticky"}, ErrorCode.unsupported_assignor),
        ({"instance_id": ""}, ErrorCode.invalid_request),
    ]
    for fields, code in cases:
        assert error_of(lambda fields=fields: h.heartbeat("m1", 0, **fields)) == code, fields
    assert error_of(lambda: h.heartbeat("", 0, api_version=1)) == ErrorCode.invalid_request
    assert error_of(lambda: h.heartbeat("m1", -3)) == ErrorCode.invalid_request
    assert error_of(lambda: h.heartbeat("m1", -2)) == ErrorCode.invalid_request
    assert error_of(lambda: h.heartbeat("m1", 3)) == ErrorCode.group_id_not_found
    assert h.log == [] and h.shard.groups == {}
    # v0: the coordinator names a member that came without an id.
    assert h.heartbeat("", 0, api_version=0).member_id


def test_a_classic_group_id_is_not_a_consumer_group() -> None:
    class Classic:
        group_id = "g"
        type = GroupType.CLASSIC

    h = Harness()
    h.shard.groups["g"] = Classic()  # type: ignore[assignment]
    assert error_of(lambda: h.heartbeat("m1", 0)) == ErrorCode.group_id_not_found
    with pytest.raises(GroupError) as raised:
        h.shard.consumer.describe("g")
    assert raised.value.error_code == ErrorCode.group_id_not_found


def test_the_group_size_is_bounded() -> None:
    h = Harness(replace(GroupCoordinatorConfig(), group_consumer_max_size=1))
    h.heartbeat("m1", 0)
    assert error_of(lambda: h.heartbeat("m2", 0)) == ErrorCode.group_max_size_reached


def test_members_are_counted_in_the_coordinators_memory_budget() -> None:
    """``odradek.group.coordinator.metadata.max.bytes`` (``groups.limits``): members' bytes
    are counted as their records replay; a member that does not fit is refused with
    COORDINATOR_NOT_AVAILABLE; leaving gives its bytes back."""
    config = replace(
        GroupCoordinatorConfig(),
        group_member_metadata_max_bytes=3000,
        group_metadata_max_bytes=3000,
        group_coordinator_metadata_max_bytes=3000,
    )
    h = Harness(config, **{"a" * 1000: (T1, 4), "b" * 1000: (T2, 4)})
    limits = h.shard.context.limits
    h.heartbeat("m1", 0, subscribed_topic_names=("a" * 1000,))
    first = limits.total_bytes
    assert first > 2000
    refused = error_of(lambda: h.heartbeat("m2", 0, subscribed_topic_names=("b" * 1000,)))
    assert refused == ErrorCode.coordinator_not_available
    assert limits.total_bytes == first
    too_big = error_of(lambda: h.heartbeat("m3", 0, subscribed_topic_names=("x" * 3001,)))
    assert too_big == ErrorCode.invalid_request
    h.heartbeat("m1", -1)
    assert limits.total_bytes == 0
    h.heartbeat("m2", 0, subscribed_topic_names=("b" * 1000,))
    assert limits.total_bytes > 2000


def test_the_preferred_assignor_is_used() -> None:
    h = Harness(a=(T1, 4), b=(T2, 4))
    h.heartbeat("m1", 0, subscribed_topic_names=("a", "b"), server_assignor="range")
    h.heartbeat("m2", 0, subscribed_topic_names=("a", "b"), server_assignor="range")
    group = h.group()
    assert h.shard.consumer.describe("g").assignor_name == "range"
    assert group.describe().protocol_name == "range"
    # range: per topic, contiguous halves, m1 first.
    assert group.target["m1"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert group.target["m2"] == {T1: frozenset({2, 3}), T2: frozenset({2, 3})}


def test_describe_and_offset_validation() -> None:
    h = Harness()
    h.heartbeat("m1", 0, client_id="c1", client_host="/127.0.0.1")
    group = h.group()
    described = group.describe()
    assert (described.state, described.protocol_type) == ("Stable", "consumer")
    assert described.protocol_name == "uniform"  # the default assignor
    (member,) = described.members
    assert (member.member_id, member.client_id, member.client_host) == ("m1", "c1", "/127.0.0.1")
    assert member.metadata == b"\x00\x00\x00\x00\x00\x01\x00\x01a\xff\xff\xff\xff"
    assert member.assignment == (
        b"\x00\x00\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x04"
        + b"".join(p.to_bytes(4, "big") for p in range(4))
        + b"\xff\xff\xff\xff"
    )
    group.validate_offset_commit("m1", None, 1)
    group.validate_offset_fetch("m1", 1)
    group.validate_offset_fetch(None, -1)
    group.validate_offset_fetch("", -1)
    for call, code in [
        (lambda: group.validate_offset_commit("m1", None, 2), ErrorCode.fenced_member_epoch),
        (lambda: group.validate_offset_commit("m1", None, 0), ErrorCode.stale_member_epoch),
        (lambda: group.validate_offset_commit("x", None, 1), ErrorCode.unknown_member_id),
        (lambda: group.validate_offset_commit("", None, -1), ErrorCode.unknown_member_id),
        (lambda: group.validate_delete_group(), ErrorCode.non_empty_group),
        (lambda: group.validate_offset_fetch("m1", 0), ErrorCode.stale_member_epoch),
        (lambda: group.validate_offset_fetch("x", 1), ErrorCode.unknown_member_id),
    ]:
        assert error_of(call) == code
    assert group.is_subscribed_to("a") and not group.is_subscribed_to("b")
    h.heartbeat("m1", -1)
    group.validate_offset_commit("", None, -1)  # empty: anyone may commit
    group.validate_delete_group()
    assert group.state_name() == "Empty"


def test_tombstones_delete_the_group() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    h.heartbeat("m2", 0)
    h.apply(Result(records=h.group().tombstones()))
    assert "g" not in h.shard.groups
    recovered = h.new_shard()
    for record in h.log:
        recovered.replay(record)
    assert recovered.groups == {}


def test_loading_starts_every_members_session() -> None:
    h = Harness()
    h.heartbeat("m1", 0)
    h.timer.timers.clear()
    h.shard.on_loaded()
    assert h.timer.is_scheduled("consumer-session:g:m1")


class Client:
    """A well-behaved member: it holds what it was last given and reports it."""

    def __init__(self, harness: Harness, member_id: str, topics: tuple[str, ...]):
        self.h, self.member_id, self.topics = harness, member_id, topics
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}

    def beat(self) -> None:
        fields: dict[str, Any] = {"owned": dict(self.owned)}
        if self.epoch == 0:
            fields["subscribed_topic_names"] = self.topics
        try:
            answer = self.h.heartbeat(self.member_id, self.epoch, **fields)
        except GroupError as e:
            assert e.error_code in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch)
            self.epoch, self.owned = 0, {}
            return
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.owned = {t: frozenset(ps) for t, ps in answer.assignment.items() if ps}


@pytest.mark.parametrize("seed", range(12))
def test_random_membership_changes_converge_with_one_owner_per_partition(seed: int) -> None:
    rng = random.Random(seed)
    h = Harness(a=(T1, 7), b=(T2, 5))
    clients: dict[str, Client] = {}
    serial = 0
    for _ in range(120):
        action = rng.random()
        if action < 0.15 or not clients:
            serial += 1
            topics = rng.choice([("a",), ("b",), ("a", "b")])
            clients[f"m{serial}"] = Client(h, f"m{serial}", topics)
            clients[f"m{serial}"].beat()
        elif action < 0.22:
            gone = clients.pop(rng.choice(sorted(clients)))
            if gone.member_id in h.group().members:
                h.heartbeat(gone.member_id, -1)
        elif action < 0.27:
            gone = clients.pop(rng.choice(sorted(clients)))  # dies: its session runs out
            key = f"consumer-session:g:{gone.member_id}"
            if key in h.timer.timers:
                h.fire(key)
        else:
            clients[rng.choice(sorted(clients))].beat()
        # What a client holds is never held by another (the clients' view of the invariant).
        held = [(t, p) for c in clients.values() for t, ps in c.owned.items() for p in ps]
        assert len(held) == len(set(held))
    for _ in range(10):  # everyone heartbeats until nothing moves
        for client in clients.values():
            client.beat()
    if not clients:
        return
    group = h.group()
    assert group.state_name() == "Stable", seed
    subscribed = {t for c in clients.values() for t in c.topics}
    wanted = set()
    if "a" in subscribed:
        wanted |= {(T1, p) for p in range(7)}
    if "b" in subscribed:
        wanted |= {(T2, p) for p in range(5)}
    held = [(t, p) for c in clients.values() for t, ps in c.owned.items() for p in ps]
    assert sorted(held) == sorted(wanted)


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+b", "(a|aa)*", r"(a)\1", "(?=a)a", "(?>a)", "a++", ".*.*.*.*.*", "x" * 1001, "("],
)
def test_regexes_that_could_stall_the_broker_are_refused(pattern: str) -> None:
    h = Harness()
    code = error_of(
        lambda: h.heartbeat("m1", 0, subscribed_topic_names=None, subscribed_topic_regex=pattern)
    )
    assert code == ErrorCode.invalid_regular_expression


def test_a_refused_regex_is_refused_fast() -> None:
    import time

    from odradek.groups.consumer.regex import RegexError, compile_subscription

    started = time.monotonic()
    with pytest.raises(RegexError):
        compile_subscription("(" * 300 + "a+" + ")+" * 300)
    with pytest.raises(RegexError):
        compile_subscription("(" * 499 + "a" + ")" * 499)
    assert time.monotonic() - started < 1


# -- any sequence of heartbeats, however wrong: answers or Kafka error codes, never another
# exception, never two owners for a partition (Harness.apply checks after every write).

ids = st.sampled_from(["m1", "m2", "m3", ""])
owned = st.none() | st.dictionaries(
    st.sampled_from([T1, T2, uuid.UUID(int=99)]),
    st.frozensets(st.integers(-1, 8), max_size=4),
    max_size=2,
)
heartbeats = st.fixed_dictionaries(
    {
        "member_id": ids,
        "epoch": st.integers(-3, 6),
        "group_id": st.sampled_from(["g", "h", ""]),
        "instance_id": st.none() | st.sampled_from(["i1", "i2", ""]),
        "rack_id": st.none() | st.sampled_from(["r", ""]),
        "rebalance_timeout_ms": st.sampled_from([-2, -1, 0, 1000]),
        "subscribed_topic_names": st.none()
        | st.tuples()
        | st.just(("a",))
        | st.just(("a", "b", "zz")),
        "subscribed_topic_regex": st.none() | st.sampled_from(["", "a|b", "(a+)+", "["]),
        "server_assignor": st.none() | st.sampled_from(["", "uniform", "range", "x"]),
        "owned": owned,
        "api_version": st.sampled_from([0, 1]),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(heartbeats, max_size=25), st.lists(st.booleans(), max_size=25))
def test_heartbeats_answer_or_refuse(requests, expiries) -> None:
    h = Harness(a=(T1, 3), b=(T2, 2))
    for n, fields in enumerate(requests):
        fields = dict(fields)
        member_id, epoch = fields.pop("member_id"), fields.pop("epoch")
        with contextlib.suppress(GroupError):  # a Kafka error code: fine; anything else fails
            h.heartbeat(member_id, epoch, **fields)
        if n < len(expiries) and expiries[n] and h.timer.timers:
            h.fire(sorted(h.timer.timers)[0])
