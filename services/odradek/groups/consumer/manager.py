"""KIP-848's consumer groups of one shard: ConsumerGroupHeartbeat, ConsumerGroupDescribe,
session and rebalance timeouts, and the replay of record types 3 to 8 (``shard.consumer``).

**A heartbeat** (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``) validates the request,
finds or (epoch 0) creates the member, then computes from the replayed state, without changing
it, the records that say what happened, in this order:

1. the member's subscription (type 5) if it is new or changed;
2. the subscribed topics' metadata (type 4) if the union of the members' subscriptions now
   resolves to other topics or partition counts; either change bumps the group epoch (type 3);
3. when the group epoch is ahead of the target assignment's, a new target: the assignor
   (``assignors``: the members' preferred ``server_assignor``, else the first of
   ``group.consumer.assignors``) runs on every member, a type 7 record per member whose target
   changed and the target's epoch (type 6);
4. the member's next current assignment (``reconciliation``), a type 8 record if it changed.

The runtime appends them and replays them through ``replay``: the one code path of recovery and
live traffic. The answer carries the member's epoch, the heartbeat interval
(``group.consumer.heartbeat.interval.ms``), and its assignment when it changed or the request
was a full one (joining, or after an error).

**Leaving** (epoch -1) deletes the member's records (types 8, 7, 5) and bumps the group epoch;
its partitions are free at once. A static member leaving (epoch -2, KIP-345 under KIP-848) keeps
its assignment: a new member with its instance id takes it over without a rebalance; unless it
comes back within the session timeout it is removed. **Timers** (not state; on loading they are
started for every member): a member not heard from for ``group.consumer.session.timeout.ms`` is
removed (fenced), and so is one that does not revoke within its rebalance timeout.

**Epochs.** A heartbeat's epoch must be the member's (or, having lost an answer, its previous
one while owning nothing more than it is assigned): otherwise FENCED_MEMBER_EPOCH, and the
member rejoins with epoch 0. Unknown members: UNKNOWN_MEMBER_ID. A group id that names a classic
group: GROUP_ID_NOT_FOUND (Kafka's answer to a consumer-protocol member of a classic group).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.coordinator.result import Result
from odradek.errors import ErrorCode
from odradek.groups.consumer import writes
from odradek.groups.consumer.assignment import Assignment, minus, of_records
from odradek.groups.consumer.assignors import ASSIGNORS, preferred_assignor
from odradek.groups.consumer.group import ConsumerGroup
from odradek.groups.consumer.member import ConsumerGroupMember, MemberState
from odradek.groups.consumer.reconciliation import reconcile
from odradek.groups.consumer.regex import RegexError, compile_subscription
from odradek.groups.consumer.requests import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    DescribedConsumerGroup,
    DescribedMember,
    HeartbeatAnswer,
    HeartbeatRequest,
    new_member_id,
    validate_heartbeat,
)
from odradek.groups.errors import GroupError
from odradek.groups.group import Group
from odradek.groups.records.base import CoordinatorRecord
from odradek.groups.records.consumer import (
    CONSUMER_RECORD_KEYS,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    TopicMetadata,
)

if TYPE_CHECKING:  # the shard imports this module: its context is only a type here
    from odradek.groups.shard import ShardContext

__all__ = ["ConsumerGroupManager"]

log = logging.getLogger(__name__)


def _session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session:{group_id}:{member_id}"


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance:{group_id}:{member_id}"


class ConsumerGroupManager:
    RECORD_KEYS = CONSUMER_RECORD_KEYS

    def __init__(self, context: ShardContext, groups: dict[str, Group]):
        self.context = context
        self.groups = groups
        self.config = context.config

    # -- replay ------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        key, value = record.key, record.value
        group = self._replayed_group(key.group_id, create=value is not None)
        if group is None:
            return
        try:
            self._replay(group, key, value)
        finally:
            live = self.groups.get(group.group_id) is group
            self.context.limits.set_held(group.group_id, group.held_bytes if live else 0)

    def _replay(self, group: ConsumerGroup, key: Any, value: Any) -> None:
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                del self.groups[key.group_id]
            else:
                group.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            group.set_topics(value.topics if value is not None else ())
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if value is None:
                group.remove_member(key.member_id)
            else:
                old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                group.put_member(
                    dataclasses.replace(
                        old,
                        instance_id=value.instance_id,
                        rack_id=value.rack_id,
                        client_id=value.client_id,
                        client_host=value.client_host,
                        subscribed_topic_names=tuple(value.subscribed_topic_names),
                        subscribed_topic_regex=value.subscribed_topic_regex,
                        rebalance_timeout_ms=value.rebalance_timeout_ms,
                        server_assignor=value.server_assignor,
                    )
                )
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            group.target_epoch = value.assignment_epoch if value is not None else 0
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = of_records(value.topic_partitions)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            old = group.members.get(key.member_id)
            if value is None:
                if old is not None:
                    group.put_member(
                        dataclasses.replace(
                            old,
                            member_epoch=0,
                            previous_member_epoch=0,
                            state=MemberState.STABLE,
                            assigned={},
                            pending_revocation={},
                        )
                    )
                return
            try:
                state = MemberState(value.state)
            except ValueError:
                state = MemberState.UNKNOWN
            group.put_member(
                dataclasses.replace(
                    old or ConsumerGroupMember(key.member_id),
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=state,
                    assigned=of_records(value.assigned_partitions),
                    pending_revocation=of_records(value.partitions_pending_revocation),
                )
            )

    def _replayed_group(self, group_id: str, *, create: bool) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None
            group = ConsumerGroup(group_id, self.config.group_consumer_assignors)
            self.groups[group_id] = group
        if not isinstance(group, ConsumerGroup):
            log.warning("a consumer group record for %s, a %s group: skipped", group_id, group.type)
            return None
        return group

    def on_loaded(self) -> None:
        for group in list(self.groups.values()):
            if isinstance(group, ConsumerGroup):
                for member_id in group.members:
                    self._schedule_session(group.group_id, member_id)

    def on_unloaded(self) -> None:
        # Nothing waits (heartbeats are answered at once; the runtime cancels timers); what the
        # groups held leaves the broker-wide account.
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup):
                self.context.limits.set_held(group.group_id, 0)

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> Result[HeartbeatAnswer]:
        self._validate(request)
        if request.member_epoch == 0 and not request.member_id:  # v0: the coordinator names it
            request = dataclasses.replace(request, member_id=new_member_id())
        group = self._group(request.group_id, create=request.member_epoch == 0)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, request)

        records: list[CoordinatorRecord] = []
        before = group.members.get(request.member_id)
        replaced: ConsumerGroupMember | None = None
        if request.member_epoch == 0:
            if before is None:
                replaced = self._static_predecessor(group, request)
                if replaced is None and len(group.members) >= self.config.group_consumer_max_size:
                    raise GroupError(
                        ErrorCode.group_max_size_reached,
                        f"group {group.group_id} has {len(group.members)} members, its maximum",
                    )
                self._check_budget(group, request)
            member = before or (
                dataclasses.replace(replaced, member_id=request.member_id)
                if replaced is not None
                else ConsumerGroupMember(request.member_id)
            )
        else:
            if before is None:
                raise GroupError(
                    ErrorCode.unknown_member_id,
                    f"{request.member_id!r} is not a member of {group.group_id}",
                )
            _check_epoch(before, request)
            member = before
        previous = before or replaced
        updated = _with_subscription(member, request)

        members = dict(group.members)
        if replaced is not None:
            del members[replaced.member_id]
            records.extend(writes.member_tombstones(group.group_id, replaced.member_id))
        members[updated.member_id] = updated
        if previous is None or not updated.same_subscription(previous) or replaced is not None:
            records.append(writes.member_record(group.group_id, updated))
        bump = previous is None or _subscription_key(previous) != _subscription_key(updated)

        topics = self._subscribed_topics(members.values())
        topics_changed = topics != group.topics
        if topics_changed:
            records.append(writes.topics_record(group.group_id, topics))
        group_epoch = group.group_epoch
        if bump or topics_changed:
            group_epoch += 1
            records.append(writes.epoch_record(group.group_id, group_epoch))

        targets = dict(group.target)
        if replaced is not None:
            targets[updated.member_id] = targets.pop(replaced.member_id, {})
            records.append(
                writes.target_record(group.group_id, updated.member_id, targets[updated.member_id])
            )
        target_epoch = group.target_epoch
        if group_epoch > target_epoch:
            new_targets = self._assign(members, topics, targets)
            for member_id, assignment in sorted(new_targets.items()):
                if member_id not in targets or dict(targets[member_id]) != dict(assignment):
                    records.append(writes.target_record(group.group_id, member_id, assignment))
            targets, target_epoch = new_targets, group_epoch
            records.append(writes.target_epoch_record(group.group_id, target_epoch))

        def owner(topic_id: uuid.UUID, partition: int) -> str | None:
            holder = group.owner(topic_id, partition)
            if replaced is not None and holder == replaced.member_id:
                return updated.member_id
            return holder

        reconciled = reconcile(
            updated, target_epoch, targets.get(updated.member_id, {}), request.owned, owner
        )
        if previous is None or replaced is not None or not reconciled.same_assignment(previous):
            records.append(writes.current_record(group.group_id, reconciled))

        self._schedule_session(group.group_id, reconciled.member_id)
        if replaced is not None:
            self._cancel_timers(group.group_id, replaced.member_id)
        self._track_revocation(group.group_id, reconciled, previous)

        full = request.member_epoch == 0 or (
            request.owned is not None
            and request.subscribed_topic_names is not None
            and request.rebalance_timeout_ms != -1
        )
        changed = previous is None or dict(previous.assigned) != dict(reconciled.assigned)
        stale = request.owned is not None and minus(
            request.owned, reconciled.pending_revocation
        ) != dict(reconciled.assigned)
        answer = HeartbeatAnswer(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            assignment=reconciled.assigned if (full or changed or stale) else None,
        )
        return Result(records=records, response=answer)

    def _validate(self, request: HeartbeatRequest) -> None:
        validate_heartbeat(
            request,
            self.config.group_consumer_assignors,
            self.config.group_member_metadata_max_bytes,
        )

    def _group(self, group_id: str, *, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise GroupError(
                    ErrorCode.group_id_not_found, f"consumer group {group_id} not found"
                )
            return ConsumerGroup(
                group_id, self.config.group_consumer_assignors
            )  # replay creates it
        if not isinstance(group, ConsumerGroup):
            raise GroupError(
                ErrorCode.group_id_not_found, f"group {group_id} is not a consumer group"
            )
        return group

    def _static_predecessor(
        self, group: ConsumerGroup, request: HeartbeatRequest
    ) -> ConsumerGroupMember | None:
        if request.instance_id is None:
            return None
        member_id = group.static_member_id(request.instance_id)
        if member_id is None:
            return None
        old = group.members[member_id]
        if old.member_epoch != STATIC_LEAVE_EPOCH:
            raise GroupError(
                ErrorCode.unreleased_instance_id,
                f"instance {request.instance_id} is still member {member_id}",
            )
        return dataclasses.replace(
            old, member_epoch=old.previous_member_epoch, state=MemberState.STABLE
        )

    def _check_budget(self, group: ConsumerGroup, request: HeartbeatRequest) -> None:
        """``odradek.group.coordinator.metadata.max.bytes``: a new member must fit in the
        broker-wide account (``groups.limits``), else COORDINATOR_NOT_AVAILABLE (retriable)."""
        joining = _with_subscription(ConsumerGroupMember(request.member_id), request).held_bytes()
        limits = self.context.limits
        if not limits.fits(group.group_id, group.held_bytes + joining):
            raise GroupError(
                ErrorCode.coordinator_not_available,
                f"the group coordinator holds {limits.total_bytes} bytes of member metadata "
                f"(odradek.group.coordinator.metadata.max.bytes "
                f"{self.config.group_coordinator_metadata_max_bytes})",
            )

    def _leave(self, group: ConsumerGroup, request: HeartbeatRequest) -> Result[HeartbeatAnswer]:
        member = group.members.get(request.member_id)
        if member is None and request.instance_id is not None:
            static_id = group.static_member_id(request.instance_id)
            member = group.members.get(static_id) if static_id else None
        if member is None:
            raise GroupError(
                ErrorCode.unknown_member_id,
                f"{request.member_id!r} is not a member of {group.group_id}",
            )
        interval = self.config.group_consumer_heartbeat_interval_ms
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            if member.instance_id != request.instance_id:
                raise GroupError(
                    ErrorCode.fenced_instance_id,
                    f"instance {request.instance_id} is not member {member.member_id}",
                )
            left = dataclasses.replace(
                member,
                member_epoch=STATIC_LEAVE_EPOCH,
                previous_member_epoch=member.member_epoch,
            )
            self._cancel_timers(group.group_id, member.member_id, session=False)
            return Result(
                records=[writes.current_record(group.group_id, left)],
                response=HeartbeatAnswer(member.member_id, STATIC_LEAVE_EPOCH, interval),
            )
        self._cancel_timers(group.group_id, member.member_id)
        return Result(
            records=self._removal(group, member.member_id),
            response=HeartbeatAnswer(member.member_id, LEAVE_EPOCH, interval),
        )

    def _removal(self, group: ConsumerGroup, member_id: str) -> list[CoordinatorRecord]:
        """The records that remove a member: its records' tombstones, a new group epoch (and
        the topics' metadata if what the others subscribe to resolves to less)."""
        records = writes.member_tombstones(group.group_id, member_id)
        others = [m for m in group.members.values() if m.member_id != member_id]
        topics = self._subscribed_topics(others)
        if topics != group.topics:
            records.append(writes.topics_record(group.group_id, topics))
        records.append(writes.epoch_record(group.group_id, group.group_epoch + 1))
        return records

    def _member_topics(self, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            try:
                pattern = compile_subscription(member.subscribed_topic_regex)
            except RegexError:  # accepted by an older broker's rules: matches nothing here
                return names
            names.update(
                t
                for t in self.context.topics.topic_names()
                if not t.startswith("__") and pattern.fullmatch(t)
            )
        return names

    def _subscribed_topics(
        self, members: Iterable[ConsumerGroupMember]
    ) -> dict[str, TopicMetadata]:
        names: set[str] = set()
        for member in members:
            names |= self._member_topics(member)
        topics = {}
        for name in sorted(names):
            topic_id = self.context.topics.topic_id(name)
            count = self.context.topics.partition_count(name)
            if topic_id is not None and count:
                topics[name] = TopicMetadata(topic_id, name, count)
        return topics

    def _assign(
        self,
        members: Mapping[str, ConsumerGroupMember],
        topics: Mapping[str, TopicMetadata],
        previous: Mapping[str, Assignment],
    ) -> dict[str, Assignment]:
        name = preferred_assignor(members.values(), self.config.group_consumer_assignors)
        subscriptions = {
            m.member_id: frozenset(
                topics[t].topic_id for t in self._member_topics(m) if t in topics
            )
            for m in members.values()
        }
        partitions = {t.topic_id: t.num_partitions for t in topics.values()}
        return ASSIGNORS[name](subscriptions, partitions, previous)

    # -- timers --------------------------------------------------------------------------

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.context.timer.schedule(
            _session_key(group_id, member_id),
            self.config.group_consumer_session_timeout_ms,
            lambda: self._expire(group_id, member_id, None),
        )

    def _track_revocation(
        self, group_id: str, member: ConsumerGroupMember, previous: ConsumerGroupMember | None
    ) -> None:
        key = _rebalance_key(group_id, member.member_id)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.context.timer.cancel(key)
        elif previous is None or previous.state is not MemberState.UNREVOKED_PARTITIONS:
            timeout = member.rebalance_timeout_ms
            if timeout < 0:
                timeout = self.config.group_consumer_session_timeout_ms
            epoch = member.member_epoch
            self.context.timer.schedule(
                key, timeout, lambda: self._expire(group_id, member.member_id, epoch)
            )

    def _cancel_timers(self, group_id: str, member_id: str, *, session: bool = True) -> None:
        if session:
            self.context.timer.cancel(_session_key(group_id, member_id))
        self.context.timer.cancel(_rebalance_key(group_id, member_id))

    def _expire(self, group_id: str, member_id: str, revoking_epoch: int | None) -> Result[None]:
        """A session (``revoking_epoch`` None) or a revocation ran out: fence the member."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or member_id not in group.members:
            return Result()
        member = group.members[member_id]
        if revoking_epoch is not None and (
            member.state is not MemberState.UNREVOKED_PARTITIONS
            or member.member_epoch != revoking_epoch
        ):
            return Result()
        log.info(
            "consumer group %s: member %s fenced (%s timed out)",
            group_id,
            member_id,
            "session" if revoking_epoch is None else "revocation",
        )
        self._cancel_timers(group_id, member_id)
        return Result(records=self._removal(group, member_id))

    # -- ConsumerGroupDescribe ------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        group = self._group(group_id, create=False)
        return DescribedConsumerGroup(
            group_id=group.group_id,
            state=group.state_name(),
            group_epoch=group.group_epoch,
            assignment_epoch=group.target_epoch,
            assignor_name=group.assignor_name(),
            members=tuple(
                DescribedMember(m, dict(group.target.get(m.member_id, {})))
                for m in sorted(group.members.values(), key=lambda m: m.member_id)
            ),
            topic_names=dict(group.topic_names),
        )


def _check_epoch(member: ConsumerGroupMember, request: HeartbeatRequest) -> None:
    received = request.member_epoch
    if received > member.member_epoch or (
        received < member.member_epoch
        and (
            received != member.previous_member_epoch
            or request.owned is None
            or minus(request.owned, member.assigned)
        )
    ):
        raise GroupError(
            ErrorCode.fenced_member_epoch,
            f"member {member.member_id}: epoch {received}, expected {member.member_epoch}",
        )


def _with_subscription(
    member: ConsumerGroupMember, request: HeartbeatRequest
) -> ConsumerGroupMember:
    return dataclasses.replace(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        client_id=request.client_id,
        client_host=request.client_host,
        subscribed_topic_names=(
            tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            (request.subscribed_topic_regex or None)
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor=(
            (request.server_assignor or None)
            if request.server_assignor is not None
            else member.server_assignor
        ),
    )


def _subscription_key(member: ConsumerGroupMember) -> tuple[object, ...]:
    """What changes the target assignment: a change bumps the group epoch."""
    return (
        member.subscribed_topic_names,
        member.subscribed_topic_regex,
        member.server_assignor,
        member.rack_id,
    )
