"""plan_drain, plan_rebalance and plan_move keep RF, distinct brokers and rack spread, balance
replica counts and preferred leaders, and move no more replicas than a brute force needs."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.common.partitions import TopicPartition
from odradek.ops.errors import PlacementError
from odradek.ops.model import ClusterView
from odradek.ops.planner import plan_drain, plan_move, plan_rebalance

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def after(view: ClusterView, plan) -> dict[TopicPartition, tuple[int, ...]]:
    return {**view.assignment(), **plan.targets()}


def racks_of(view: ClusterView, brokers) -> dict[int, str]:
    racks = {b: view.brokers[b].rack for b in brokers}
    return racks if all(racks.values()) else dict.fromkeys(brokers, "")


def rack_score(replicas, racks: dict[int, str]) -> int:
    """excess - covered, as the planner weighs rack spread (lower is better)."""
    names = set(racks.values())
    rf = len(replicas)
    per_rack = 1 if rf <= len(names) else rf - len(names) + 1
    counts = Counter(racks[b] for b in replicas if b in racks)
    return sum(max(0, c - per_rack) for c in counts.values()) - len(counts)


def spread(assignment, brokers) -> int:
    counts = Counter(dict.fromkeys(brokers, 0))
    for replicas in assignment.values():
        counts.update(b for b in replicas if b in counts)
    return sum(c * c for c in counts.values())


def leader_spread(assignment, brokers) -> int:
    counts = Counter(dict.fromkeys(brokers, 0))
    counts.update(r[0] for r in assignment.values() if r[0] in counts)
    return sum(c * c for c in counts.values())


def moves(before, later) -> int:
    return sum(len(set(later[tp]) - set(before[tp])) for tp in before)


def check_basic(view: ClusterView, plan) -> dict[TopicPartition, tuple[int, ...]]:
    result = after(view, plan)
    for tp, replicas in result.items():
        assert len(replicas) == len(view.partitions[tp].replicas), tp
        assert len(set(replicas)) == len(replicas), tp
    for move in plan:
        assert move.current == view.partitions[move.tp].replicas
        assert move.target != move.current  # no empty entries
    return result


@st.composite
def clusters(draw, max_brokers=5, max_partitions=4):
    n = draw(st.integers(3, max_brokers))
    brokers = list(range(1, n + 1))
    with_racks = draw(st.booleans())
    racks = {b: (draw(st.sampled_from("abc")) if with_racks else None) for b in brokers}
    # Partitions first live on a prefix of the brokers (brokers were added after them).
    old = draw(st.integers(min(3, n), n))
    count = draw(st.integers(1, max_partitions))
    assignment = {}
    for p in range(count):
        rf = draw(st.integers(1, min(3, old)))
        assignment[("t", p)] = draw(st.permutations(brokers[:old]))[:rf]
    return ClusterView.build(assignment, racks)


def brute_best(view: ClusterView, brokers, choices_of):
    """Lexicographic minimum of (rack score, replica spread, moves) over every assignment."""
    racks = racks_of(view, brokers)
    current = view.assignment()
    tps = list(current)
    best = None
    for combo in itertools.product(*(choices_of(tp) for tp in tps)):
        candidate = dict(zip(tps, combo, strict=True))
        key = (
            sum(rack_score(r, racks) for r in candidate.values()),
            spread(candidate, brokers),
            moves(current, candidate),
        )
        best = key if best is None or key < best else best
    return best


@SETTINGS
@given(clusters())
def test_rebalance_is_as_good_as_brute_force(view):
    plan = plan_rebalance(view)
    result = check_basic(view, plan)
    brokers = list(view.brokers)
    racks = racks_of(view, brokers)

    def choices(tp):
        return list(itertools.combinations(brokers, len(view.partitions[tp].replicas)))

    got = (
        sum(rack_score(r, racks) for r in result.values()),
        spread(result, brokers),
        moves(view.assignment(), result),
    )
    assert got == brute_best(view, brokers, choices)


@SETTINGS
@given(clusters())
def test_rebalance_balances_preferred_leaders_with_fewest_changes(view):
    plan = plan_rebalance(view)
    result = after(view, plan)
    brokers = list(view.brokers)
    tps = list(result)
    best = None
    for leaders in itertools.product(*(result[tp] for tp in tps)):
        candidate = {tp: (leader,) for tp, leader in zip(tps, leaders, strict=True)}
        changes = sum(
            1 for tp, (leader,) in candidate.items() if leader != view.assignment()[tp][0]
        )
        key = (leader_spread(candidate, brokers), changes)
        best = key if best is None or key < best else best
    changes = sum(1 for tp in tps if result[tp][0] != view.assignment()[tp][0])
    assert (leader_spread(result, brokers), changes) == best


@SETTINGS
@given(clusters(), st.data())
def test_drain_empties_the_broker_moving_only_its_replicas(view, data):
    drained = data.draw(st.sampled_from(sorted(view.brokers)))
    holding = [tp for tp, r in view.assignment().items() if drained in r]
    if any(len(view.partitions[tp].replicas) > len(view.brokers) - 1 for tp in holding):
        with pytest.raises(PlacementError, match="distinct brokers"):
            plan_drain(view, drained)
        return
    plan = plan_drain(view, drained)
    result = check_basic(view, plan)
    assert all(drained not in r for r in result.values())
    assert plan.replica_moves == len(holding)  # each of its replicas moves, no other
    assert {m.tp for m in plan if not m.reorder_only} == set(holding)
    brokers = [b for b in view.brokers if b != drained]
    racks = racks_of(view, brokers)

    def choices(tp):
        replicas = view.partitions[tp].replicas
        if drained not in replicas:
            return [replicas]
        kept = [b for b in replicas if b != drained]
        return [tuple(kept) + (b,) for b in brokers if b not in kept]

    got = (
        sum(rack_score(r, racks) for r in result.values()),
        spread(result, brokers),
        moves(view.assignment(), result),
    )
    assert got == brute_best(view, brokers, choices)


@SETTINGS
@given(clusters(max_brokers=6, max_partitions=6), st.data())
def test_drain_keeps_the_rack_spread_a_partition_had(view, data):
    drained = data.draw(st.sampled_from(sorted(view.brokers)))
    if any(len(r) >= len(view.brokers) for r in view.assignment().values()):
        return
    result = after(view, plan_drain(view, drained))
    left = racks_of(view, [b for b in view.brokers if b != drained])
    before = racks_of(view, list(view.brokers))
    for tp, replicas in view.assignment().items():
        had = len({before[b] for b in replicas})
        if had == min(len(replicas), len(set(before.values()))):
            assert len({left[b] for b in result[tp]}) == min(len(replicas), len(set(left.values())))


def test_rebalance_after_adding_brokers_fills_them_with_fewest_moves():
    # 6 partitions x RF 3 on brokers 1-3; brokers 4-6 added: 18 replicas, 3 per broker.
    assignment = {("orders", p): [(p + i) % 3 + 1 for i in range(3)] for p in range(6)}
    view = ClusterView.build(assignment, range(1, 7))
    plan = plan_rebalance(view)
    result = check_basic(view, plan)
    assert Counter(b for r in result.values() for b in r) == dict.fromkeys(range(1, 7), 3)
    assert Counter(r[0] for r in result.values()) == dict.fromkeys(range(1, 7), 1)
    assert plan.replica_moves == 9  # each new broker needs 3; nothing else moves


def test_rebalance_of_a_balanced_cluster_is_empty():
    assignment = {("t", p): [(p + i) % 3 + 1 for i in range(2)] for p in range(3)}
    assert len(plan_rebalance(ClusterView.build(assignment, [1, 2, 3]))) == 0


def test_rebalance_spreads_racks_kafka_style():
    # Both replicas of every partition sit in rack a; rack b is new.
    view = ClusterView.build({("t", 0): [1, 2], ("t", 1): [2, 1]}, {1: "a", 2: "a", 3: "b", 4: "b"})
    result = after(view, plan_rebalance(view))
    for replicas in result.values():
        assert {view.brokers[b].rack for b in replicas} == {"a", "b"}


def test_rebalance_only_reorders_to_balance_leaders():
    view = ClusterView.build({("t", 0): [1, 2], ("t", 1): [1, 2]}, [1, 2])
    plan = plan_rebalance(view)
    assert plan.replica_moves == 0
    assert len(plan) == 1 and plan.moves[0].reorder_only
    assert sorted(r[0] for r in after(view, plan).values()) == [1, 2]


def test_drained_broker_loses_preferred_leadership():
    view = ClusterView.build({("t", p): [1, 2, 3] for p in range(4)}, [1, 2, 3, 4])
    result = after(view, plan_drain(view, 1))
    assert all(1 not in r for r in result.values())
    assert all(sorted(r) == [2, 3, 4] for r in result.values())
    assert Counter(r[0] for r in result.values()).most_common(1)[0][1] <= 2


def test_drain_with_too_few_brokers_says_why():
    view = ClusterView.build({("t", 0): [1, 2, 3]}, [1, 2, 3])
    with pytest.raises(PlacementError, match="t-0 needs 3 replicas on distinct brokers"):
        plan_drain(view, 3)


def test_drain_of_an_unknown_broker_is_refused():
    view = ClusterView.build({("t", 0): [1, 2]}, [1, 2, 3])
    with pytest.raises(PlacementError, match="broker 9 is not in the cluster"):
        plan_drain(view, 9)


def test_drain_of_a_dead_broker_recreates_its_replicas():
    # Broker 3 is down (absent from Metadata's brokers) but still assigned.
    view = ClusterView.build({("t", 0): [3, 1], ("t", 1): [1, 3]}, [1, 2])
    result = after(view, plan_drain(view, 3))
    assert all(sorted(r) == [1, 2] for r in result.values())


def test_rebalance_leaves_the_replicas_of_a_down_broker_alone():
    view = ClusterView.build({("t", p): [3, 1] for p in range(4)}, [1, 2])  # 3 is down
    result = after(view, plan_rebalance(view))
    assert all(3 in r for r in result.values())


def test_mixed_racks_are_refused_unless_rack_awareness_is_off():
    view = ClusterView.build({("t", 0): [1, 2]}, {1: "a", 2: None, 3: "b"})
    with pytest.raises(PlacementError, match="Not all brokers have rack information"):
        plan_rebalance(view)
    plan_rebalance(view, rack_aware=False)


def test_move_puts_topics_on_the_broker_list_only():
    assignment = {("a", p): [1, 2, 3] for p in range(3)} | {("b", 0): [1, 2, 3]}
    view = ClusterView.build(assignment, range(1, 7))
    plan = plan_move(view, ["a"], [4, 5, 6])
    assert plan.topics == ("a",)
    result = after(view, plan)
    assert all(sorted(result[("a", p)]) == [4, 5, 6] for p in range(3))
    assert sorted(r[0] for tp, r in result.items() if tp.topic == "a") == [4, 5, 6]
    assert result[TopicPartition("b", 0)] == (1, 2, 3)


def test_move_keeps_replicas_already_on_the_list():
    view = ClusterView.build({("a", 0): [1, 4], ("a", 1): [4, 1]}, range(1, 6))
    plan = plan_move(view, ["a"], [4, 5])
    assert plan.replica_moves == 2
    assert all(sorted(r) == [4, 5] for r in after(view, plan).values())


@pytest.mark.parametrize(
    ("topics", "brokers", "message"),
    [(["nope"], [1], "topics not found"), (["a"], [7], "Unknown broker id"), (["a"], [], "empty")],
)
def test_move_refuses_bad_arguments(topics, brokers, message):
    view = ClusterView.build({("a", 0): [1]}, [1, 2])
    with pytest.raises(PlacementError, match=message):
        plan_move(view, topics, brokers)


def test_a_large_rebalance_plans_quickly_and_evenly():
    brokers = list(range(1, 13))
    assignment = {("t", p): [(p + i) % 9 + 1 for i in range(3)] for p in range(3000)}
    racks = {b: "abc"[b % 3] for b in brokers}
    view = ClusterView.build(assignment, racks)
    plan = plan_rebalance(view)
    result = check_basic(view, plan)
    counts = Counter(b for r in result.values() for b in r)
    assert max(counts.values()) - min(counts.values()) <= 1
    leaders = Counter(r[0] for r in result.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert plan.replica_moves == 9000 // 12 * 3  # exactly what the three new brokers need
