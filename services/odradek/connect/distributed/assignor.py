"""Incremental cooperative assignment of connectors and tasks to workers (Kafka's KIP-415,
``IncrementalCooperativeAssignor``), as the group's leader computes it. Pure and deterministic:
the same inputs (members, configured work, ``now_ms``, the assignor's memory) give the same
assignments; time is passed in.

One round, given each live member's current work (from its metadata) and the configured
connectors and tasks:

1. Work a member runs that is no longer configured is revoked from it; work two members both
   report stays with the first (by member id) and is revoked from the others.
2. Work the leader assigned last round (its memory) that no live member reports is *lost*: its
   worker left or died. It is held for ``scheduled.rebalance.max.delay.ms``: the assignments carry
   the remaining delay, the members rejoin when it expires, and only then is lost work reassigned
   (a worker that comes back in time gets its work back). A delay of 0 reassigns at once.
3. Connectors and tasks are balanced separately. With W items (kept + unassigned + held) over
   n members, r = W mod n members may hold ceil(W/n) and the others floor(W/n); the members
   that run the most are the ones allowed the ceiling, so as little as possible moves. A member
   above its share has the excess revoked (the highest items in sort order). Revoked work is
   reassigned in the next round, once its old owner has stopped it (cooperative: nothing runs
   twice); that round revokes nothing more, so every item lands within two rounds.
4. Unassigned work (new, or released after the delay, or revoked last round) goes item by item
   (sorted) to the least loaded member with room (ties by member id), which spreads a
   connector's tasks evenly.

An ``Assignment`` holds a member's *full* work after this round (not only what is new), plus
what it must revoke first: a member stops ``revoked`` and anything it runs outside the
assignment, and starts what it does not run yet. Members that are revoked something rejoin at
once; the round after assigns what they released.

The memory (what was assigned last round, the scheduled rebalance) belongs to the leader that
computed it; it is dropped when the generation is not the next one (another leader ran in
between), as Kafka drops its ``previousAssignment``: a new leader treats unreported work as new.

Not thread-safe: one leader's membership task calls ``assign``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from odradek.connect.distributed.protocol import CONFIG_MISMATCH, Assignment, MemberMetadata
from odradek.connect.herder import ConnectorTaskId

__all__ = ["IncrementalCooperativeAssignor", "balance"]

Item = TypeVar("Item", bound=Hashable)


@dataclass
class _Memory:
    generation: int = -1
    connectors: frozenset[str] = frozenset()
    tasks: frozenset[ConnectorTaskId] = frozenset()
    scheduled_rebalance_ms: int | None = None


@dataclass
class _Kind:
    """One kind of work (connectors or tasks) through one round."""

    kept: dict[str, set] = field(default_factory=dict)
    revoked: dict[str, set] = field(default_factory=dict)
    lost: set = field(default_factory=set)


def _split(
    members: Mapping[str, Iterable[Item]], configured: set[Item], previous: frozenset[Item]
) -> _Kind:
    kind = _Kind()
    owner: dict[Item, str] = {}
    for member in sorted(members):
        kind.kept[member], kind.revoked[member] = set(), set()
        for item in members[member]:
            if item not in configured or item in owner:
                kind.revoked[member].add(item)
            else:
                owner[item] = member
                kind.kept[member].add(item)
    kind.lost = (set(previous) & configured) - owner.keys()
    return kind


def balance(
    kept: Mapping[str, set[Item]], unassigned: Iterable[Item], held: int = 0
) -> tuple[dict[str, set[Item]], dict[str, set[Item]]]:
    """(work per member after this round, work revoked per member) for one kind of work; see
    the module docstring, steps 3 and 4. ``held`` items count towards the shares but are not
    assigned (lost work during its delay)."""
    members = sorted(kept)
    if not members:
        return {}, {}
    pending = sorted(unassigned)  # type: ignore[type-var]
    total = sum(len(items) for items in kept.values()) + len(pending) + held
    floor, ceiled = divmod(total, len(members))
    by_load = sorted(members, key=lambda m: (-len(kept[m]), m))
    share = {m: floor + (1 if i < ceiled else 0) for i, m in enumerate(by_load)}
    after: dict[str, set[Item]] = {}
    revoked: dict[str, set[Item]] = {}
    for member in members:
        items = sorted(kept[member])  # type: ignore[type-var]
        after[member] = set(items[: share[member]])
        revoked[member] = set(items[share[member] :])
    for item in pending:
        with_room = [m for m in members if len(after[m]) + len(revoked[m]) < share[m]]
        if not with_room:  # cannot happen: the shares add up to the total
            raise RuntimeError("balance: no member has room for unassigned work")
        target = min(with_room, key=lambda m: (len(after[m]), m))
        after[target].add(item)
    return after, revoked


class IncrementalCooperativeAssignor:
    """The leader's assignor; see the module docstring."""

    def __init__(self, max_delay_ms: int):
        if max_delay_ms < 0:
            raise ValueError("scheduled.rebalance.max.delay.ms must be >= 0")
        self.max_delay_ms = max_delay_ms
        self._memory = _Memory()

    @property
    def scheduled_rebalance_ms(self) -> int | None:
        return self._memory.scheduled_rebalance_ms

    def assign(
        self,
        *,
        leader: str,
        leader_url: str,
        generation: int,
        config_offset: int,
        members: Mapping[str, MemberMetadata],
        connectors: Iterable[str],
        tasks: Iterable[ConnectorTaskId],
        now_ms: int,
    ) -> dict[str, Assignment]:
        """One assignment per member of ``members`` for ``generation``. ``config_offset`` is
        the offset of the config snapshot ``connectors``/``tasks`` come from; if a member has
        read further than that, every member gets CONFIG_MISMATCH (the leader must catch up)."""
        if any(m.config_offset > config_offset for m in members.values()):
            return {
                member: Assignment(leader, leader_url, config_offset, error=CONFIG_MISMATCH)
                for member in members
            }
        memory = self._memory
        if memory.generation != generation - 1:
            memory = _Memory(scheduled_rebalance_ms=None)
        configured_connectors, configured_tasks = set(connectors), set(tasks)
        c = _split(
            {m: md.connectors for m, md in members.items()},
            configured_connectors,
            memory.connectors,
        )
        t = _split({m: md.tasks for m, md in members.items()}, configured_tasks, memory.tasks)

        scheduled = memory.scheduled_rebalance_ms
        hold = bool(c.lost or t.lost)
        if not hold:
            scheduled = None
        elif scheduled is None and self.max_delay_ms > 0:
            scheduled = now_ms + self.max_delay_ms
        elif scheduled is None or now_ms >= scheduled:
            scheduled, hold = None, False
        held_c = c.lost if hold else set()
        held_t = t.lost if hold else set()
        delay_ms = max(0, scheduled - now_ms) if scheduled is not None else 0

        running_c = set().union(*c.kept.values()) if c.kept else set()
        running_t = set().union(*t.kept.values()) if t.kept else set()
        c_after, c_revoked = balance(
            c.kept, configured_connectors - running_c - held_c, len(held_c)
        )
        t_after, t_revoked = balance(t.kept, configured_tasks - running_t - held_t, len(held_t))

        assignments = {
            member: Assignment(
                leader=leader,
                leader_url=leader_url,
                config_offset=config_offset,
                connectors=tuple(c_after.get(member, ())),
                tasks=tuple(t_after.get(member, ())),
                revoked_connectors=tuple(c.revoked[member] | c_revoked.get(member, set())),
                revoked_tasks=tuple(t.revoked[member] | t_revoked.get(member, set())),
                delay_ms=delay_ms,
            )
            for member in members
        }
        self._memory = _Memory(
            generation=generation,
            connectors=frozenset(set().union(*c_after.values(), held_c)),
            tasks=frozenset(set().union(*t_after.values(), held_t)),
            scheduled_rebalance_ms=scheduled,
        )
        return assignments
