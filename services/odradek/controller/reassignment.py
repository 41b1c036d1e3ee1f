"""Partition reassignment (KIP-455), as Kafka's controller does it (``onPartitionReassignment``).

Names, as Kafka's: ORS the original replicas, TRS the target ones, RS = TRS followed by the rest
of ORS (the full set while moving), AR = RS - ORS (adding), RR = RS - TRS (removing). The
assignment znode ``/brokers/topics/<topic>`` holds RS with ``adding_replicas`` and
``removing_replicas``: it is the only place ORS is kept, so it is written before anything else
is done and rewritten to TRS last, and a controller elected in the middle resumes from it.

One reassignment step (``reassign``), whatever started it (AlterPartitionReassignments, an ISR
change, a broker coming back, a controller elected):

- U. The new assignment goes to ZooKeeper and the model (``Store.write_assignment``); replicas
  of the previous RS that the new one lacks (the AR of a replaced or cancelled reassignment) are
  stopped: Offline (out of the ISR) -> DeletionStarted (StopReplica with delete) -> NonExistent.
  If the leader was one of them, the first replica of the new RS live and in the ISR leads.
- A, while TRS is not all in the ISR: the leader epoch is bumped (same leader and ISR) and
  LeaderAndIsr with RS goes to RS: the leader tracks the new replicas as followers; AR replicas
  that do not exist yet -> New, with LeaderAndIsr ``is_new``: they create their log and fetch.
- B, once every TRS replica is in the ISR (and one of them is live): AR -> Online; RS = TRS in
  the model; a leader outside TRS or dead is replaced by the first TRS replica that is live and
  in the ISR (Kafka's reassignment election; the ISR is kept), else the leader epoch is bumped
  so the leader learns RS = TRS; RR -> Offline (out of the ISR) -> DeletionStarted (StopReplica
  with delete) -> NonExistent; the znode gets TRS, nothing adding or removing; UpdateMetadata
  of the partition to every live broker.

A step is idempotent: a controller that died anywhere in it leaves a znode from which the next
one redoes what is missing. Unlike Kafka, B waits while no TRS replica is live (Kafka would
remove RR and leave the partition without a leader); the ISR rule alone decides otherwise.

``decide`` is the AlterPartitionReassignments check of one partition (Kafka's
``validateReplicas`` and ``maybeBuildReassignment``): a pure function of the model. Then, before
anything is written, the replicas a reassignment adds must fit in each target broker's replica
budget (``replica_room``: the budget each broker registers, from its open-files limit, less the
replicas assigned to it, those granted earlier in the same request included): a broker past it
could not open their logs. One that does not fit is INVALID_REPLICA_ASSIGNMENT, as Kafka refuses
a target a broker cannot take (a dead one), with the broker's figures and max.broker.partitions
in the message; ``odradek reassign``, drain and rebalance send the same request. A cancel
(``replicas`` null) is a reassignment to ORS. ``list_reassignments`` answers
ListPartitionReassignments. Requests and answers are domain values here; their wire forms are
``handlers.alter_partition_reassignments``' and ``handlers.list_partition_reassignments``'.
Everything here runs on the controller's event loop, inside one event.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.common.partitions import TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel, ReplicaAssignment, with_assignments
from odradek.controller.ports import FencedError, StaleStateVersionError, Store, reload_state
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.states import PartitionState, ReplicaState
from odradek.errors import ErrorCode
from odradek.observability.metrics import ControllerMetrics
from odradek.observability.refusals import RefusalLog
from odradek.replica_room import ReplicaRoom
from odradek.time_slices import TimeSlices, sliced
from odradek.zk.paths import PartitionState as LeaderAndIsr

log = logging.getLogger(__name__)

LEADER_EPOCH_WRITE_ATTEMPTS_MAX = 3  # a stale state znode is read again, this many times at most

Target = tuple[int, ...] | None  # a partition's target replicas; None cancels its reassignment
Result = tuple[TopicPartition, ErrorCode, str | None]  # one partition's answer


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one partition of an AlterPartitionReassignments request is refused."""

    error: ErrorCode
    message: str


