"""Leader balance: leadership back to preferred replicas, automatically and on demand.

A partition's preferred replica is the first of its assignment; placement spreads those evenly,
so when every partition is led by its preferred replica, leadership (and the produce and fetch
load it brings) is balanced. Failures move leadership away (a broker stops: its partitions get
other leaders) and nothing moves it back, so the controller does, as Kafka's does:

- **Imbalance** (``imbalance``): per broker, the partitions whose preferred replica it is, and
  those of them led by another broker. Topics being deleted are left out, and a partition without
  a leader and ISR yet counts as preferred there but not as led elsewhere (Kafka's
  ``checkAndTriggerAutoLeaderRebalance``). ``imbalance_count`` is Kafka's
  ``PreferredReplicaImbalanceCount``: the partitions (not being deleted) led by another replica.
- **Automatic** (``rebalance_candidates``): every ``leader.imbalance.check.interval.seconds`` the
  controller (its ``check_leader_balance`` event) takes each broker whose share of preferred
  partitions led elsewhere is above ``leader.imbalance.per.broker.percentage`` percent, and elects
  the preferred replica of each of those partitions that it can lead (live and in the ISR),
  skipping partitions being reassigned (``being_reassigned``: a reassignment moves leadership
  itself) and topics being deleted. Brokers at or under the percentage are left alone.
- **On demand** (``elect``, for ElectLeaders): PREFERRED elects the preferred replica where it
  is live and in the ISR; UNCLEAN elects a leader for a partition that has no live one, from the
  live ISR if it can, else any live replica (records only the ISR had may be lost: logged and
  counted as an unclean election), whatever the topic's ``unclean.leader.election.enable``.

Each partition gets its own outcome, with Kafka's errors: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_TOPIC_EXCEPTION (its topic is being deleted), ELECTION_NOT_NEEDED (PREFERRED: the
preferred replica leads already; UNCLEAN: a live replica leads), PREFERRED_LEADER_NOT_AVAILABLE
(the preferred replica is not live or not in the ISR), ELIGIBLE_LEADERS_NOT_AVAILABLE (no live
replica to elect). A state znode written behind the controller's back is read again and the
election retried once (Kafka retries after a ZooKeeper BadVersion).

The elections themselves are the partition state machine's (``ElectionStrategy.PREFERRED`` and
``UNCLEAN``); this module chooses which partitions and reports. Called from the controller's
event loop only, inside one event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.cluster.election import ELECTED, ElectionType, Outcome
from odradek.cluster.placement import elect_preferred_leader
from odradek.common.partitions import NO_LEADER, TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel
from odradek.controller.partition_state_machine import ElectionStrategy, PartitionStateMachine
from odradek.controller.ports import StaleStateVersionError, reload_state
from odradek.controller.states import PartitionState
from odradek.errors import ErrorCode
from odradek.time_slices import sliced

log = logging.getLogger(__name__)

BeingReassigned = Callable[[TopicPartition], bool]
STALE_STATE_RETRIES = 1  # a state written behind our back: read it again, try once more

_STRATEGY = {
    ElectionType.PREFERRED: ElectionStrategy.PREFERRED,
    ElectionType.UNCLEAN: ElectionStrategy.UNCLEAN,
}
_NOT_ELECTED = {
    ElectionType.PREFERRED: ErrorCode.preferred_leader_not_available,
    ElectionType.UNCLEAN: ErrorCode.eligible_leaders_not_available,
}


def never_reassigned(tp: TopicPartition) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class BrokerImbalance:
    """One broker as a preferred replica: how many partitions prefer it, which are led elsewhere."""

    broker_id: int
    preferred: int
    led_elsewhere: tuple[TopicPartition, ...]

    def above(self, percentage: int) -> bool:
        """Kafka's ``imbalanceRatio > percentage / 100``, in integers."""
        return len(self.led_elsewhere) * 100 > percentage * self.preferred


def preferred_replica(model: ClusterModel, tp: TopicPartition) -> int | None:
    replicas = model.replicas(tp)
    return replicas[0] if replicas else None


def imbalance(model: ClusterModel) -> dict[int, BrokerImbalance]:
    """Each preferred replica's broker -> its imbalance (see the module docstring)."""
    preferred: dict[int, int] = {}
    elsewhere: dict[int, list[TopicPartition]] = {}
    for tp in model.partitions():
        broker_id = preferred_replica(model, tp)
        if broker_id is None or tp[0] in model.deleting:
            continue
        preferred[broker_id] = preferred.get(broker_id, 0) + 1
        state = model.states.get(tp)
        if state is not None and state.leader != broker_id:
            elsewhere.setdefault(broker_id, []).append(tp)
    return {
        broker_id: BrokerImbalance(broker_id, count, tuple(elsewhere.get(broker_id, ())))
        for broker_id, count in sorted(preferred.items())
    }


