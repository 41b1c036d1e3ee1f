"""The server-side assignors: every partition of a subscribed topic to exactly one member that
subscribes to it; ``uniform`` balanced and sticky, ``range`` contiguous per topic."""

from __future__ import annotations

import random
import uuid

from odradek.groups.consumer.assignors import range_assignor, uniform

T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))


def check_complete(members, topics, result) -> None:
    seen = set()
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert topic_id in members[member_id], (member_id, topic_id)
            for p in partitions:
                assert (topic_id, p) not in seen
                seen.add((topic_id, p))
    wanted = {
        (t, p)
        for t, count in topics.items()
        if any(t in s for s in members.values())
        for p in range(count)
    }
    assert seen == wanted


def sizes(result) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def test_uniform_balances_a_homogeneous_group() -> None:
    members = {f"m{n}": frozenset({T1, T2}) for n in range(3)}
    topics = {T1: 5, T2: 3}
    result = uniform(members, topics, {})
    check_complete(members, topics, result)
    assert sizes(result) == [2, 3, 3]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    members = {f"m{n}": frozenset({T1}) for n in range(3)}
    topics = {T1: 12}
    before = uniform(members, topics, {})
    after = uniform({**members, "m3": frozenset({T1})}, topics, before)
    check_complete({**members, "m3": frozenset({T1})}, topics, after)
    assert sizes(after) == [3, 3, 3, 3]
    for member_id in members:  # each old member only gave up partitions: it kept the rest
        assert after[member_id][T1] <= before[member_id][T1]


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    members = {f"m{n}": frozenset({T1}) for n in range(4)}
    topics = {T1: 12}
    before = uniform(members, topics, {})
    del members["m3"]
    after = uniform(members, topics, before)
    check_complete(members, topics, after)
    for member_id in members:
        assert before[member_id][T1] <= after[member_id][T1]


def test_uniform_with_different_subscriptions() -> None:
    members = {"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T2, T3})}
    topics = {T1: 4, T2: 4, T3: 1}
    result = uniform(members, topics, {})
    check_complete(members, topics, result)
    assert sizes(result) == [3, 3, 3]


def test_uniform_random_inputs_stay_complete_and_fair() -> None:
    rng = random.Random(7)
    topics_ids = [uuid.UUID(int=n) for n in range(1, 6)]
    previous: dict = {}
    for _ in range(50):
        topics = {t: rng.randint(1, 8) for t in topics_ids}
        members = {f"m{n}": frozenset(topics_ids) for n in range(rng.randint(1, 6))}
        result = uniform(members, topics, previous)
        check_complete(members, topics, result)
        counts = sizes(result)
        assert counts[-1] - counts[0] <= 1
        previous = result


def test_range_gives_contiguous_ranges_per_topic() -> None:
    members = {"m1": frozenset({T1, T2}), "m2": frozenset({T1, T2}), "m3": frozenset({T1})}
    topics = {T1: 7, T2: 3}
    result = range_assignor(members, topics, {})
    check_complete(members, topics, result)
    assert result["m1"][T1] == {0, 1, 2} and result["m2"][T1] == {3, 4}
    assert result["m3"][T1] == {5, 6}
    assert result["m1"][T2] == {0, 1} and result["m2"][T2] == {2}
    assert T2 not in result["m3"]


def test_no_members_or_no_topics() -> None:
    assert uniform({}, {T1: 3}, {}) == {}
    assert range_assignor({"m": frozenset()}, {T1: 3}, {}) == {"m": {}}
    assert uniform({"m": frozenset({T2})}, {T1: 3}, {}) == {"m": {}}
