"""ControlledShutdown (API 7, v3): a broker about to stop asks the controller to move what it holds.

Kafka's ``KafkaController.doControlledShutdown``, decided as one controller event:

1. The sender must be a live broker (BROKER_NOT_AVAILABLE otherwise) and the request must carry
   its current broker epoch (STALE_BROKER_EPOCH otherwise: an earlier incarnation asks). Stricter
   than Kafka, which takes -1 ("unknown", pre-KIP-380 brokers) and any epoch above the one it
   knows: both ends are Odradek's, and a broker that registered again while the controller had
   not seen it yet simply retries (``broker.controlled_shutdown``).
2. The broker is recorded as shutting down (``ClusterModel.shutting_down``): from now on no
   election makes it a leader and no ISR change adds it, until it deregisters or registers again
   with a new epoch.
3. The partitions it holds that have other replicas, a leader and ISR, and are not being deleted:
   - those it leads get a new leader from their ISR minus the shutting-down brokers (the
     partition state machine's ``CONTROLLED_SHUTDOWN`` strategy: LeaderAndIsr to the replicas,
     this broker included, so it turns follower at once; UpdateMetadata to every broker);
   - those it follows: StopReplica without delete to it (it stops fetching; the log stays), and
     the replica goes Offline (it leaves the ISR with a conditional, controller-epoch-fenced
     write; LeaderAndIsr to the other replicas, UpdateMetadata to every broker).
4. The answer lists the partitions with other replicas that it still leads
   (``remaining_partitions``, Kafka's ``partitionLeadersOnBroker``): empty, it may stop. A
   partition stays when no other replica is in its ISR or every one is shutting down too; such a
   partition is logged by name as a warning and counted (``controlled_shutdown_unmoved_partitions``)
   at every attempt, never dropped silently. Single-replica partitions are not listed, as in Kafka
   (nothing can take them over, and waiting does not change that); they are logged, as they will
   be offline until the broker is back.

Pure rules over the model plus the state machines' transitions, on domain values (the request is
decoded and the answer encoded by ``handlers.controlled_shutdown``); runs on the controller's
event loop only, inside the event ``Controller.controlled_shutdown`` queues.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from odradek.common.partitions import TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel
from odradek.controller.partition_state_machine import ElectionStrategy, PartitionStateMachine
from odradek.controller.refused import Refused
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.errors import ErrorCode
from odradek.observability.metrics import ControllerMetrics

log = logging.getLogger(__name__)

NAMES_LOGGED_MAX = 50  # partition names per log line; the count is always complete


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one ControlledShutdown decided, for the answer and the log."""

    moved: list[TopicPartition]  # led before, led by another replica now
    left_isr: list[TopicPartition]  # followed, stopped and out of the ISR now
    remaining: list[TopicPartition]  # still led by the broker: it should not stop yet
    single_replica: list[TopicPartition]  # led, no other replica: offline while it is away


def check_broker(model: ClusterModel, broker_id: int, broker_epoch: int) -> ErrorCode:
    """BROKER_NOT_AVAILABLE for a broker that is not registered; STALE_BROKER_EPOCH unless the
    request carries the epoch of its live registration."""
    if broker_id not in model.brokers:
        return ErrorCode.broker_not_available
    if model.broker_epochs.get(broker_id) != broker_epoch:
        return ErrorCode.stale_broker_epoch
    return ErrorCode.none


def _acted_on(model: ClusterModel, tp: TopicPartition) -> bool:
    """Kafka's ``partitionsToActOn``: other replicas, a leader and ISR, not being deleted."""
    return len(model.replicas(tp)) > 1 and tp in model.states and tp[0] not in model.deleting


def remaining_partitions(model: ClusterModel, broker_id: int) -> list[TopicPartition]:
    """The partitions with other replicas that ``broker_id`` still leads (the answer)."""
    return sorted(
        tp
        for tp in model.partitions_led_by(broker_id)
        if tp[0] in model.topics and _acted_on(model, tp)
    )


