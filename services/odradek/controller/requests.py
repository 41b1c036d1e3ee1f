"""The controller's requests to brokers, built from its model (pure functions).

Each carries the controller's id and epoch; a broker refuses one older than the newest epoch it
has seen. LeaderAndIsr tells a broker what it leads or follows; UpdateMetadata tells every broker
the live brokers and each partition's leader and ISR (what Metadata answers come from); a
partition being deleted is announced with leader -2, as Kafka does, so caches drop it.
"""

from __future__ import annotations

from odradek.controller.model import LEADER_DURING_DELETE, ClusterModel, TopicPartition, topic_uuid
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

LEADER_AND_ISR_TYPE_ZK_CONTROLLER = 0  # "unknown": what Kafka's ZooKeeper controller sends
LEADER_EPOCH_DURING_DELETE = -2  # StopReplica for a deleted topic: stops whatever epoch
PLAINTEXT = 0  # SecurityProtocol id


def _by_topic(partitions: list[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, index in partitions:
        grouped.setdefault(topic, []).append(index)
    return grouped


def leader_and_isr(
    model: ClusterModel, controller_id: int, broker_id: int, partitions: list[TopicPartition]
) -> LeaderAndIsrRequest:
    topic_states = []
    leaders = set()
    for topic, indexes in _by_topic(partitions).items():
        states = []
        for index in indexes:
            state = model.states[(topic, index)]
            leaders.add(state.leader)
            states.append(
                LeaderAndIsrPartitionState(
                    partition_index=index,
                    controller_epoch=state.controller_epoch,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=tuple(state.isr),
                    partition_epoch=model.state_versions.get((topic, index), 0),
                    replicas=model.replicas((topic, index)),
                    is_new=False,
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
        LeaderAndIsrLiveLeader(
            broker_id=leader,
            host_name=model.brokers[leader].endpoints[0].host,
            port=model.brokers[leader].endpoints[0].port,
        )
        for leader in sorted(leaders)
        if leader in model.brokers
    )
    return LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=model.epoch,
        type_=LEADER_AND_ISR_TYPE_ZK_CONTROLLER,
        topic_states=tuple(topic_states),
        live_leaders=live_leaders,
    )


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
                    security_protocol=PLAINTEXT,
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


def stop_replica(
    model: ClusterModel, controller_id: int, partitions: list[TopicPartition], *, delete: bool
) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=controller_id,
        controller_epoch=model.epoch,
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
