"""Failed log dirs: the controller's side of Kafka's log dir event notification (ZooKeeper mode).

A broker whose log dir fails writes ``/log_dir_event_notification/log_dir_event_<seq>``
(``broker.log_dir_failure``). The controller, watching that path:

1. ``on_notifications`` (Kafka's ``processLogDirEventNotification`` and
   ``onBrokerLogDirFailure``): reads the notifications, moves every replica of each live
   notifying broker to Online again, which sends that broker LeaderAndIsr for all of them, and
   deletes the notifications. Also run when a controller is elected (pending ones).
2. ``on_leader_and_isr_response`` (Kafka's ``onLeaderAndIsrResponseReceived``), for every
   LeaderAndIsr answer, not only those: a partition answering KAFKA_STORAGE_ERROR is a replica on
   a failed dir, one answering NONE is a serving replica. The broker's set of offline replicas
   (``ClusterModel.offline_replicas``) becomes (previous - serving) | failed; for the replicas
   that are newly offline (``onReplicasBecomeOffline``): partitions they led go Offline, every
   Offline or New partition is elected a leader again (elections skip offline replicas:
   ``ClusterModel.live_replicas``), then the replicas go Offline (they leave the ISRs), and every
   live broker gets UpdateMetadata.
3. Beyond Kafka: each newly offline replica that is now out of its ISR is sent LeaderAndIsr once
   more. A broker still running with the failed dir answers KAFKA_STORAGE_ERROR again (nothing is
   newly offline, so this ends there). A broker that restarted without the dir (skipped, or taken
   out of ``log.dirs``) creates the replica empty on a healthy dir, since it is out of the ISR
   (``broker.controller_requests``), and it catches up from the leader; its NONE answer makes it
   a serving replica again, so the leader may add it back to the ISR.

A broker that registers again (a restart) starts with no offline replicas, as in Kafka.

Called from the controller's event loop only, inside controller events.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Protocol

from odradek.common.partitions import TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel
from odradek.controller.partition_state_machine import PartitionStateMachine
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.errors import ErrorCode
from odradek.zk.client import WatchCallback

log = logging.getLogger(__name__)


class LogDirEventStore(Protocol):
    """The notifications in ZooKeeper (``store.ControllerStore``, and the tests' double)."""

    async def log_dir_event_notifications(
        self, watch: WatchCallback | None
    ) -> list[tuple[str, int]]: ...

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None: ...


async def on_notifications(
    model: ClusterModel, store: LogDirEventStore, batch: RequestBatch, watch: WatchCallback | None
) -> set[int]:
    """Step 1 of the module docstring; returns the live brokers that were asked."""
    notifications = await store.log_dir_event_notifications(watch)
    if not notifications:
        return set()
    brokers = {broker_id for _, broker_id in notifications} & set(model.brokers)
    log.info(
        "log dir failure notified by brokers %s: asking them about their replicas",
        sorted({broker_id for _, broker_id in notifications}),
    )
    replicas = [
        r for r in ReplicaStateMachine.replicas_on(model, brokers) if r[0][0] not in model.deleting
    ]
    ReplicaStateMachine.to_online(model, replicas, batch)
    await store.delete_log_dir_event_notifications([name for name, _ in notifications])
    return brokers


PartitionError = tuple[uuid.UUID, int, int]  # topic id, partition index, its error code


def partition_errors(
    model: ClusterModel, answered: Iterable[PartitionError]
) -> dict[TopicPartition, ErrorCode]:
    """Each partition's error in a LeaderAndIsr answer (decoded by ``handlers.broker_responses``),
    its topic named by id: one this controller does not know is left out."""
    names = model.topic_id_names()
    errors = {}
    for topic_id, partition, error in answered:
        name = names.get(topic_id)
        if name is not None:
            errors[(name, partition)] = ErrorCode(error)
    return errors


async def on_leader_and_isr_response(
    model: ClusterModel,
    broker_id: int,
    errors: dict[TopicPartition, ErrorCode],
    partition_machine: PartitionStateMachine,
    replica_machine: ReplicaStateMachine,
    batch: RequestBatch,
) -> set[TopicPartition]:
    """Steps 2 and 3 of the module docstring; returns the newly offline replicas' partitions."""
    if broker_id not in model.brokers:
        return set()
    failed = {tp for tp, e in errors.items() if e is ErrorCode.kafka_storage_error}
    serving = {tp for tp, e in errors.items() if e is ErrorCode.none}
    previous = model.offline_replicas.get(broker_id, set())
    current = (previous - serving) | failed
    if current:
        model.offline_replicas[broker_id] = current
    else:
        model.offline_replicas.pop(broker_id, None)
    if previous - current:
        log.info("broker %d serves %s again", broker_id, sorted(previous - current))
    newly = {tp for tp in current - previous if tp in model.states and tp[0] not in model.deleting}
    if not newly:
        return set()
    log.warning("replicas of broker %d on a failed log dir: %s", broker_id, sorted(newly))
    led = [tp for tp in newly if model.states[tp].leader == broker_id]
    PartitionStateMachine.to_offline(model, led)
    await partition_machine.to_online(
        model, partition_machine.online_state_change_candidates(model), batch
    )
    await replica_machine.to_offline(model, [(tp, broker_id) for tp in sorted(newly)], batch)
    for tp in sorted(newly):
        if broker_id not in model.states[tp].isr:
            batch.add_leader_and_isr([broker_id], tp)
    batch.add_update_metadata(model.brokers, sorted(newly))
    return newly


def forget_brokers(model: ClusterModel, brokers: Iterable[int]) -> None:
    """Brokers that registered again start with every replica serving (Kafka's
    ``onBrokerStartup`` clears ``replicasOnOfflineDirs``)."""
    for broker_id in brokers:
        model.offline_replicas.pop(broker_id, None)
