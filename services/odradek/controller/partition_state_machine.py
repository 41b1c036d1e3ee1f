"""Kafka's PartitionStateMachine: partitions move between New, Online, Offline and NonExistent.

Each transition is checked against the target's legal previous states (``states``); an illegal
one is logged and skipped. The transitions that do work:

- New -> Online: the first leader and ISR. The leader is the first live replica of the
  assignment, the ISR every live replica, leader epoch 0; the state znode is created (fenced by
  the controller epoch). Its replicas get LeaderAndIsr with ``is_new`` (Kafka's NewReplica: they
  exist nowhere yet), every live broker UpdateMetadata. With no live replica the partition stays
  New (an error is logged) until a replica's broker arrives.
- Offline/Online -> Online, with an election strategy:
  ``OFFLINE`` (Kafka's OfflinePartitionLeaderElectionStrategy): the first live replica of the
  assignment that is in the ISR; the new ISR is the live part of the old one. If no ISR replica is
  live, a live replica outside the ISR is chosen only when ``unclean.leader.election.enable`` is
  true for the topic (its override in ``/config/topics``, else the controller's default), which
  is logged as a warning and counted (``unclean_leader_elections``): records the ISR had may be
  lost. Otherwise the partition stays (or becomes) Offline.
  ``UNCLEAN``: as ``OFFLINE``, but a live replica outside the ISR may be chosen whatever the
  topic says (an operator's ElectLeaders); logged and counted the same way.
  ``PREFERRED``: the first replica of the assignment, if it is live and in the ISR.
  ``CONTROLLED_SHUTDOWN`` (Kafka's ControlledShutdownPartitionLeaderElectionStrategy): the first
  replica of the assignment that is live, in the ISR and not shutting down; the ISR loses the
  shutting-down brokers. With no such replica the partition keeps its leader (it is still
  serving) and stays Online; ``controlled_shutdown`` reports it.
  Every new leader bumps the leader epoch by one; LeaderAndIsr goes to the live replicas,
  UpdateMetadata to every live broker.
- -> Offline, -> NonExistent: only the state (the writes are the replica state machine's and the
  deletion's).

Called from the controller's event loop only; one event's partitions are written several at a
time (``pipelined``), never one partition twice at once.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping

from odradek.cluster.placement import (
    elect_leader_for_controlled_shutdown,
    elect_leader_offline,
    elect_preferred_leader,
)
from odradek.common.partitions import TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel
from odradek.controller.pipelined import for_each
from odradek.controller.ports import Store
from odradek.controller.states import PartitionState
from odradek.observability.metrics import ControllerMetrics
from odradek.zk.paths import PartitionState as LeaderAndIsr

log = logging.getLogger(__name__)

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class ElectionStrategy(enum.Enum):
    OFFLINE = "offline"  # the leader died, or the partition had none
    PREFERRED = "preferred"  # leadership back to the first replica of the assignment
    # OFFLINE with unclean election allowed whatever the topic says: an operator asked for it
    # (ElectLeaders with election type UNCLEAN; Kafka's ``allowUnclean = AdminClientTriggered``).
    UNCLEAN = "unclean"
    CONTROLLED_SHUTDOWN = "controlled shutdown"  # off brokers about to stop


def unclean_enabled(topic_config: Mapping[str, str], default: bool) -> bool:
    """The topic's ``unclean.leader.election.enable`` override, else ``default``."""
    value = topic_config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    if value is None:
        return default
    return value.strip().lower() == "true"