def decide(
    model: ClusterModel,
    tp: TopicPartition,
    target: tuple[int, ...] | None,
    *,
    deleting: Iterable[str] = (),
    allow_replication_factor_change: bool = True,
) -> ReplicaAssignment | Refusal:
    """The assignment that reassigning ``tp`` to ``target`` (None: cancel) leads to, or why not."""
    topic, partition = tp
    if topic not in model.topics or partition not in model.topics[topic].partitions:
        return Refusal(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    if topic in model.deleting or topic in set(deleting):
        return Refusal(
            ErrorCode.unknown_topic_or_partition, f"The topic {topic!r} is being deleted."
        )
    current = model.assignment(tp)
    if target is None:
        if not current.is_reassigning:
            return Refusal(
                ErrorCode.no_reassignment_in_progress,
                f"No reassignment of {topic}-{partition} is in progress.",
            )
        target = current.origin
    else:
        refused = _check_target(model, current, target)
        if refused is not None:
            return refused
        if not allow_replication_factor_change and len(target) != len(current.origin):
            return Refusal(
                ErrorCode.invalid_replication_factor,
                f"The replication factor would change from {len(current.origin)} to "
                f"{len(target)}, and allow_replication_factor_change is false.",
            )
    if tp not in model.states:
        return Refusal(
            ErrorCode.leader_not_available,
            f"{topic}-{partition} has no leader and ISR yet: none of its replicas ever ran.",
        )
    return current.reassign_to(target)


def _check_target(
    model: ClusterModel, current: ReplicaAssignment, target: tuple[int, ...]
) -> Refusal | None:
    if not target:
        return Refusal(
            ErrorCode.invalid_replica_assignment,
            "Empty replica list specified in partition reassignment.",
        )
    if len(set(target)) != len(target):
        return Refusal(
            ErrorCode.invalid_replica_assignment,
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
        )
    if any(r < 0 for r in target):
        return Refusal(
            ErrorCode.invalid_replica_assignment, f"Invalid broker id in replica list: {target}"
        )
    adding = current.reassign_to(target).adding
    dead = [r for r in adding if r not in model.brokers]
    if dead:
        return Refusal(
            ErrorCode.invalid_replica_assignment,
            f"Replica assignment has brokers that are not alive: {dead}; live brokers: "
            f"{sorted(model.brokers)}",
        )
    return None


async def replica_room(model: ClusterModel, slices: TimeSlices | None = None) -> ReplicaRoom:
    """Each live broker's budget (as it registered it) and the replicas assigned to it now:
    every partition's full replica set, those moving included (see the module docstring)."""
    hosted: Counter[int] = Counter()
    async for topic in sliced(model.topics.values(), slices):
        for replicas in topic.partitions.values():
            hosted.update(replicas)
    budgets = {b: info.max_broker_partitions for b, info in model.brokers.items()}
    return ReplicaRoom(budgets, hosted)


def _fits(
    room: ReplicaRoom, tp: TopicPartition, current: ReplicaAssignment, new: ReplicaAssignment
) -> ReplicaAssignment | Refusal:
    """``new`` if the replicas it adds to ``current`` fit in their brokers' budgets (then they
    are counted in ``room``), else why not; a cancel adds none."""
    added = [b for b in new.replicas if b not in current.replicas]
    for broker_id in added:
        remaining = room.remaining(broker_id)
        if remaining is not None and remaining < 1:
            return Refusal(
                ErrorCode.invalid_replica_assignment,
                f"Broker {broker_id} cannot host a replica of {tp[0]}-{tp[1]}: it is at its "
                f"replica budget ({room.describe()}); each broker's budget comes from its "
                f"open-files limit (max.broker.partitions).",
            )
    room.add_replicas(added)
    return new


async def list_reassignments(
    model: ClusterModel,
    named: Iterable[tuple[str, Iterable[int]]] | None,
    slices: TimeSlices | None = None,
) -> list[tuple[TopicPartition, ReplicaAssignment]]:
    """ListPartitionReassignments: every partition being reassigned (``named`` None), or those
    of ``named`` (topic, partition indexes) that are, each once, with its assignment. Looked up
    in time slices (``time_slices``): a request may name millions of partitions, and this runs
    on the loop that elects leaders."""
    slices = slices if slices is not None else TimeSlices()
    chosen: dict[TopicPartition, None] = {}
    if named is None:
        chosen = dict.fromkeys(model.reassigning_partitions())
    else:
        async for name, indexes in sliced(named, slices):
            if name not in model.topics:  # unknown, or empty: nothing of it is moving
                continue
            async for index in sliced(indexes, slices):
                tp = (name, int(index))
                if model.is_reassigning(tp):
                    chosen[tp] = None
    return [(tp, model.assignment(tp)) async for tp in sliced(chosen, slices)]


def is_complete(model: ClusterModel, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
    """Phase B may run: nothing to move, or every TRS replica in the ISR and one of them live."""
    if not assignment.is_reassigning:
        return True
    state = model.states.get(tp)
    if state is None:
        return False
    target = assignment.target
    return set(target) <= set(state.isr) and any(r in model.brokers for r in target)


def elect_reassignment_leader(
    target: Iterable[int], isr: Iterable[int], live_brokers: Iterable[int]
) -> int | None:
    """Kafka's ReassignPartitionLeaderElectionStrategy: the first TRS replica live and in ISR."""
    in_sync, live = set(isr), set(live_brokers)
    return next((r for r in target if r in live and r in in_sync), None)


class Reassignments:
    """The steps of a reassignment (see the module docstring), on the controller's model."""

    def __init__(
        self,
        store: Store,
        replica_machine: ReplicaStateMachine,
        metrics: ControllerMetrics | None = None,
    ):
        self.store = store
        self.replica_machine = replica_machine
        self.metrics = metrics

    async def alter(
        self,
        model: ClusterModel,
        wanted: list[tuple[TopicPartition, Target]],
        batch: RequestBatch,
        *,
        deleting: Iterable[str] = (),
        allow_replication_factor_change: bool = True,
    ) -> list[Result]:
        """AlterPartitionReassignments: each partition decided, then its first step taken.

        A partition named twice is refused (both entries); a step that fails (a bug, ZooKeeper)
        answers UNKNOWN_SERVER_ERROR for its partition only, as Kafka's controller does."""
        slices = TimeSlices()  # a request may name millions: the loop elects leaders meanwhile
        counts: dict[TopicPartition, int] = {}
        async for tp, _ in sliced(wanted, slices):
            counts[tp] = counts.get(tp, 0) + 1
        deleting = set(deleting)
        room = await replica_room(model, slices)
        refusals = RefusalLog(log, "reassignment of")  # 1 MB names 166,000 partitions
        results: list[Result] = []
        async for tp, target in sliced(wanted, slices):
            if counts[tp] > 1:
                results.append((tp, ErrorCode.invalid_request, "The partition is named twice."))
                continue
            decided = decide(
                model,
                tp,
                target,
                deleting=deleting,
                allow_replication_factor_change=allow_replication_factor_change,
            )
            if not isinstance(decided, Refusal):
                decided = _fits(room, tp, model.assignment(tp), decided)
            if isinstance(decided, Refusal):
                refusals.refused(f"{tp[0]}-{tp[1]}", decided.error, decided.message)
                results.append((tp, decided.error, decided.message))
                continue
            try:
                await self.reassign(model, tp, decided, batch, cancel=target is None)
            except FencedError:
                raise
            except Exception as e:
                log.exception("reassignment of %s-%d failed", *tp)
                results.append((tp, ErrorCode.unknown_server_error, str(e) or type(e).__name__))
                continue
            results.append((tp, ErrorCode.none, None))
        refusals.close()
        return results

    async def reassign(
        self,
        model: ClusterModel,
        tp: TopicPartition,
        new: ReplicaAssignment,
        batch: RequestBatch,
        *,
        cancel: bool = False,
    ) -> None:
        """One step towards ``new`` (Kafka's ``onPartitionReassignment``)."""
        current = model.assignment(tp)
        if current != new:
            log.info(
                "%s %s-%d: replicas %s, adding %s, removing %s (was %s)",
                "cancelling the reassignment of" if cancel else "reassigning",
                *tp,
                list(new.replicas),
                list(new.adding),
                list(new.removing),
                list(current.replicas),
            )
            await self.store.write_assignment(model, tp[0], {tp[1]: new})
            unneeded = [r for r in current.replicas if r not in new.replicas]
            await self._stop_replicas(model, tp, unneeded, batch)
            if model.states[tp].leader not in model.brokers:
                # The leader was one of them (an added replica that had taken over): a leader
                # from what remains, before anything else is sent (Kafka would leave none).
                await self._elect_from_target(model, tp, new.replicas, batch)
        if not is_complete(model, tp, new):
            await self._bump_leader_epoch(model, tp, batch)
            self._start_new_replicas(model, tp, new.adding, batch)
            return
        await self._complete(model, tp, new, batch)
        if self.metrics is not None:
            if cancel:
                if current.is_reassigning:
                    self.metrics.reassignments_cancelled.inc()
            elif new.is_reassigning:
                self.metrics.reassignments_completed.inc()

    async def resume(self, model: ClusterModel, tp: TopicPartition, batch: RequestBatch) -> None:
        """Take up where the znode says (a controller elected, a TRS broker back)."""
        await self.reassign(model, tp, model.assignment(tp), batch)

    async def maybe_complete(
        self, model: ClusterModel, tp: TopicPartition, batch: RequestBatch
    ) -> bool:
        """After an ISR change: finish ``tp``'s reassignment if TRS is in sync now."""
        if not model.is_reassigning(tp):
            return False
        assignment = model.assignment(tp)
        if not is_complete(model, tp, assignment):
            return False
        await self.reassign(model, tp, assignment, batch)
        return True

    # -- the phases ----------------------------------------------------------------------

    def _start_new_replicas(
        self, model: ClusterModel, tp: TopicPartition, adding: Iterable[int], batch: RequestBatch
    ) -> None:
        """A2: AR replicas that do not exist yet -> New; they hear of it as new replicas."""
        fresh = [
            (tp, r)
            for r in adding
            if model.replica_states.get((tp, r)) is ReplicaState.NON_EXISTENT
        ]
        for _, broker_id in ReplicaStateMachine.move(model, fresh, ReplicaState.NEW):
            batch.add_leader_and_isr([broker_id], tp, new=True)

    async def _complete(
        self, model: ClusterModel, tp: TopicPartition, new: ReplicaAssignment, batch: RequestBatch
    ) -> None:
        target = new.target
        # B1: the added replicas are Online (New -> Online sends nothing more).
        ReplicaStateMachine.to_online(
            model,
            [
                (tp, r)
                for r in new.adding
                if model.replica_states.get((tp, r)) is not ReplicaState.ONLINE
            ],
            batch,
        )
        # B2: RS = TRS in memory, so every request from here on carries it.
        done = ReplicaAssignment(target)
        model.topics[tp[0]] = with_assignments(model.topics[tp[0]], {tp[1]: done})
        # B3: a leader from TRS.
        state = model.states[tp]
        if state.leader not in target or state.leader not in model.brokers:
            await self._elect_from_target(model, tp, target, batch)
        else:
            await self._bump_leader_epoch(model, tp, batch)
        # B4, B5: the removed replicas leave the ISR and their logs are deleted.
        await self._stop_replicas(model, tp, list(new.removing), batch)
        # B6: ZooKeeper last: until here it still holds ORS, from which a successor resumes.
        await self.store.write_assignment(model, tp[0], {tp[1]: done})
        # B8: every broker's metadata.
        batch.add_update_metadata(model.brokers, [tp])
        log.info(
            "reassignment of %s-%d done: replicas %s, leader %d, ISR %s",
            *tp,
            list(target),
            model.states[tp].leader,
            list(model.states[tp].isr),
        )

    async def _stop_replicas(
        self, model: ClusterModel, tp: TopicPartition, brokers: list[int], batch: RequestBatch
    ) -> None:
        """Replicas out of the assignment: Offline (out of the ISR) -> deleted -> NonExistent.

        A replica on a dead broker is forgotten the same way; its broker is not told (its log
        stays on disk: see docs/operations/reassign.md)."""
        if not brokers:
            return
        replicas = [(tp, r) for r in brokers]
        await self.replica_machine.to_offline(model, replicas, batch)
        started = ReplicaStateMachine.to_deletion_started(model, replicas, batch)
        ReplicaStateMachine.move(model, started, ReplicaState.DELETION_SUCCESSFUL)
        ReplicaStateMachine.move(model, started, ReplicaState.NON_EXISTENT)
        for replica in replicas:
            model.replica_states.forget(replica)

    async def _bump_leader_epoch(
        self, model: ClusterModel, tp: TopicPartition, batch: RequestBatch
    ) -> None:
        """Kafka's ``updateLeaderEpochAndSendRequest``: same leader and ISR, epoch + 1, so the
        replicas take the new replica set; LeaderAndIsr to every replica of RS."""
        for _ in range(LEADER_EPOCH_WRITE_ATTEMPTS_MAX):
            current = model.states[tp]
            bumped = LeaderAndIsr(
                leader=current.leader,
                leader_epoch=current.leader_epoch + 1,
                isr=current.isr,
                controller_epoch=model.epoch,
                leader_recovery_state=current.leader_recovery_state,
            )
            if await self._write_state(model, tp, bumped):
                batch.add_leader_and_isr(model.replicas(tp), tp)
                batch.add_update_metadata(model.brokers, [tp])
                return
        log.error("could not bump the leader epoch of %s-%d for its reassignment", *tp)

    async def _elect_from_target(
        self,
        model: ClusterModel,
        tp: TopicPartition,
        target: tuple[int, ...],
        batch: RequestBatch,
    ) -> None:
        for _ in range(LEADER_EPOCH_WRITE_ATTEMPTS_MAX):
            current = model.states[tp]
            leader = elect_reassignment_leader(
                target, current.isr, model.live_replicas(tp) & model.live_broker_ids
            )
            if leader is None:
                log.error(
                    "no replica of %s in the ISR %s of %s-%d is live: it keeps leader %d",
                    list(target),
                    list(current.isr),
                    *tp,
                    current.leader,
                )
                return
            elected = LeaderAndIsr(
                leader=leader,
                leader_epoch=current.leader_epoch + 1,
                isr=current.isr,
                controller_epoch=model.epoch,
                leader_recovery_state=current.leader_recovery_state,
            )
            if await self._write_state(model, tp, elected):
                log.info(
                    "%s-%d is reassigned: leader %d (was %d) from %s",
                    *tp,
                    leader,
                    current.leader,
                    list(target),
                )
                if model.partition_states.get(tp) is not PartitionState.ONLINE:
                    model.partition_states.put(tp, PartitionState.ONLINE)
                batch.add_leader_and_isr(model.replicas(tp), tp)
                batch.add_update_metadata(model.brokers, [tp])
                return
        log.error("could not elect a leader of %s-%d from %s", *tp, list(target))

    async def _write_state(
        self, model: ClusterModel, tp: TopicPartition, state: LeaderAndIsr
    ) -> bool:
        """A conditional write; on a stale version the state is read again and False returned."""
        try:
            await self.store.write_state(model, tp, state)
        except StaleStateVersionError as e:
            log.warning("reading %s-%d again: %s", *tp, e)
            await reload_state(self.store, model, tp)
            return False
        return True
