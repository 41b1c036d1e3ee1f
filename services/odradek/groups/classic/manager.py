"""The classic group protocol of one shard (the classic half of Kafka's
``GroupMetadataManager``): JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and their timers.

**State and records.** Kafka keeps a classic group's rebalance in memory (who waits in
JoinGroup, who must still sync, the timers) and writes a ``GroupMetadata`` record only when a
generation is settled: the leader's SyncGroup (members and assignments) and a rebalance that ends
with no member (an Empty group). Operations here therefore change the group themselves and return
``Result(replay=False)``; ``replay`` rebuilds groups from those records when a shard loads (a
group with members comes back Stable, its members' sessions restart), and applies tombstones
written by DeleteGroups or expiry (the group becomes Dead and leaves ``shard.groups``).

**Waiting answers.** A JoinGroup answer waits for the join phase to complete, a follower's
SyncGroup for the leader's: the operation returns ``Result(deferred=future)``; futures are
completed with an answer value (never an exception) by whatever ends the wait: the phase
completing, the member being removed or fenced, the shard unloading (NOT_COORDINATOR).

**Timers** (one per key, replaced when rescheduled): ``heartbeat:<group>:<member>`` (session
timeout; a member waiting in a rebalance counts as alive unless it is new),
``pending:<group>:<member>`` (a KIP-394 member id not used within the session timeout),
``join:<group>`` (initial delay, then rebalance timeout), ``sync:<group>`` (members that do not
sync within the rebalance timeout are removed).

**Bounds** (``groups.limits``): a join is checked against the member, group, pending-id and
coordinator bounds before it changes anything (``_check_bounds``), a leader's assignments
before they are stored (``_check_assignments``); after an operation changed a group, its bytes
are set in the broker-wide account (``_account``).

Runs inside the runtime's operations (one at a time per shard), on the event loop.

Its length: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance and session timers
all read and change one group's in-memory rebalance state, so they stay together (Kafka's
``GroupMetadataManager`` keeps them in one class too); the records and the waiting futures
live in their own modules.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from odradek.coordinator.errors import coordinator_error_of
from odradek.coordinator.result import Result
from odradek.errors import ErrorCode
from odradek.groups.classic.group import ClassicGroup
from odradek.groups.classic.member import ClassicMember, protocols_bytes
from odradek.groups.classic.messages import (
    JoinAnswer,
    JoinRequest,
    LeaveMember,
    SyncAnswer,
)
from odradek.groups.classic.state import ClassicGroupState
from odradek.groups.classic.waiting import Waiting, new_waiting
from odradek.groups.errors import GroupError
from odradek.groups.group import Group, GroupType
from odradek.groups.limits import MEMBER_OVERHEAD_BYTES, PENDING_MEMBER_BYTES
from odradek.groups.records.base import CoordinatorRecord
from odradek.groups.records.classic import GroupMetadataKey

if TYPE_CHECKING:
    from odradek.groups.shard import ShardContext

__all__ = ["ClassicGroupManager", "NEW_MEMBER_JOIN_TIMEOUT_MS"]

log = logging.getLogger(__name__)

S = ClassicGroupState
# Kafka's group.classic... new member join timeout: a member that joined for the first time
# and vanished before the join phase completed is removed after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

Records = list[CoordinatorRecord]


class ClassicGroupManager:
    RECORD_KEYS = (GroupMetadataKey,)

    def __init__(self, context: ShardContext, groups: dict[str, Group]):
        self.context = context
        self.groups = groups
        self.config = context.config

    # -- replay and lifecycle --------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        group_id = record.key.group
        existing = self.groups.get(group_id)
        if existing is not None and existing.type is not GroupType.CLASSIC:
            return  # the id belongs to a consumer group now; an old classic record
        if record.value is None:
            if isinstance(existing, ClassicGroup):
                self._unload_group(existing, ErrorCode.coordinator_not_available)
                existing.state = S.DEAD
                del self.groups[group_id]
            return
        group = ClassicGroup.from_record(group_id, record.value)
        self.groups[group_id] = group
        self._account(group)

    def on_loaded(self) -> None:
        for group in self._classic_groups():
            for member in group.members.values():
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
            if len(group.members) > self.config.group_max_size:
                # group.max.size was lowered: rebalance; only that many may rejoin.
                self._prepare_rebalance(group, f"loaded with {len(group.members)} members")

    def on_unloaded(self) -> None:
        for group in self._classic_groups():
            self._unload_group(group, ErrorCode.not_coordinator)

    def _unload_group(self, group: ClassicGroup, error: ErrorCode) -> None:
        timer = self.context.timer
        timer.cancel(_join_key(group))
        timer.cancel(_sync_key(group))
        for member_id in list(group.pending_members):
            self._drop_pending(group, member_id)
        self.context.limits.set_held(group.group_id, 0)
        for member in group.members.values():
            timer.cancel(_heartbeat_key(group, member.member_id))
            member.complete_join(JoinAnswer.failed(error, member.member_id))
            member.complete_sync(SyncAnswer(error))

    def _classic_groups(self) -> list[ClassicGroup]:
        return [g for g in self.groups.values() if isinstance(g, ClassicGroup)]

    def group(self, group_id: str) -> ClassicGroup:
        """The classic group ``group_id``: UNKNOWN_MEMBER_ID if there is none, GROUP_ID_NOT_FOUND
        if the id names a consumer group (Kafka's ``getOrMaybeCreateClassicGroup``)."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.unknown_member_id, f"classic group {group_id} not found")
        if not isinstance(group, ClassicGroup):
            raise GroupError(ErrorCode.group_id_not_found, f"{group_id} is not a classic group")
        return group

    # -- JoinGroup -------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> Result[JoinAnswer]:
        """A member joins (or rejoins); the answer waits for the join phase to complete."""
        try:
            return self._join(request)
        except GroupError as e:
            return Result(response=JoinAnswer.failed(e.error_code, request.member_id), replay=False)
        finally:
            group = self.groups.get(request.group_id)
            if isinstance(group, ClassicGroup):
                self._account(group)

    def _join(self, request: JoinRequest) -> Result[JoinAnswer]:
        config = self.config
        if not request.group_id:
            raise GroupError(ErrorCode.invalid_group_id, "the group id is empty")
        if not (
            config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            raise GroupError(
                ErrorCode.invalid_session_timeout,
                f"session timeout {request.session_timeout_ms} ms is outside"
                f" [{config.group_min_session_timeout_ms}, {config.group_max_session_timeout_ms}]",
            )
        unknown_member = request.member_id == ""
        existing = self.groups.get(request.group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            raise GroupError(
                ErrorCode.group_id_not_found, f"{request.group_id} is a consumer-protocol group"
            )
        if existing is None:
            if not unknown_member:
                raise GroupError(ErrorCode.unknown_member_id, f"no group {request.group_id}")
            existing = ClassicGroup(request.group_id, self.context.clock_ms())
        group = existing
        if not self._accepts_joining_member(group, request.member_id):
            raise GroupError(
                ErrorCode.group_max_size_reached,
                f"group {group.group_id} has {config.group_max_size} members already",
            )
        names = {name for name, _ in request.protocols}
        _raise_if_dead(group)
        if not group.supports_protocols(request.protocol_type, names):
            raise GroupError(
                ErrorCode.inconsistent_group_protocol,
                f"protocol type {request.protocol_type!r} and protocols {sorted(names)}"
                f" do not fit group {group.group_id}",
            )
        self._check_bounds(group, request)
        self.groups.setdefault(group.group_id, group)
        if unknown_member:
            return self._join_new_member(group, request)
        return self._join_existing_member(group, request)

    def _check_bounds(self, group: ClassicGroup, request: JoinRequest) -> None:
        """The memory bounds of ``groups.limits``, checked before the join changes anything."""
        config = self.config
        limits = self.context.limits
        metadata_bytes = protocols_bytes(request.protocols)
        if metadata_bytes > config.group_member_metadata_max_bytes:
            raise GroupError(
                ErrorCode.invalid_request,
                f"{metadata_bytes} bytes of protocol metadata exceed odradek.group.member."
                f"metadata.max.bytes ({config.group_member_metadata_max_bytes})",
            )
        # The account's figure, set after every operation that grows a group (joins, stored
        # assignments, replay): never below what the group holds, and O(1) where recounting
        # is O(members) for each of a rebalance's joins.
        held = limits.held_bytes(group.group_id)
        pending = request.member_id == "" and request.require_known_member_id
        if request.group_instance_id is None and pending:
            if len(group.members) + len(group.pending_members) >= config.group_max_size:
                raise GroupError(
                    ErrorCode.group_max_size_reached,
                    f"group {group.group_id} has {len(group.members)} members and "
                    f"{len(group.pending_members)} pending member ids (group.max.size "
                    f"{config.group_max_size})",
                )
            if not limits.may_add_pending(request.connection_id):
                raise GroupError(
                    ErrorCode.group_max_size_reached,
                    f"this connection holds {limits.pending_of(request.connection_id)} pending "
                    f"member ids (odradek.group.max.pending.members.per.connection)",
                )
            after = held + PENDING_MEMBER_BYTES
        else:
            old = group.members.get(request.member_id)
            if old is None and request.group_instance_id is not None:
                old = group.members.get(group.static_member_id(request.group_instance_id) or "")
            if old is not None:  # a rejoin: only its metadata changes
                was = old.held_bytes()
                joining = was - protocols_bytes(old.protocols) + metadata_bytes
            else:
                was = PENDING_MEMBER_BYTES if request.member_id in group.pending_members else 0
                ids = 2 * len(request.client_id) + 37 + len(request.client_host)  # id: a uuid
                joining = MEMBER_OVERHEAD_BYTES + metadata_bytes + ids
                joining += len(request.group_instance_id or "")
            after = held - was + joining
            if after > config.group_metadata_max_bytes and after > held:
                raise GroupError(
                    ErrorCode.group_max_size_reached,
                    f"group {group.group_id} would hold {after} bytes of member metadata "
                    f"(odradek.group.metadata.max.bytes {config.group_metadata_max_bytes})",
                )
        if after > held and not limits.fits(group.group_id, after):
            raise GroupError(
                ErrorCode.coordinator_not_available,
                f"the group coordinator holds {limits.total_bytes} bytes of member metadata "
                f"(odradek.group.coordinator.metadata.max.bytes "
                f"{config.group_coordinator_metadata_max_bytes})",
            )

    def _account(self, group: ClassicGroup) -> None:
        """Tell the broker-wide account what ``group`` holds now (``groups.limits``)."""
        live = self.groups.get(group.group_id) is group and not group.in_state(S.DEAD)
        self.context.limits.set_held(group.group_id, group.held_bytes() if live else 0)

    def _drop_pending(self, group: ClassicGroup, member_id: str) -> bool:
        """Forget a pending member id (joined, left or expired); False if it was none."""
        connection_id = group.pending_members.pop(member_id, None)
        if connection_id is None:
            return False
        self.context.timer.cancel(_pending_key(group, member_id))
        self.context.limits.remove_pending(connection_id)
        return True

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """``group.max.size``: while the group rebalances, members that already rejoined count;
        otherwise its members do (Kafka's ``acceptJoiningMember``)."""
        limit = self.config.group_max_size
        if group.in_state(S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.in_state(S.PREPARING_REBALANCE):
            joined = sum(1 for m in group.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or joined < limit
        return (
            member is not None or member_id in group.pending_members or (len(group.members) < limit)
        )

    def _join_new_member(self, group: ClassicGroup, request: JoinRequest) -> Result[JoinAnswer]:
        member_id = f"{request.client_id}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            old_id = group.static_member_id(request.group_instance_id)
            if old_id is not None:
                return self._replace_static_member(group, request, old_id, member_id)
            return self._add_member(group, request, member_id)
        if request.require_known_member_id:
            # KIP-394: the member learns its id first, so a join that times out on the client
            # side does not leave a member behind for a whole session.
            group.pending_members[member_id] = request.connection_id
            self.context.limits.add_pending(request.connection_id)
            self.context.timer.schedule(
                _pending_key(group, member_id),
                request.session_timeout_ms,
                lambda: self._expire_pending(group, member_id),
            )
            return Result(
                response=JoinAnswer.failed(ErrorCode.member_id_required, member_id), replay=False
            )
        return self._add_member(group, request, member_id)

    def _join_existing_member(
        self, group: ClassicGroup, request: JoinRequest
    ) -> Result[JoinAnswer]:
        member_id = request.member_id
        if member_id in group.pending_members:
            if request.group_instance_id is not None:
                raise GroupError(
                    ErrorCode.unknown_member_id, "a static member never gets a pending member id"
                )
            self._drop_pending(group, member_id)
            return self._add_member(group, request, member_id)
        group.validate_member(member_id, request.group_instance_id, "join")
        member = group.members[member_id]
        if group.in_state(S.PREPARING_REBALANCE):
            return self._update_member(group, member, request)
        if group.in_state(S.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # Its JoinGroup answer was lost: the same answer again.
                return Result(response=self._join_answer(group, member), replay=False)
            return self._update_member(group, member, request)
        if group.in_state(S.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                return self._update_member(group, member, request)
            return Result(response=self._join_answer(group, member, members=False), replay=False)
        raise GroupError(ErrorCode.unknown_member_id, f"group {group.group_id} is {group.state}")

    def _add_member(
        self, group: ClassicGroup, request: JoinRequest, member_id: str
    ) -> Result[JoinAnswer]:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        future = self._new_join_future(member)
        if group.in_state(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        records = self._rebalance_or_complete_join(
            group, f"{member_id} joined (client reason: {request.reason})"
        )
        return Result(records=records, deferred=future, replay=False)

    def _update_member(
        self, group: ClassicGroup, member: ClassicMember, request: JoinRequest
    ) -> Result[JoinAnswer]:
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.complete_join(JoinAnswer.failed(ErrorCode.rebalance_in_progress, member.member_id))
        future = self._new_join_future(member)
        records = self._rebalance_or_complete_join(
            group, f"{member.member_id} rejoined (client reason: {request.reason})"
        )
        return Result(records=records, deferred=future, replay=False)

    def _replace_static_member(
        self, group: ClassicGroup, request: JoinRequest, old_id: str, new_id: str
    ) -> Result[JoinAnswer]:
        """KIP-345: a static member restarted. Its old member id is fenced; in a Stable group
        whose chosen protocol the new metadata keeps, it gets the generation back without a
        rebalance (the group's record names the new id)."""
        assert request.group_instance_id is not None
        self.context.timer.cancel(_heartbeat_key(group, old_id))
        leader_before = group.leader_id
        group.replace_static_member(request.group_instance_id, old_id, new_id)
        member = group.members[new_id]
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        old_client = (member.client_id, member.client_host)
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.in_state(S.STABLE):
            if group.select_protocol() != group.protocol_name or member.metadata(
                group.protocol_name
            ) != dict(old[0]).get(group.protocol_name or ""):
                future = self._new_join_future(member)
                records = self._prepare_rebalance(group, f"static member {new_id} changed")
                return Result(records=records, deferred=future, replay=False)
            # Before v9 the answer names the leader as it was: a restarted static leader then
            # acts as a follower and does not assign again (an assignment from a leader that
            # knows no member's subscription would make it rejoin). v9 tells it to skip.
            skips = group.is_leader(new_id) and request.supports_skip_assignment
            answer = JoinAnswer(
                error=ErrorCode.none,
                member_id=new_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type(),
                protocol_name=group.protocol_name,
                leader=(group.leader_id if skips else leader_before) or "",
                members=group.joined_members() if skips else (),
                skip_assignment=skips,
            )
            instance_id = request.group_instance_id

            def written(error: BaseException | None) -> None:
                if error is None or new_id not in group.members:
                    return
                # Not persisted: the instance is the old member id again (Kafka reverts too).
                log.warning("group %s: replacing static member failed: %s", group.group_id, error)
                group.replace_static_member(instance_id, new_id, old_id)
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                member.client_id, member.client_host = old_client
                self.context.timer.cancel(_heartbeat_key(group, new_id))
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

            return Result(
                records=[group.record()], response=answer, replay=False, on_written=written
            )
        future = self._new_join_future(member)
        if group.in_state(S.COMPLETING_REBALANCE):
            records = self._prepare_rebalance(group, f"static member {new_id} replaced {old_id}")
        else:  # PreparingRebalance: the member waits for the phase like the others
            records = self._maybe_complete_join(group)
        return Result(records=records, deferred=future, replay=False)

    def _new_join_future(self, member: ClassicMember) -> Waiting[JoinAnswer]:
        future: Waiting[JoinAnswer] = new_waiting()
        member.join_future = future
        return future

    def _join_answer(
        self, group: ClassicGroup, member: ClassicMember, *, members: bool = True
    ) -> JoinAnswer:
        leader = group.is_leader(member.member_id)
        return JoinAnswer(
            error=ErrorCode.none,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type(),
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.joined_members() if leader and members else (),
        )

    # -- the join phase --------------------------------------------------------------------

    def _rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> Records:
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            return self._prepare_rebalance(group, reason)
        return self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> Records:
        log.info(
            "group %s: rebalance (generation %d): %s", group.group_id, group.generation_id, reason
        )
        if group.in_state(S.COMPLETING_REBALANCE):
            self._reset_assignment(group, ErrorCode.rebalance_in_progress)
        self.context.timer.cancel(_sync_key(group))
        initial = group.in_state(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self.context.clock_ms())
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
            return []
        if group.all_members_joined():
            return self._complete_join(group)
        self.context.timer.schedule(
            _join_key(group),
            group.rebalance_timeout_ms(),
            lambda: self._on_join_timeout(group),
        )
        return []

    def _schedule_initial_join(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        def fire() -> Result[None]:
            if group.new_member_added and remaining_ms > 0:
                # KIP-134: members keep arriving; wait again, within the rebalance timeout.
                group.new_member_added = False
                next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, next_delay, max(remaining_ms - delay_ms, 0))
                return Result(replay=False)
            return self._on_join_timeout(group)

        self.context.timer.schedule(_join_key(group), delay_ms, fire)

    def _on_join_timeout(self, group: ClassicGroup) -> Result[None]:
        if (
            not group.in_state(S.PREPARING_REBALANCE)
            or self.groups.get(group.group_id) is not group
        ):
            return Result(replay=False)
        return Result(records=self._complete_join(group), replay=False)

    def _maybe_complete_join(self, group: ClassicGroup) -> Records:
        if (
            group.in_state(S.PREPARING_REBALANCE)
            and group.all_members_joined()
            and group.previous_state is not S.EMPTY
        ):
            return self._complete_join(group)
        return []

    def _complete_join(self, group: ClassicGroup) -> Records:
        """The join phase ends: members that did not rejoin leave, the next generation starts,
        every joined member gets its answer (the leader with everyone's metadata)."""
        timer = self.context.timer
        timer.cancel(_join_key(group))
        if group.in_state(S.DEAD):
            return []
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: %s did not rejoin in time", group.group_id, member.member_id)
            timer.cancel(_heartbeat_key(group, member.member_id))
            member.complete_sync(SyncAnswer(ErrorCode.rebalance_in_progress))
            group.remove(member.member_id)
        group.init_next_generation(self.context.clock_ms())
        self._account(group)
        if group.in_state(S.EMPTY):
            log.info("group %s: generation %d with no member", group.group_id, group.generation_id)
            return [group.record()]
        log.info(
            "group %s: generation %d, protocol %s, %d members, leader %s",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            len(group.members),
            group.leader_id,
        )
        for member in group.members.values():
            member.complete_join(self._join_answer(group, member))
            member.is_new = False
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        self._schedule_sync_timeout(group)
        return []

    def _schedule_sync_timeout(self, group: ClassicGroup) -> None:
        generation = group.generation_id

        def fire() -> Result[None]:
            if (
                self.groups.get(group.group_id) is not group
                or group.generation_id != generation
                or not group.in_state(S.COMPLETING_REBALANCE, S.STABLE)
                or not group.pending_sync_members
            ):
                return Result(replay=False)
            for member_id in list(group.pending_sync_members):
                log.info("group %s: %s did not sync in time", group.group_id, member_id)
                self._remove_member(group, member_id)
            records: Records = []
            if group.in_state(S.COMPLETING_REBALANCE, S.STABLE):
                records = self._prepare_rebalance(group, "members did not sync in time")
            return Result(records=records, replay=False)

        self.context.timer.schedule(_sync_key(group), group.rebalance_timeout_ms(), fire)

    def _reset_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.complete_sync(SyncAnswer(error))

    # -- SyncGroup -------------------------------------------------------------------------

    def sync(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> Result[SyncAnswer]:
        try:
            group = self.group(group_id)
            _raise_if_dead(group)
            group.validate_member(member_id, group_instance_id, "sync")
            if generation_id != group.generation_id:
                raise GroupError(
                    ErrorCode.illegal_generation,
                    f"generation {generation_id} is not the group's {group.generation_id}",
                )
            if (protocol_type is not None and protocol_type != group.protocol_type()) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise GroupError(ErrorCode.inconsistent_group_protocol)
        except GroupError as e:
            return Result(response=SyncAnswer(e.error_code), replay=False)
        member = group.members[member_id]
        if group.in_state(S.PREPARING_REBALANCE):
            return Result(response=SyncAnswer(ErrorCode.rebalance_in_progress), replay=False)
        if group.in_state(S.STABLE):
            group.pending_sync_members.discard(member_id)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return Result(response=self._sync_answer(group, member), replay=False)
        if group.is_leader(member_id):
            refused = self._check_assignments(group, assignments)
            if refused is not None:
                return Result(response=SyncAnswer(refused), replay=False)
        # CompletingRebalance: wait for the leader's assignment.
        future: Waiting[SyncAnswer] = new_waiting()
        member.complete_sync(SyncAnswer(ErrorCode.rebalance_in_progress))
        member.sync_future = future
        group.pending_sync_members.discard(member_id)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if not group.is_leader(member_id):
            return Result(deferred=future, replay=False)
        full = {m: assignments.get(m, b"") for m in group.members}
        generation = group.generation_id

        def written(error: BaseException | None) -> None:
            if not group.in_state(S.COMPLETING_REBALANCE) or group.generation_id != generation:
                return  # the group moved on meanwhile; its members were told
            if error is not None:
                code = coordinator_error_of(error).error_code
                log.warning(
                    "group %s: storing generation %d failed: %s", group_id, generation, error
                )
                self._reset_assignment(group, code)
                self._spawn_rebalance(group, "the group's metadata could not be stored")
                return
            for m in group.members.values():
                m.assignment = full[m.member_id]
            self._account(group)
            group.transition_to(S.STABLE, self.context.clock_ms())
            for m in group.members.values():
                m.complete_sync(self._sync_answer(group, m))

        return Result(
            records=[group.record(full)], deferred=future, replay=False, on_written=written
        )

    def _check_assignments(
        self, group: ClassicGroup, assignments: dict[str, bytes]
    ) -> ErrorCode | None:
        """The leader's assignments within ``groups.limits``' bounds, else the refusal's code
        (entries for ids that are no members count too: the leader sent them)."""
        config = self.config
        largest = max(map(len, assignments.values()), default=0)
        held = group.held_bytes()
        after = held + sum(map(len, assignments.values()))
        after -= sum(len(m.assignment) for m in group.members.values())
        if largest > config.group_member_metadata_max_bytes:
            log.info(
                "group %s: refused an assignment of %d bytes "
                "(odradek.group.member.metadata.max.bytes)",
                group.group_id,
                largest,
            )
            return ErrorCode.invalid_request
        if after > max(config.group_metadata_max_bytes, held):
            log.info(
                "group %s: refused assignments, the group would hold %d bytes "
                "(odradek.group.metadata.max.bytes)",
                group.group_id,
                after,
            )
            return ErrorCode.invalid_request
        if after > held and not self.context.limits.fits(group.group_id, after):
            return ErrorCode.coordinator_not_available
        return None

    def _spawn_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Rebalance from a write callback (outside an operation): as a timer, i.e. an
        operation of the shard."""

        def fire() -> Result[None]:
            if self.groups.get(group.group_id) is not group or not group.in_state(
                S.COMPLETING_REBALANCE, S.STABLE
            ):
                return Result(replay=False)
            return Result(records=self._prepare_rebalance(group, reason), replay=False)

        self.context.timer.schedule(_rebalance_key(group), 0, fire)

    def _sync_answer(self, group: ClassicGroup, member: ClassicMember) -> SyncAnswer:
        return SyncAnswer(
            ErrorCode.none, member.assignment, group.protocol_type(), group.protocol_name
        )

    # -- Heartbeat -------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> Result[ErrorCode]:
        try:
            group = self.group(group_id)
            _raise_if_dead(group)
            group.validate_member(member_id, group_instance_id, "heartbeat")
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.illegal_generation)
        except GroupError as e:
            return Result(response=e.error_code, replay=False)
        member = group.members[member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.in_state(S.PREPARING_REBALANCE):
            return Result(response=ErrorCode.rebalance_in_progress, replay=False)
        if group.in_state(S.EMPTY):
            return Result(response=ErrorCode.unknown_member_id, replay=False)
        return Result(response=ErrorCode.none, replay=False)

    def _schedule_heartbeat(
        self, group: ClassicGroup, member: ClassicMember, delay_ms: int
    ) -> None:
        member_id = member.member_id
        self.context.timer.schedule(
            _heartbeat_key(group, member_id),
            delay_ms,
            lambda: self._expire_heartbeat(group, member_id),
        )

    def _expire_heartbeat(self, group: ClassicGroup, member_id: str) -> Result[None]:
        member = group.members.get(member_id)
        if self.groups.get(group.group_id) is not group or member is None or group.in_state(S.DEAD):
            return Result(replay=False)
        if member.has_satisfied_heartbeat():
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return Result(replay=False)
        log.info("group %s: member %s's session expired", group.group_id, member_id)
        records = self._remove_and_rebalance(group, member_id)
        self._account(group)
        return Result(records=records, replay=False)

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> Result[None]:
        if member_id not in group.pending_members or self.groups.get(group.group_id) is not group:
            return Result(replay=False)
        self._drop_pending(group, member_id)
        records = self._maybe_complete_join(group)
        self._account(group)
        return Result(records=records, replay=False)

    # -- LeaveGroup ------------------------------------------------------------------------

    def leave(self, group_id: str, members: list[LeaveMember]) -> Result[list[LeaveMember]]:
        """Members leave; each gets its own error (v3+ batches). The whole request fails
        (``GroupError``) only if the group is unknown or dead."""
        group = self.group(group_id)
        _raise_if_dead(group)
        answers: list[LeaveMember] = []
        records: Records = []
        for leaving in members:
            error = ErrorCode.none
            try:
                records += self._leave_one(group, leaving)
            except GroupError as e:
                error = e.error_code
            answers.append(LeaveMember(leaving.member_id, leaving.group_instance_id, error))
        self._account(group)
        return Result(records=records, response=answers, replay=False)

    def _leave_one(self, group: ClassicGroup, leaving: LeaveMember) -> Records:
        if leaving.group_instance_id is None:
            if self._drop_pending(group, leaving.member_id):
                return self._maybe_complete_join(group)
            if leaving.member_id not in group.members:
                raise GroupError(ErrorCode.unknown_member_id)
            return self._remove_and_rebalance(group, leaving.member_id)
        current = group.static_member_id(leaving.group_instance_id)
        if current is None:
            raise GroupError(ErrorCode.unknown_member_id)
        if leaving.member_id and leaving.member_id != current:
            raise GroupError(ErrorCode.fenced_instance_id)
        return self._remove_and_rebalance(group, current)

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        self.context.timer.cancel(_heartbeat_key(group, member_id))
        member = group.remove(member_id)
        if member is not None:
            member.complete_join(JoinAnswer.failed(ErrorCode.unknown_member_id, member_id))
            member.complete_sync(SyncAnswer(ErrorCode.unknown_member_id))

    def _remove_and_rebalance(self, group: ClassicGroup, member_id: str) -> Records:
        self._remove_member(group, member_id)
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE):
            return self._prepare_rebalance(group, f"{member_id} left")
        if group.in_state(S.PREPARING_REBALANCE):
            return self._maybe_complete_join(group)
        return []


def _heartbeat_key(group: ClassicGroup, member_id: str) -> str:
    return f"classic-heartbeat:{group.group_id}:{member_id}"


def _pending_key(group: ClassicGroup, member_id: str) -> str:
    return f"classic-pending:{group.group_id}:{member_id}"


def _join_key(group: ClassicGroup) -> str:
    return f"classic-join:{group.group_id}"


def _sync_key(group: ClassicGroup) -> str:
    return f"classic-sync:{group.group_id}"


def _rebalance_key(group: ClassicGroup) -> str:
    return f"classic-rebalance:{group.group_id}"


def _raise_if_dead(group: ClassicGroup) -> None:
    """A dead group (deleted while its members still thought themselves members) answers
    COORDINATOR_NOT_AVAILABLE: the client finds the coordinator, and the group, again."""
    if group.in_state(S.DEAD):
        raise GroupError(ErrorCode.coordinator_not_available, f"group {group.group_id} is dead")
