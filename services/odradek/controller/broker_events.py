"""Brokers that leave, arrive or register again, as the controller handles them (one event).

The controller reads ``/brokers/ids`` (with its watch armed again) and hands the live brokers to
``on_brokers_change``, which compares them with the model:

- a broker that left (Kafka's ``onBrokerFailure``, ``on_brokers_failure``): the partitions it led
  -> Offline, then New and Offline partitions -> Online (a leader from the ISR; unclean only if
  the topic allows), then its replicas -> Offline (it leaves every ISR); UpdateMetadata to the
  live brokers;
- a broker that arrived (``onBrokerStartup``, ``on_brokers_startup``): it starts with every
  replica serving (``log_dir_events.forget_brokers``), UpdateMetadata to all, its replicas ->
  Online (LeaderAndIsr), New and Offline partitions -> Online, then leadership of its preferred
  partitions back, and reassignments waiting for a target replica on it go on;
- a broker whose broker epoch changed (it registered again: a new session, or a restart quicker
  than this event) is both: it left, and it arrived, as Kafka handles a bounced broker.

The channel follows the live brokers (``Channel.set_brokers``) before the departed brokers'
partitions move, and again once the arrivals are in the model. Everything is gathered in the
event's batch, which the controller sends. Runs on the controller's event loop, inside one event.
"""

from __future__ import annotations

import logging

from odradek.controller import log_dir_events
from odradek.controller.batch import RequestBatch
from odradek.controller.model import BrokerRegistration, ClusterModel
from odradek.controller.partition_state_machine import ElectionStrategy, PartitionStateMachine
from odradek.controller.ports import Channel
from odradek.controller.reassignment import Reassignments
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.states import PartitionState

log = logging.getLogger(__name__)


async def on_brokers_change(
    model: ClusterModel,
    live: dict[int, BrokerRegistration],
    channel: Channel,
    partition_machine: PartitionStateMachine,
    replica_machine: ReplicaStateMachine,
    reassignments: Reassignments,
    batch: RequestBatch,
) -> None:
    """``live`` is ``/brokers/ids`` now: the module docstring's three cases."""
    known = set(model.brokers)
    bounced = {b for b in set(live) & known if live[b].epoch != model.broker_epochs[b]}
    departed = (known - set(live)) | bounced
    arrived = (set(live) - known) | bounced
    if bounced:
        log.info("brokers registered again (new broker epochs): %s", sorted(bounced))
    if departed:
        log.info("brokers left: %s", sorted(departed))
        model.set_brokers({b: r for b, r in live.items() if b not in bounced})
        await channel.set_brokers(model.brokers)
        await on_brokers_failure(model, departed, partition_machine, replica_machine, batch)
    model.set_brokers(live)
    await channel.set_brokers(model.brokers)
    if arrived:
        log.info("brokers arrived: %s", sorted(arrived))
        log_dir_events.forget_brokers(model, arrived)
        await on_brokers_startup(model, arrived, partition_machine, reassignments, batch)


async def on_brokers_failure(
    model: ClusterModel,
    departed: set[int],
    partition_machine: PartitionStateMachine,
    replica_machine: ReplicaStateMachine,
    batch: RequestBatch,
) -> None:
    led = [tp for tp, s in model.states.items() if s.leader in departed]
    PartitionStateMachine.to_offline(model, led)
    await partition_machine.to_online(
        model, partition_machine.online_state_change_candidates(model), batch
    )
    replicas = [
        r for r in ReplicaStateMachine.replicas_on(model, departed) if r[0][0] not in model.deleting
    ]
    await replica_machine.to_offline(model, replicas, batch)
    batch.add_update_metadata(model.brokers, [])  # the live brokers changed


async def on_brokers_startup(
    model: ClusterModel,
    arrived: set[int],
    partition_machine: PartitionStateMachine,
    reassignments: Reassignments,
    batch: RequestBatch,
) -> None:
    batch.add_full_state(set())
    replicas = ReplicaStateMachine.replicas_on(model, arrived)
    ReplicaStateMachine.to_online(model, replicas, batch)
    await partition_machine.to_online(
        model, partition_machine.online_state_change_candidates(model), batch
    )
    preferred = [
        tp
        for tp in model.partitions()
        if model.replicas(tp)[0] in arrived
        and model.partition_states.get(tp) is PartitionState.ONLINE
    ]
    await partition_machine.to_online(model, preferred, batch, strategy=ElectionStrategy.PREFERRED)
    # Reassignments waiting for a target replica on these brokers go on (Kafka's
    # onBrokerStartup): their replicas hear the current replica set again.
    for tp in model.reassigning_partitions():
        if arrived & set(model.assignment(tp).target):
            await reassignments.resume(model, tp, batch)