class PartitionStateMachine:
    def __init__(
        self,
        store: Store,
        *,
        unclean_leader_election_enable: bool = False,
        metrics: ControllerMetrics | None = None,
    ):
        self.store = store
        self.unclean_leader_election_enable = unclean_leader_election_enable  # the default
        self.metrics = metrics

    # -- loading -------------------------------------------------------------------------

    @staticmethod
    def initialise(model: ClusterModel) -> None:
        """Each known partition's state from what ZooKeeper holds (Kafka's
        ``initializePartitionState``): no state znode: New; a live leader: Online; else Offline."""
        model.partition_states.clear()
        PartitionStateMachine.adopt(model, list(model.partitions()))

    @staticmethod
    def adopt(model: ClusterModel, partitions: Iterable[TopicPartition]) -> None:
        """NonExistent partitions enter the state their loaded leader and ISR say: New without
        one (it is initialised later), Online with a live leader, Offline otherwise."""
        for tp in model.partition_states.legal(partitions, PartitionState.NEW):
            model.partition_states.put(tp, PartitionState.NEW)
            state = model.states.get(tp)
            if state is not None:
                live = state.leader in model.brokers
                model.partition_states.put(
                    tp, PartitionState.ONLINE if live else PartitionState.OFFLINE
                )

    # -- transitions ---------------------------------------------------------------------

    @staticmethod
    def move(
        model: ClusterModel, partitions: Iterable[TopicPartition], target: PartitionState
    ) -> list[TopicPartition]:
        """A transition that only changes the state (as ``ReplicaStateMachine.move``)."""
        return model.partition_states.move(partitions, target)

    @staticmethod
    def to_offline(
        model: ClusterModel, partitions: Iterable[TopicPartition]
    ) -> list[TopicPartition]:
        return PartitionStateMachine.move(model, partitions, PartitionState.OFFLINE)

    @staticmethod
    def to_non_existent(
        model: ClusterModel, partitions: Iterable[TopicPartition]
    ) -> list[TopicPartition]:
        return PartitionStateMachine.move(model, partitions, PartitionState.NON_EXISTENT)

    async def to_online(
        self,
        model: ClusterModel,
        partitions: Iterable[TopicPartition],
        batch: RequestBatch,
        strategy: ElectionStrategy = ElectionStrategy.OFFLINE,
    ) -> list[TopicPartition]:
        """Give ``partitions`` a live leader; returns those whose leader or ISR was written.

        The partitions' writes are pipelined (``pipelined.for_each``): each partition's
        election and write is its own step, and records its own outcome."""
        legal = model.partition_states.legal(dict.fromkeys(partitions), PartitionState.ONLINE)

        async def one(tp: TopicPartition) -> bool:
            if model.partition_states.get(tp) is PartitionState.NEW:
                return await self._initialise_leader(model, tp, batch)
            return await self._elect(model, tp, batch, strategy)

        written = await for_each(legal, one)
        return [tp for tp, changed in zip(legal, written, strict=True) if changed]

    def online_state_change_candidates(self, model: ClusterModel) -> list[TopicPartition]:
        """Kafka's ``triggerOnlinePartitionStateChange``: every New and Offline partition of a
        topic not being deleted."""
        return [
            tp
            for tp in model.partition_states.keys_in(PartitionState.NEW, PartitionState.OFFLINE)
            if tp[0] not in model.deleting and tp[0] in model.topics
        ]

    # -- the work ------------------------------------------------------------------------

    async def _initialise_leader(
        self, model: ClusterModel, tp: TopicPartition, batch: RequestBatch
    ) -> bool:
        replicas = model.replicas(tp)
        eligible = model.live_broker_ids  # not a broker that is shutting down
        live = [r for r in replicas if r in eligible]
        if not live:
            log.error(
                "partition %s-%d stays New: none of its replicas %s is on a live broker",
                *tp,
                list(replicas),
            )
            return False
        state = LeaderAndIsr(
            leader=live[0], leader_epoch=0, isr=tuple(live), controller_epoch=model.epoch
        )
        await self.store.write_state(model, tp, state)
        model.partition_states.put(tp, PartitionState.ONLINE)
        batch.add_leader_and_isr(replicas, tp, new=True)
        batch.add_update_metadata(model.brokers, [tp])
        return True

    async def _elect(
        self,
        model: ClusterModel,
        tp: TopicPartition,
        batch: RequestBatch,
        strategy: ElectionStrategy,
    ) -> bool:
        current = model.states.get(tp)
        if current is None:  # Online/Offline always have a state; keep the table honest
            log.error("partition %s-%d has no leader and ISR to elect from", *tp)
            return False
        replicas = list(model.replicas(tp))
        # Eligible: a live broker, not shutting down, whose replica is not on a failed log dir.
        live = model.live_replicas(tp) & model.live_broker_ids
        if strategy is ElectionStrategy.PREFERRED:
            election = elect_preferred_leader(replicas, list(current.isr), live)
            if election.leader is None or election.leader == current.leader:
                return False
        elif strategy is ElectionStrategy.CONTROLLED_SHUTDOWN:
            election = elect_leader_for_controlled_shutdown(
                replicas, list(current.isr), live, model.shutting_down
            )
            if election.leader is None:
                return False  # its leader stays and serves; the caller reports it
        else:
            election = elect_leader_offline(replicas, list(current.isr), live, False)
            if election.leader is None and any(r in live for r in replicas):
                # No ISR replica is live: only the topic's setting (or an operator asking for
                # an unclean election) may allow another one.
                allowed = strategy is ElectionStrategy.UNCLEAN
                if not allowed:
                    config = await self.store.topic_config(tp[0])
                    allowed = unclean_enabled(config, self.unclean_leader_election_enable)
                if allowed:
                    election = elect_leader_offline(replicas, list(current.isr), live, True)
        if election.leader is None:
            log.warning(
                "partition %s-%d stays offline: no live replica in its ISR %s (%s)",
                *tp,
                list(current.isr),
                "no live replica at all"
                if not any(r in live for r in replicas)
                else "unclean.leader.election.enable is off",
            )
            if model.partition_states.get(tp) is not PartitionState.OFFLINE:
                model.partition_states.put(tp, PartitionState.OFFLINE)
            return False
        if election.unclean:
            log.warning(
                "unclean leader election for %s-%d: %d, not in the ISR %s, leads; records "
                "only the ISR had may be lost",
                *tp,
                election.leader,
                list(current.isr),
            )
            if self.metrics is not None:
                self.metrics.unclean_leader_elections.inc()
        elif self.metrics is not None and strategy is ElectionStrategy.OFFLINE:
            self.metrics.clean_leader_elections.inc()
        state = LeaderAndIsr(
            leader=election.leader,
            leader_epoch=current.leader_epoch + 1,
            isr=tuple(election.isr),
            controller_epoch=model.epoch,
        )
        await self.store.write_state(model, tp, state)
        model.partition_states.put(tp, PartitionState.ONLINE)
        batch.add_leader_and_isr(replicas, tp)
        batch.add_update_metadata(model.brokers, [tp])
        return True
