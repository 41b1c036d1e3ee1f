"""Topics created, grown or deleted, as the controller handles them (one event each).

- created (``/brokers/topics`` changed) or grown (a topic's assignment znode changed:
  CreatePartitions), Kafka's ``onNewPartitionCreation`` (``new_partitions``): the new partitions
  and their replicas -> New, then -> Online: LeaderAndIsr with ``is_new`` to the replicas (on
  live brokers; those on dead brokers -> Offline), UpdateMetadata to every live broker. A
  partition whose state znode exists already (its creation was under way when the previous
  controller died) keeps that state; its replicas are told, as new ones.
- to delete (``/admin/delete_topics``, ``delete_topics``): partitions -> Offline, replicas ->
  Offline -> DeletionStarted (StopReplica with delete) or DeletionIneligible (dead broker),
  UpdateMetadata with leader -2 to all, the znodes go, then everything -> NonExistent. A
  deletion does not wait for the brokers' StopReplica answers.

``load_topic`` reads a topic's assignment (arming its watch) and the partition states not in the
model yet, several at once (``pipelined``); ``load_topics`` loads several topics at once, as the
controller does when elected. ZooKeeper is read through the ``Store``
port, every watch is the controller's (``watch_topic``), and the requests go in the event's
batch; ``delete_topics`` sends it after each topic, before that topic's znodes go. Runs on the
controller's event loop, inside one event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from odradek.common.partitions import TopicPartition
from odradek.controller.batch import RequestBatch
from odradek.controller.model import ClusterModel
from odradek.controller.partition_state_machine import PartitionStateMachine
from odradek.controller.pipelined import for_each
from odradek.controller.ports import Channel, Store, reload_state
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.states import PartitionState, ReplicaState
from odradek.zk.client import WatchCallback

log = logging.getLogger(__name__)


async def load_topic(
    model: ClusterModel, store: Store, topic: str, watch: WatchCallback | None
) -> None:
    assignment = await store.assignment(topic, watch=watch)
    if assignment is None:
        return
    model.topics[topic] = assignment
    missing = [tp for tp in model.partitions(topic) if tp not in model.states]
    await for_each(missing, lambda tp: reload_state(store, model, tp))


async def load_topics(
    model: ClusterModel,
    store: Store,
    topics: Iterable[str],
    watch_topic: Callable[[str], WatchCallback],
) -> None:
    """``load_topic`` for each of ``topics``, several at once (``pipelined``): an elected
    controller reads every topic and partition state, one round trip after another took
    seconds with thousands of partitions."""
    await for_each(topics, lambda topic: load_topic(model, store, topic, watch_topic(topic)))


async def on_topics_change(
    model: ClusterModel,
    names: Iterable[str],
    store: Store,
    watch_topic: Callable[[str], WatchCallback],
) -> list[TopicPartition]:
    """``names`` is ``/brokers/topics`` now: load the topics created; returns their partitions
    (for ``new_partitions``)."""
    created = [t for t in names if t not in model.topics]
    await load_topics(model, store, created, watch_topic)
    return [tp for t in created if t in model.topics for tp in model.partitions(t)]


async def new_partitions(
    model: ClusterModel,
    partitions: list[TopicPartition],
    partition_machine: PartitionStateMachine,
    replica_machine: ReplicaStateMachine,
    batch: RequestBatch,
) -> None:
    fresh = [
        tp for tp in partitions if model.partition_states.get(tp) is PartitionState.NON_EXISTENT
    ]
    # A partition whose state znode exists already (its creation was under way when the
    # previous controller died) keeps that state; its replicas are told, as new ones.
    PartitionStateMachine.adopt(model, fresh)
    replicas = ReplicaStateMachine.replicas_of(model, fresh)
    ReplicaStateMachine.move(model, replicas, ReplicaState.NEW)
    for tp in fresh:
        if tp in model.states:
            batch.add_leader_and_isr(model.replicas(tp), tp, new=True)
            batch.add_update_metadata(model.brokers, [tp])
    pending = (PartitionState.NEW, PartitionState.OFFLINE)
    await partition_machine.to_online(
        model, [tp for tp in fresh if model.partition_states.get(tp) in pending], batch
    )
    ReplicaStateMachine.to_online(model, [r for r in replicas if r[1] in model.brokers], batch)
    await replica_machine.to_offline(
        model, [r for r in replicas if r[1] not in model.brokers], batch
    )


async def delete_topics(
    model: ClusterModel,
    topics: Iterable[str],
    store: Store,
    channel: Channel,
    replica_machine: ReplicaStateMachine,
    batch: RequestBatch,
) -> None:
    """``topics`` are ``/admin/delete_topics`` now: each is deleted in turn."""
    for topic in topics:
        partitions = list(model.partitions(topic)) if topic in model.topics else []
        log.info("deleting topic %s (%d partitions)", topic, len(partitions))
        model.deleting.add(topic)
        PartitionStateMachine.to_offline(model, partitions)
        replicas = ReplicaStateMachine.replicas_of(model, partitions)
        await replica_machine.to_offline(model, replicas, batch)
        live = [r for r in replicas if r[1] in model.brokers]
        ReplicaStateMachine.to_deletion_started(model, live, batch)
        ReplicaStateMachine.move(
            model,
            [r for r in replicas if r[1] not in model.brokers],
            ReplicaState.DELETION_INELIGIBLE,
        )
        if partitions:
            batch.add_deleted_partitions(model.brokers, partitions)
        batch.send(channel)
        await store.delete_topic(model, topic)
        # A deletion does not wait for the brokers' StopReplica answers (yet).
        ReplicaStateMachine.move(model, live, ReplicaState.DELETION_SUCCESSFUL)
        ReplicaStateMachine.move(model, live, ReplicaState.NON_EXISTENT)
        for replica in replicas:
            model.replica_states.forget(replica)
        PartitionStateMachine.to_non_existent(model, partitions)
        model.topics.pop(topic, None)
        model.deleting.discard(topic)
        for tp in partitions:
            model.states.pop(tp, None)
            model.state_versions.pop(tp, None)