async def shut_down(
    model: ClusterModel,
    broker_id: int,
    partition_machine: PartitionStateMachine,
    replica_machine: ReplicaStateMachine,
    batch: RequestBatch,
) -> Outcome:
    """Steps 2 and 3 of the module docstring for a broker ``check_broker`` accepted."""
    model.shutting_down.add(broker_id)
    held = [tp for tp in model.partitions_on(broker_id) if tp in model.states]
    led = [tp for tp in held if model.states[tp].leader == broker_id]
    acted = [tp for tp in held if _acted_on(model, tp)]
    to_move = [tp for tp in acted if tp in led]
    followed = [tp for tp in acted if tp not in led]
    moved = await partition_machine.to_online(
        model, to_move, batch, strategy=ElectionStrategy.CONTROLLED_SHUTDOWN
    )
    for tp in followed:
        batch.add_stop_replica(broker_id, tp, delete=False)
    left = await replica_machine.to_offline(model, [(tp, broker_id) for tp in followed], batch)
    return Outcome(
        moved=moved,
        left_isr=[tp for tp, _ in left],
        remaining=remaining_partitions(model, broker_id),
        single_replica=sorted(
            tp for tp in led if len(model.replicas(tp)) == 1 and tp[0] not in model.deleting
        ),
    )


def names(partitions: list[TopicPartition]) -> str:
    """``topic-0, topic-1, ...`` for a log line, at most ``NAMES_LOGGED_MAX`` of them."""
    shown = ", ".join(f"{t}-{p}" for t, p in partitions[:NAMES_LOGGED_MAX])
    more = len(partitions) - NAMES_LOGGED_MAX
    return f"{shown} and {more} more" if more > 0 else shown


def report(
    broker_id: int, outcome: Outcome, model: ClusterModel, metrics: ControllerMetrics | None
) -> None:
    """Log what was decided; warn about, and count, every partition that could not move."""
    log.info(
        "controlled shutdown of broker %d: %d leaderships moved, left %d ISRs, %d partitions "
        "remain led by it",
        broker_id,
        len(outcome.moved),
        len(outcome.left_isr),
        len(outcome.remaining),
    )
    if outcome.remaining:
        log.warning(
            "controlled shutdown of broker %d: %d partitions cannot move (no other in-sync "
            "replica that is not shutting down): %s",
            broker_id,
            len(outcome.remaining),
            "; ".join(
                f"{t}-{p} (ISR {list(model.states[(t, p)].isr)})"
                for t, p in outcome.remaining[:NAMES_LOGGED_MAX]
            ),
        )
    if outcome.single_replica:
        log.warning(
            "controlled shutdown of broker %d: %d single-replica partitions will be offline "
            "until it is back: %s",
            broker_id,
            len(outcome.single_replica),
            names(outcome.single_replica),
        )
    if metrics is not None:
        metrics.controlled_shutdowns.inc()
        metrics.controlled_shutdown_unmoved_partitions.inc(len(outcome.remaining))


async def decide(
    model: ClusterModel,
    broker_id: int,
    broker_epoch: int,
    partition_machine: PartitionStateMachine,
    replica_machine: ReplicaStateMachine,
    batch: RequestBatch,
    metrics: ControllerMetrics | None,
) -> list[TopicPartition] | Refused:
    """The whole request: the checks, the moves, and the partitions it still leads (the
    answer); the caller sends ``batch``."""
    error = check_broker(model, broker_id, broker_epoch)
    if error is not ErrorCode.none:
        log.info(
            "refusing ControlledShutdown from broker %d with broker epoch %d (live epoch %s): %s",
            broker_id,
            broker_epoch,
            model.broker_epochs.get(broker_id),
            error.name,
        )
        return Refused(error)
    log.info("broker %d is shutting down (broker epoch %d)", broker_id, broker_epoch)
    outcome = await shut_down(model, broker_id, partition_machine, replica_machine, batch)
    report(broker_id, outcome, model, metrics)
    return outcome.remaining
