"""The server-side assignors of KIP-848 (``group.consumer.assignors``): ``uniform`` and ``range``.

An assignor maps the group's members (each with the topic ids it subscribes to) and the
subscribed topics (id -> partition count) to a target assignment per member. Both give every
partition of a subscribed topic to exactly one member subscribed to it, and nothing else.

- ``uniform`` (Kafka's default): balanced and sticky. A partition stays with the member that had
  it in the previous target assignment when that member still subscribes to its topic; the rest
  go to the least loaded member that may take them; then partitions move, one at a time, from
  a member to one with at least two fewer, directly or through a chain of members that each
  give one partition and take one (when subscriptions differ), until no such chain exists
  (each move lowers the sum of squared loads, so the loop ends; it is bounded too).
- ``range``: per topic, the subscribed members in member-id order get contiguous ranges, the
  first ``partitions % members`` one partition more (as Kafka's client-side range assignor).

Pure functions; deterministic for the same input (ties broken by member id).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from odradek.groups.consumer.assignment import Assignment, normalized, partitions_of
from odradek.groups.consumer.member import ConsumerGroupMember

__all__ = ["ASSIGNORS", "uniform", "range_assignor", "Assignor", "preferred_assignor"]

Subscriptions = Mapping[str, frozenset[uuid.UUID]]
Topics = Mapping[uuid.UUID, int]
Assignor = Callable[[Subscriptions, Topics, Mapping[str, Assignment]], dict[str, Assignment]]


def _topic_order(topics: Topics) -> list[uuid.UUID]:
    return sorted(topics, key=str)


def uniform(
    members: Subscriptions, topics: Topics, previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    owner: dict[tuple[uuid.UUID, int], str] = {}
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    for member_id in sorted(previous):
        if member_id not in members:
            continue
        for topic_id, partition in sorted(partitions_of(previous[member_id]), key=str):
            keep = topic_id in members[member_id] and partition < topics.get(topic_id, 0)
            if keep and (topic_id, partition) not in owner:
                owner[(topic_id, partition)] = member_id
                owned[member_id].add((topic_id, partition))
    eligible = {
        topic_id: sorted(m for m, subscribed in members.items() if topic_id in subscribed)
        for topic_id in topics
    }
    for topic_id in _topic_order(topics):
        for partition in range(topics[topic_id]):
            if (topic_id, partition) in owner or not eligible[topic_id]:
                continue
            member_id = min(eligible[topic_id], key=lambda m: (len(owned[m]), m))
            owner[(topic_id, partition)] = member_id
            owned[member_id].add((topic_id, partition))
    for _ in range(len(owner) * max(len(members), 1)):
        if not _move_one(owned, owner, eligible):
            break
    return {m: normalized(_grouped(ps)) for m, ps in owned.items()}


def _move_one(
    owned: dict[str, set[tuple[uuid.UUID, int]]],
    owner: dict[tuple[uuid.UUID, int], str],
    eligible: Mapping[uuid.UUID, list[str]],
) -> bool:
    """Move partitions along one chain: from a member to one with at least two fewer, possibly
    through members that each give one and take one (their subscriptions may differ)."""
    for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        path = _chain(giver, owned, eligible)
        if path:
            for topic_partition, taker in path:
                owned[owner[topic_partition]].discard(topic_partition)
                owned[taker].add(topic_partition)
                owner[topic_partition] = taker
            return True
    return False


def _chain(
    giver: str,
    owned: dict[str, set[tuple[uuid.UUID, int]]],
    eligible: Mapping[uuid.UUID, list[str]],
) -> list[tuple[tuple[uuid.UUID, int], str]]:
    """Breadth first from ``giver``: the moves that end at a member with at least two fewer."""
    limit = len(owned[giver]) - 2
    came_from: dict[str, tuple[str, tuple[uuid.UUID, int]] | None] = {giver: None}
    queue = [giver]
    for member_id in queue:
        for topic_partition in sorted(owned[member_id], key=lambda tp: (str(tp[0]), -tp[1])):
            for taker in eligible[topic_partition[0]]:
                if taker in came_from:
                    continue
                came_from[taker] = (member_id, topic_partition)
                if len(owned[taker]) <= limit:
                    path = []
                    step = taker
                    while (link := came_from[step]) is not None:
                        source, moved = link
                        path.append((moved, step))
                        step = source
                    return path[::-1]
                queue.append(taker)
    return []


def _grouped(partitions: set[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, set[int]]:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        result.setdefault(topic_id, set()).add(partition)
    return result


def range_assignor(
    members: Subscriptions, topics: Topics, previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for topic_id in _topic_order(topics):
        subscribed = sorted(m for m, s in members.items() if topic_id in s)
        if not subscribed:
            continue
        count = topics[topic_id]
        base, extra = divmod(count, len(subscribed))
        start = 0
        for index, member_id in enumerate(subscribed):
            length = base + (1 if index < extra else 0)
            if length:
                result[member_id][topic_id] = set(range(start, start + length))
            start += length
    return {m: normalized(a) for m, a in result.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}


def preferred_assignor(members: Iterable[ConsumerGroupMember], configured: Sequence[str]) -> str:
    """The assignor most members prefer (ties: the configured order), else the first configured."""
    votes = Counter(m.server_assignor for m in members if m.server_assignor)
    if not votes:
        return configured[0]
    return max(votes, key=lambda name: (votes[name], -list(configured).index(name)))
