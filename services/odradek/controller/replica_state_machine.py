"""Kafka's ReplicaStateMachine: each replica (a partition on one broker) and its transitions.

Each transition is checked against the target's legal previous states (``states``); an illegal
one is logged and skipped. The transitions that do work:

- -> Online from anything but New: the broker (back, or a new incarnation) gets LeaderAndIsr for
  the partition, if the partition has a leader and ISR. (New -> Online sends nothing more: the
  partition's first LeaderAndIsr, with ``is_new``, was its creation's.)
- -> Offline: the replica leaves the ISR of its partition, as Kafka's ``removeReplicasFromIsr``:
  one conditional write per partition (fenced by the controller epoch, on the state znode's
  version), the leader epoch bumped by one, the leader -1 if it was this replica, and the ISR
  kept as it is when the replica is its last member (so the partition can come back cleanly
  when that replica does). The partition's other live replicas get LeaderAndIsr (the new leader
  epoch fences the old one's AlterPartition requests), every live broker UpdateMetadata. Not done
  for a topic being deleted.
- Offline -> DeletionStarted: StopReplica with ``delete_partition`` to the broker.
- DeletionStarted -> DeletionSuccessful -> NonExistent, and -> DeletionIneligible (the broker is
  dead): only the state.

Called from the controller's event loop only; ``to_offline`` pipelines its partitions' writes
(``pipelined``), one partition's replicas one after another.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from odradek.common.partitions import NO_LEADER, TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel, PartitionReplica
from odradek.controller.pipelined import for_each
from odradek.controller.ports import StaleStateVersionError, Store, reload_state
from odradek.controller.states import ReplicaState
from odradek.zk.paths import PartitionState as LeaderAndIsr

log = logging.getLogger(__name__)

ISR_REMOVAL_ATTEMPTS_MAX = 3  # a stale znode version is read again, this many times at most


class ReplicaStateMachine:
    def __init__(self, store: Store):
        self.store = store

    @staticmethod
    def replicas_on(model: ClusterModel, brokers: Iterable[int]) -> list[PartitionReplica]:
        wanted = set(brokers)
        return [
            (tp, broker_id)
            for tp in model.partitions()
            for broker_id in model.replicas(tp)
            if broker_id in wanted
        ]

    @staticmethod
    def replicas_of(model: ClusterModel, partitions: Iterable) -> list[PartitionReplica]:
        return [(tp, broker_id) for tp in partitions for broker_id in model.replicas(tp)]

    @staticmethod
    def initialise(model: ClusterModel) -> None:
        """Kafka's ``initializeReplicaState``: a replica on a live broker is Online; one on a
        dead broker DeletionIneligible (from there it may go Online or Offline)."""
        table = model.replica_states
        table.clear()
        for tp in model.partitions():
            for broker_id in model.replicas(tp):
                table.put((tp, broker_id), ReplicaState.NEW)
                if broker_id in model.brokers:
                    table.put((tp, broker_id), ReplicaState.ONLINE)
                else:
                    table.put((tp, broker_id), ReplicaState.OFFLINE)
                    table.put((tp, broker_id), ReplicaState.DELETION_INELIGIBLE)

    # -- transitions ---------------------------------------------------------------------

    @staticmethod
    def move(
        model: ClusterModel, replicas: Iterable[PartitionReplica], target: ReplicaState
    ) -> list[PartitionReplica]:
        """A transition that only changes the state (New, the deletion states, NonExistent)."""
        return model.replica_states.move(replicas, target)

    @staticmethod
    def to_online(
        model: ClusterModel, replicas: Iterable[PartitionReplica], batch: RequestBatch
    ) -> list[PartitionReplica]:
        moved = model.replica_states.legal(replicas, ReplicaState.ONLINE)
        for replica in moved:
            tp, broker_id = replica
            if model.replica_states.get(replica) is not ReplicaState.NEW and tp in model.states:
                batch.add_leader_and_isr([broker_id], tp)
            model.replica_states.put(replica, ReplicaState.ONLINE)
        return moved

    @staticmethod
    def to_deletion_started(
        model: ClusterModel, replicas: Iterable[PartitionReplica], batch: RequestBatch
    ) -> list[PartitionReplica]:
        moved = model.replica_states.legal(replicas, ReplicaState.DELETION_STARTED)
        for replica in moved:
            tp, broker_id = replica
            batch.add_stop_replica(broker_id, tp)
            model.replica_states.put(replica, ReplicaState.DELETION_STARTED)
        return moved

    async def to_offline(
        self, model: ClusterModel, replicas: Iterable[PartitionReplica], batch: RequestBatch
    ) -> list[PartitionReplica]:
        moved = model.replica_states.legal(replicas, ReplicaState.OFFLINE)
        # One step per partition (its replicas one after another, each write reading the
        # state the previous one left); the partitions' writes are pipelined.
        by_partition: dict[TopicPartition, list[PartitionReplica]] = {}
        for replica in moved:
            by_partition.setdefault(replica[0], []).append(replica)

        async def one(partition_replicas: list[PartitionReplica]) -> None:
            for replica in partition_replicas:
                if replica[0][0] not in model.deleting:
                    await self._remove_from_isr(model, replica, batch)
                model.replica_states.put(replica, ReplicaState.OFFLINE)

        await for_each(by_partition.values(), one)
        return moved

    async def _remove_from_isr(
        self, model: ClusterModel, replica: PartitionReplica, batch: RequestBatch
    ) -> None:
        tp, broker_id = replica
        for _ in range(ISR_REMOVAL_ATTEMPTS_MAX):
            current = model.states.get(tp)
            if current is None or broker_id not in current.isr:
                return
            isr = (
                current.isr
                if len(current.isr) == 1
                else tuple(r for r in current.isr if r != broker_id)
            )
            state = LeaderAndIsr(
                leader=NO_LEADER if current.leader == broker_id else current.leader,
                leader_epoch=current.leader_epoch + 1,
                isr=isr,
                controller_epoch=model.epoch,
                leader_recovery_state=current.leader_recovery_state,
            )
            try:
                await self.store.write_state(model, tp, state)
            except StaleStateVersionError as e:
                log.warning("reading %s-%d again: %s", *tp, e)
                if not await reload_state(self.store, model, tp):
                    return
                continue
            log.info(
                "replica %d of %s-%d is offline: leader %d, ISR %s, leader epoch %d",
                broker_id,
                *tp,
                state.leader,
                list(state.isr),
                state.leader_epoch,
            )
            batch.add_leader_and_isr([r for r in model.replicas(tp) if r != broker_id], tp)
            batch.add_update_metadata(model.brokers, [tp])
            return
        log.error("could not remove replica %d from the ISR of %s-%d", broker_id, *tp)
