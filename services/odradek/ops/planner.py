"""Planning drains, rebalances and topic moves: pure functions from a ``ClusterView`` to a ``Plan``.

What every plan keeps (the invariants the unit tests check, with brute force on small cases):

- each partition keeps its replication factor and never holds two replicas on one broker;
- replicas land only on the brokers allowed (all live brokers but the drained one; the broker
  list of ``plan_move``);
- rack spread as Kafka's rack-aware assignment gives it: a partition's replicas span
  ``min(RF, racks)`` racks, so no rack holds more than ``max(1, RF - racks + 1)`` of them;
- among the placements that spread racks so, the replica counts per broker are as even as they
  can be (within 1 of each other whenever that is possible), and among those, the fewest
  replicas move (a replica that need not move stays);
- preferred leaders (first replicas) are then spread as evenly as the replica sets allow, with
  the fewest changes of preferred leader; a reorder moves no data.

How: a min-cost flow, solved by networkx's network simplex (``docs/operations/drain-rebalance.md``
says why a flow and not a greedy loop). Each partition sends its free replica slots through one
node per rack to the brokers; a broker's k-th replica costs ``2(load + k) - 1`` balance units
(the marginal cost of the sum of squared counts, which is smallest exactly when counts are
within 1 of each other), a replica on a broker that does not hold it already costs one move, and
covering a rack not yet covered earns a reward larger than anything else. The weights are
lexicographic (rack spread > balance > moves), so the optimum is the plan described above. A
second, smaller flow picks the preferred leaders the same way.

Which replicas may move:

- ``plan_drain``: only those on the drained broker (each must move; no other needs to);
- ``plan_rebalance``: any replica on a live broker; replicas of brokers absent from the view
  (down at the time) stay where they are, so a broker that is briefly down is not emptied;
- ``plan_move``: the named topics onto a broker list; replicas elsewhere must move.

Pure functions of their arguments: no I/O, no clock, no randomness; any thread may call them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import networkx as nx

from odradek.cluster import placement
from odradek.cluster.placement import RackAwareMode, racks_to_use
from odradek.common.partitions import TopicPartition
from odradek.ops.errors import PlacementError
from odradek.ops.model import ClusterView
from odradek.ops.plan import PartitionMove, Plan

__all__ = ["plan_drain", "plan_rebalance", "plan_move"]

NO_RACK = ""  # the one rack of rack-unaware placement


def plan_drain(view: ClusterView, broker_id: int, *, rack_aware: bool = True) -> Plan:
    """Move every replica off ``broker_id``; it also stops being any partition's preferred
    leader. Other replicas stay; the moved ones go where counts end up most even."""
    holds = any(broker_id in p.replicas for p in view.partitions.values())
    if broker_id not in view.brokers and not holds:
        raise PlacementError(f"broker {broker_id} is not in the cluster and holds no replicas")
    eligible = {b: rack for b, rack in view.rack_of().items() if b != broker_id}
    return _plan(view, eligible, lambda tp, b: b == broker_id, rack_aware, leaders="moved")


def plan_rebalance(view: ClusterView, *, rack_aware: bool = True) -> Plan:
    """Even replica counts and preferred leaders over every live broker, fewest moves."""
    eligible = view.rack_of()
    return _plan(view, eligible, lambda tp, b: b in eligible, rack_aware, leaders="all")


def plan_move(
    view: ClusterView, topics: Iterable[str], broker_ids: Iterable[int], *, rack_aware: bool = True
) -> Plan:
    """Put the partitions of ``topics`` on ``broker_ids`` only, balanced among them (counting
    these topics' replicas, as kafka-reassign-partitions --generate does), fewest moves."""
    topics, brokers = sorted(set(topics)), sorted(set(broker_ids))
    missing = [t for t in topics if t not in view.topics]
    if missing:
        raise PlacementError(f"topics not found in the cluster: {', '.join(missing)}")
    unknown = [b for b in brokers if b not in view.brokers]
    if unknown:
        raise PlacementError(f"Unknown broker id(s) {','.join(map(str, unknown))}")
    if not brokers:
        raise PlacementError("the broker list is empty")
    scoped = view.only_topics(topics)
    eligible = {b: view.brokers[b].rack for b in brokers}
    return _plan(scoped, eligible, lambda tp, b: True, rack_aware, leaders="all")


# --- the common core ------------------------------------------------------------------------


def _plan(
    view: ClusterView,
    eligible: Mapping[int, str | None],
    movable: Callable[[TopicPartition, int], bool],
    rack_aware: bool,
    *,
    leaders: str,
) -> Plan:
    """Replicas on brokers outside ``eligible`` move if ``movable`` says so, others only if
    balance needs it; ``leaders`` is "all" (rebalance every preferred leader) or "moved"."""
    if not eligible:
        raise PlacementError("no broker is left to hold replicas")
    rack_of = _racks(eligible, rack_aware)
    current = view.assignment()
    # A replica that may not move stays, even outside the eligible brokers (a broker that is
    # down during a rebalance); a movable one stays only if the flow keeps it.
    fixed = {
        tp: frozenset(b for b in replicas if not movable(tp, b)) for tp, replicas in current.items()
    }
    targets = _place_replicas(current, fixed, rack_of)
    changed = {tp for tp in current if targets[tp] != set(current[tp])}
    free_leaders = set(current) if leaders == "all" else changed
    chosen = _choose_leaders(current, targets, free_leaders, rack_of)
    moves = []
    for tp, replicas in current.items():
        ordered = _order(replicas, targets[tp], chosen.get(tp))
        if ordered != replicas:
            moves.append(PartitionMove(tp.topic, tp.partition, replicas, ordered))
    return Plan(tuple(moves))


def _racks(eligible: Mapping[int, str | None], rack_aware: bool) -> dict[int, str]:
    """Each eligible broker's rack; all in one rack when placement is rack-unaware.

    Like Kafka's ``RackAwareMode.Enforced``: racks on only some brokers is an error, since a
    placement cannot spread over racks it does not know.
    """
    mode = RackAwareMode.ENFORCED if rack_aware else RackAwareMode.DISABLED
    try:
        with_rack = racks_to_use(eligible, mode)
    except placement.PlacementError as e:  # the ops' own error, for the ops' callers
        raise PlacementError(str(e)) from e
    return dict.fromkeys(eligible, NO_RACK) if with_rack is None else with_rack


def _place_replicas(
    current: Mapping[TopicPartition, tuple[int, ...]],
    fixed: Mapping[TopicPartition, frozenset[int]],
    rack_of: Mapping[int, str],
) -> dict[TopicPartition, set[int]]:
    """The target replica set of each partition: its fixed replicas plus the flow's choice.

    Partitions alike (same replicas, same fixed ones) are one node of the flow carrying all of
    their slots; ``_deal`` then hands the brokers it chose back to them one by one.
    """
    racks = sorted(set(rack_of.values()))
    load = Counter(b for replicas in fixed.values() for b in replicas if b in rack_of)
    targets = {tp: set(fixed[tp]) for tp in current}
    classes: dict[tuple[frozenset[int], frozenset[int]], list[TopicPartition]] = {}
    for tp, replicas in current.items():
        if len(replicas) > len(fixed[tp]):
            classes.setdefault((frozenset(replicas), fixed[tp]), []).append(tp)
    if not classes:
        return targets
    for (replicas, kept), members in classes.items():
        room = [b for b in rack_of if b not in kept]
        if len(room) < len(replicas) - len(kept):
            tp = members[0]
            raise PlacementError(
                f"{tp.topic}-{tp.partition} needs {len(replicas)} replicas on distinct brokers; "
                f"only {len(room) + len(kept)} brokers can hold them"
            )
    units = sum((len(r) - len(k)) * len(m) for (r, k), m in classes.items())
    w_balance = units * _W_MOVE + 1
    top_load = max(load.values(), default=0) + units
    w_rack = units * w_balance * 2 * top_load + units * _W_MOVE + 1

    edges = []
    for i, ((replicas, kept), members) in enumerate(classes.items()):
        n, free = len(members), len(replicas) - len(kept)
        per_rack = 1 if len(replicas) <= len(racks) else len(replicas) - len(racks) + 1
        edges.append(("source", ("c", i), n * free, 0))
        for rack in racks:
            brokers = [b for b, r in rack_of.items() if r == rack and b not in kept]
            if not brokers:
                continue
            node = ("r", i, rack)
            plain = per_rack - sum(1 for b in kept if rack_of.get(b) == rack)
            if plain == per_rack:  # the rack holds none of its fixed replicas: covering it pays
                edges.append((("c", i), node, n, -w_rack))
                plain -= 1
            if plain > 0:
                edges.append((("c", i), node, n * plain, 0))
            edges.append((("c", i), node, n * free, w_rack))  # beyond the spread: avoided
            for b in brokers:
                edges.append((node, ("b", b), n, 0 if b in replicas else _W_MOVE))
    flow = _solve_convex(edges, units, load, rack_of, w_balance)
    for i, members in enumerate(classes.values()):
        chosen: list[int] = []
        for rack in racks:  # grouped by rack, so dealing spreads each rack's units evenly
            for b in sorted(rack_of):
                chosen.extend([b] * flow.get((("r", i, rack), ("b", b)), 0))
        for tp, extra in zip(members, _deal(chosen, len(members)), strict=True):
            targets[tp] |= extra
    return targets


def _deal(units: list[int], hands: int) -> list[set[int]]:
    """Deal ``units`` (grouped by broker, each broker at most ``hands`` times) round-robin:
    every hand gets distinct brokers, and each rack's units split as evenly as they can."""
    dealt: list[set[int]] = [set() for _ in range(hands)]
    for j, b in enumerate(units):
        dealt[j % hands].add(b)
    return dealt


def _choose_leaders(
    current: Mapping[TopicPartition, tuple[int, ...]],
    targets: Mapping[TopicPartition, set[int]],
    free: set[TopicPartition],
    rack_of: Mapping[int, str],
) -> dict[TopicPartition, int]:
    """A preferred leader for each partition in ``free``, evenly spread, fewest changes; the
    others keep theirs (counted in the spread). Only eligible brokers lead."""
    load: Counter[int] = Counter()
    for tp, replicas in current.items():
        if tp not in free and replicas and replicas[0] in rack_of:
            load[replicas[0]] += 1
    classes: dict[tuple[tuple[int, ...], int | None], list[TopicPartition]] = {}
    for tp in sorted(free):
        candidates = tuple(sorted(b for b in targets[tp] if b in rack_of))
        if candidates:
            was = current[tp][0] if current[tp] else None
            classes.setdefault((candidates, was), []).append(tp)
    if not classes:
        return {}
    units = sum(len(m) for m in classes.values())
    w_balance = units * _W_MOVE + 1
    edges = []
    for i, ((candidates, was), members) in enumerate(classes.items()):
        edges.append(("source", ("c", i), len(members), 0))
        for b in candidates:
            edges.append((("c", i), ("b", b), len(members), 0 if b == was else _W_MOVE))
    flow = _solve_convex(edges, units, load, rack_of, w_balance)
    chosen = {}
    for i, ((candidates, _), members) in enumerate(classes.items()):
        leaders = [b for b in candidates for _ in range(flow.get((("c", i), ("b", b)), 0))]
        chosen.update(zip(members, leaders, strict=True))
    return chosen


_W_MOVE = 1  # the cost of one replica move, or of one change of preferred leader


def _solve_convex(
    edges: list[tuple[object, object, int, int]],
    units: int,
    load: Mapping[int, int],
    brokers: Iterable[int],
    w_balance: int,
) -> dict[tuple[object, object], int]:
    """Min-cost flow of ``units`` from "source" through ``edges`` to the brokers, where a
    broker's k-th unit costs ``w_balance * (2 * (load + k) - 1)``; flow per (tail, head).

    A broker's units beyond a window share one arc priced at the window's next marginal cost,
    which is below the true one: if the optimum leaves every such arc empty it is the true
    optimum; else the window doubles. This keeps the graph near ``units`` + brokers arcs.
    """
    brokers = sorted(brokers)
    total = sum(load.get(b, 0) for b in brokers) + units
    window = -(-total // len(brokers)) + 2  # ceil(average) + 2
    while True:
        graph = nx.MultiDiGraph()
        graph.add_node("source", demand=-units)
        graph.add_node("sink", demand=units)
        for tail, head, capacity, weight in edges:
            graph.add_edge(tail, head, capacity=capacity, weight=weight)
        tails = []
        for b in brokers:
            level = load.get(b, 0)
            steps = max(0, min(window - level, units))
            for k in range(1, steps + 1):
                marginal = w_balance * (2 * (level + k) - 1)
                graph.add_edge(("b", b), "sink", capacity=1, weight=marginal)
            if steps < units:
                marginal = w_balance * (2 * (level + steps + 1) - 1)
                key = graph.add_edge(("b", b), "sink", capacity=units - steps, weight=marginal)
                tails.append((b, key))
        try:
            _cost, flow = nx.network_simplex(graph)
        except nx.NetworkXUnfeasible as e:  # the capacity checks before make this unreachable
            raise PlacementError(f"no placement satisfies the constraints: {e}") from e
        if all(flow[("b", b)]["sink"][key] == 0 for b, key in tails) or window >= total:
            break
        window *= 2
    return {
        (tail, head): sum(by_key.values())
        for tail, heads in flow.items()
        for head, by_key in heads.items()
        if sum(by_key.values())
    }


def _order(current: tuple[int, ...], target: set[int], leader: int | None) -> tuple[int, ...]:
    """The target replicas in order: kept replicas keep their places, new ones take the places
    of removed ones (in id order), then the chosen leader swaps to the front."""
    added = iter(sorted(target - set(current)))
    ordered = [b if b in target else next(added) for b in current]
    ordered.extend(added)
    if leader is not None and leader in ordered:
        i = ordered.index(leader)
        ordered[0], ordered[i] = ordered[i], ordered[0]
    return tuple(ordered)
