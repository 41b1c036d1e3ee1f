"""The controller's requests to brokers, built from its model (pure functions).

Each carries the controller's id and epoch, and the receiving broker's epoch; a broker refuses
one older than the newest controller epoch it has seen, and one that does not carry its current
broker epoch. LeaderAndIsr tells a broker what it leads or follows, with ``is_new`` for replicas
of partitions being created (Kafka's NewReplica state: the broker may create their logs on any
healthy log dir) and, while a partition is reassigned, its adding and removing replicas
(KIP-455); UpdateMetadata tells every broker the live brokers, each with all of its endpoints,
and each partition's leader and ISR (what Metadata answers come from); a partition being deleted
is announced with leader -2, as Kafka does, so caches drop it.
"""

from __future__ import annotations

import dataclasses

from odradek.common.partitions import TopicPartition
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME, SecurityProtocol
from odradek.controller.model import LEADER_DURING_DELETE, ClusterModel, topic_uuid
from odradek.protocol.interbroker import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from odradek.zk.paths import Endpoint

LEADER_AND_ISR_TYPE_ZK_CONTROLLER = 0  # "unknown": what Kafka's ZooKeeper controller sends
LEADER_EPOCH_DURING_DELETE = -2  # StopReplica for a deleted topic: stops whatever epoch


def _by_topic(partitions: list[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, index in partitions:
        grouped.setdefault(topic, []).append(index)
    return grouped


def leader_and_isr(
    model: ClusterModel,
    controller_id: int,
    broker_id: int,
    partitions: list[TopicPartition],
    *,
    new: bool = False,
    control_plane_listener_name: str = CONTROL_PLANE_LISTENER_NAME,
) -> LeaderAndIsrRequest:
    """``broker_id``'s states of ``partitions``; ``new``: replicas of partitions being created.

    ``live_leaders`` name each leader's first endpoint that is not its control plane (Kafka
    names the inter-broker one, a broker setting this process does not have); nothing reads
    them before replication.
    """
    topic_states = []
    leaders = set()
    for topic, indexes in _by_topic(partitions).items():
        states = []
        for index in indexes:
            state = model.states[(topic, index)]
            assignment = model.assignment((topic, index))
            leaders.add(state.leader)
            states.append(
                LeaderAndIsrPartitionState(
                    partition_index=index,
                    controller_epoch=state.controller_epoch,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=tuple(state.isr),
                    partition_epoch=model.state_versions.get((topic, index), 0),
                    replicas=assignment.replicas,
                    adding_replicas=assignment.adding,
                    removing_replicas=assignment.removing,
                    is_new=new,
                )
            )
        topic_states.append(
            LeaderAndIsrTopicState(
                topic_name=topic,
                topic_id=topic_uuid(model.topics[topic].topic_id),
                partition_states=tuple(states),
            )
        )
    live_leaders = tuple(
        LeaderAndIsrLiveLeader(broker_id=leader, host_name=endpoint.host, port=endpoint.port)
        for leader in sorted(leaders)
        if leader in model.brokers
        for endpoint in _data_plane_endpoint(model, leader, control_plane_listener_name)
    )
    return LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=model.epoch,
        broker_epoch=model.broker_epochs[broker_id],
        type_=LEADER_AND_ISR_TYPE_ZK_CONTROLLER,
        topic_states=tuple(topic_states),
        live_leaders=live_leaders,
    )


def _data_plane_endpoint(
    model: ClusterModel, broker_id: int, control_plane_listener_name: str
) -> list[Endpoint]:
    """The broker's first endpoint that is not its control plane, as a list of zero or one."""
    for endpoint in model.brokers[broker_id].endpoints:
        if endpoint.listener_name != control_plane_listener_name:
            return [endpoint]
    return []


def update_metadata(
    model: ClusterModel,
    controller_id: int,
    partitions: list[TopicPartition],
    *,
    deleted: bool = False,
) -> UpdateMetadataRequest:
    topic_states = []
    live = model.live_broker_ids
    for topic, indexes in _by_topic(partitions).items():
        states = []
        for index in indexes:
            state = model.states[(topic, index)]
            replicas = model.replicas((topic, index))
            states.append(
                UpdateMetadataPartitionState(
                    partition_index=index,
                    controller_epoch=state.controller_epoch,
                    leader=LEADER_DURING_DELETE if deleted else state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=tuple(state.isr),
                    zk_version=model.state_versions.get((topic, index), 0),
                    replicas=replicas,
                    offline_replicas=tuple(r for r in replicas if r not in live),
                )
            )
        topic_states.append(
            UpdateMetadataTopicState(
                topic_name=topic,
                topic_id=topic_uuid(model.topics[topic].topic_id),
                partition_states=tuple(states),
            )
        )
    brokers = tuple(
        UpdateMetadataBroker(
            id_=broker_id,
            endpoints=tuple(
                UpdateMetadataEndpoint(
                    port=e.port,
                    host=e.host,
                    listener=e.listener_name,
                    security_protocol=SecurityProtocol[e.security_protocol],
                )
                for e in info.endpoints
            ),
            rack=info.rack,
        )
        for broker_id, info in sorted(model.brokers.items())
    )
    return UpdateMetadataRequest(
        controller_id=controller_id,
        controller_epoch=model.epoch,
        topic_states=tuple(topic_states),
        live_brokers=brokers,
    )


def addressed_to(
    request: UpdateMetadataRequest, model: ClusterModel, broker_id: int
) -> UpdateMetadataRequest:
    """The same UpdateMetadata, carrying ``broker_id``'s broker epoch (built once, sent to all)."""
    return dataclasses.replace(request, broker_epoch=model.broker_epochs[broker_id])


def stop_replica(
    model: ClusterModel,
    controller_id: int,
    broker_id: int,
    partitions: list[TopicPartition],
    *,
    delete: bool,
) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=controller_id,
        controller_epoch=model.epoch,
        broker_epoch=model.broker_epochs[broker_id],
        topic_states=tuple(
            StopReplicaTopicState(
                topic_name=topic,
                partition_states=tuple(
                    StopReplicaPartitionState(
                        partition_index=index,
                        leader_epoch=LEADER_EPOCH_DURING_DELETE
                        if delete
                        else model.states[(topic, index)].leader_epoch,
                        delete_partition=delete,
                    )
                    for index in indexes
                ),
            )
            for topic, indexes in _by_topic(partitions).items()
        ),
    )
