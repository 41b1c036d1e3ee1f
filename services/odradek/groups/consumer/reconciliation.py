"""Reconciliation: the next current assignment of a member on its way to its target (Kafka's
``CurrentAssignmentBuilder``).

**Invariant: a partition is assigned to a member only once no other member owns it.** A
partition is owned by a member from the moment it appears in that member's assigned partitions
until the member reported, in a heartbeat, that it no longer holds it (it left
``pending_revocation``). ``partition_owner(topic_id, partition)`` gives the member id that owns
it now (None if free).

From a member and the group's target (epoch and this member's target partitions):

- partitions it has that the target no longer gives it go to ``pending_revocation``: the member
  stays at its epoch in UNREVOKED_PARTITIONS, keeping only what it keeps, until a heartbeat
  whose owned partitions contain none of the revoked ones;
- otherwise it moves to the target epoch; partitions of its target that another member still
  owns are held back (UNRELEASED_PARTITIONS) and given at a later heartbeat, once free;
- otherwise it is STABLE at the target epoch with its whole target.

Pure functions.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from odradek.groups.consumer.assignment import Assignment, intersect, minus, normalized
from odradek.groups.consumer.member import ConsumerGroupMember, MemberState

__all__ = ["reconcile"]

PartitionOwner = Callable[[uuid.UUID, int], str | None]


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    partition_owner: PartitionOwner,
) -> ConsumerGroupMember:
    """The member after a heartbeat that reported ``owned`` (None: not reported)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or intersect(owned, member.pending_revocation):
            return member  # still holds some of what it must give up
        return _next(member, target_epoch, target, partition_owner)
    if member.state is MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _next(member, target_epoch, target, partition_owner)
    return member


def _next(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_owner: PartitionOwner,
) -> ConsumerGroupMember:
    kept = intersect(member.assigned, target)
    revoking = minus(member.assigned, target)
    if revoking:
        return dataclasses.replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
        )
    free: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id, partitions in minus(target, kept).items():
        for partition in partitions:
            holder = partition_owner(topic_id, partition)
            if holder is None or holder == member.member_id:
                free.setdefault(topic_id, set()).add(partition)
            else:
                unreleased = True
    assigned = normalized({t: set(kept.get(t, ())) | free.get(t, set()) for t in {*kept, *free}})
    previous = (
        member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch
    )
    return dataclasses.replace(
        member,
        member_epoch=target_epoch,
        previous_member_epoch=previous,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=assigned,
        pending_revocation={},
    )