def imbalance_count(model: ClusterModel) -> int:
    """Kafka's ``PreferredReplicaImbalanceCount``."""
    return sum(len(b.led_elsewhere) for b in imbalance(model).values())


def can_preferred_lead(model: ClusterModel, tp: TopicPartition) -> bool:
    """Whether the preferred replica is live and in the ISR (Kafka's
    ``canPreferredReplicaBeLeader``)."""
    state = model.states.get(tp)
    if state is None:
        return False
    election = elect_preferred_leader(list(model.replicas(tp)), list(state.isr), model.brokers)
    return election.leader is not None


def rebalance_candidates(
    model: ClusterModel, percentage: int, being_reassigned: BeingReassigned = never_reassigned
) -> list[TopicPartition]:
    """The partitions an automatic rebalance elects the preferred replica of, now."""
    candidates = []
    for broker in imbalance(model).values():
        if not broker.above(percentage):
            continue
        log.info(
            "broker %d leads %d of the %d partitions it is preferred for (above %d%%)",
            broker.broker_id,
            broker.preferred - len(broker.led_elsewhere),
            broker.preferred,
            percentage,
        )
        candidates.extend(
            tp
            for tp in broker.led_elsewhere
            if not being_reassigned(tp) and can_preferred_lead(model, tp)
        )
    return candidates


async def elect(
    model: ClusterModel,
    machine: PartitionStateMachine,
    partitions: Iterable[TopicPartition] | None,
    election_type: ElectionType,
    batch: RequestBatch,
) -> dict[TopicPartition, Outcome]:
    """Elect leaders of ``partitions`` (None: every partition); each partition's outcome."""
    if partitions is None:
        wanted = [tp for tp in model.partitions() if tp[0] not in model.deleting]
    else:
        wanted = list(partitions)
    outcomes: dict[TopicPartition, Outcome] = {}
    async for tp in sliced(wanted):  # a request may name 250,000: the loop runs meanwhile
        refused = _refusal(model, tp, election_type)
        outcomes[tp] = (
            refused
            if refused is not None
            else await _elect_one(model, machine, tp, election_type, batch)
        )
    elected = [tp for tp, outcome in outcomes.items() if outcome.error is ErrorCode.none]
    if elected:
        log.info(
            "%s leader election: new leaders for %s",
            election_type.name.lower(),
            ", ".join(f"{t}-{p} ({model.states[(t, p)].leader})" for t, p in elected),
        )
    return outcomes


def _refusal(
    model: ClusterModel, tp: TopicPartition, election_type: ElectionType
) -> Outcome | None:
    topic, partition = tp
    assignment = model.topics.get(topic)
    if (
        assignment is None
        or partition not in assignment.partitions
        or model.partition_states.get(tp) is PartitionState.NON_EXISTENT
    ):
        return Outcome(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    if topic in model.deleting:
        return Outcome(ErrorCode.invalid_topic_exception, "The topic is being deleted")
    state = model.states.get(tp)
    leader = NO_LEADER if state is None else state.leader
    if election_type is ElectionType.PREFERRED:
        if leader == preferred_replica(model, tp):
            return Outcome(ErrorCode.election_not_needed)
        if not can_preferred_lead(model, tp):
            return Outcome(
                ErrorCode.preferred_leader_not_available,
                f"Preferred replica {preferred_replica(model, tp)} of {topic}-{partition} is "
                f"not live and in the ISR {list(state.isr) if state else []}",
            )
    elif leader != NO_LEADER and leader in model.brokers:
        return Outcome(ErrorCode.election_not_needed)
    return None


async def _elect_one(
    model: ClusterModel,
    machine: PartitionStateMachine,
    tp: TopicPartition,
    election_type: ElectionType,
    batch: RequestBatch,
) -> Outcome:
    for attempt in range(STALE_STATE_RETRIES + 1):
        try:
            if await machine.to_online(model, [tp], batch, strategy=_STRATEGY[election_type]):
                return ELECTED
            break
        except StaleStateVersionError as e:
            log.warning("%s election for %s-%d: %s; reading it again", election_type.name, *tp, e)
            await reload_state(machine.store, model, tp)
            if attempt == STALE_STATE_RETRIES:
                return Outcome(
                    _NOT_ELECTED[election_type],
                    f"The state of {tp[0]}-{tp[1]} changed while electing; try again",
                )
    if election_type is ElectionType.PREFERRED:
        return Outcome(ErrorCode.preferred_leader_not_available)
    return Outcome(
        ErrorCode.eligible_leaders_not_available,
        f"No live replica of {tp[0]}-{tp[1]} can lead",
    )
