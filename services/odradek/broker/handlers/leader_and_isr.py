"""LeaderAndIsr (4): the controller tells this broker which partitions it leads or follows.

The sender needs CLUSTER_ACTION on the cluster, asked before anything else is looked at: without
it the request is refused whole with CLUSTER_AUTHORIZATION_FAILED (``error_response``), so an
unauthorized caller learns no epoch (Kafka's ``authorizeClusterOperation``).
A request with another broker epoch (STALE_BROKER_EPOCH) or from an older controller epoch
(STALE_CONTROLLER_EPOCH) is refused whole: the error at the top and for every partition, as
Kafka's ``getErrorResponse`` answers (``error_response``, also the answer on a client listener).
Otherwise each partition state is applied by ``controller_requests.become_leader_or_follower``
and answers with its own error code, grouped by topic id (v5+ responses name topics by id).

A topic name Kafka refuses (``Topic.validate``) is INVALID_TOPIC_EXCEPTION for each of its
partitions, and a negative partition UNKNOWN_TOPIC_OR_PARTITION, before anything is read or
created: such a name is no path to build a log directory from (``../x`` would be one outside the
log dirs).
"""

from __future__ import annotations

from odradek.broker import controller_requests
from odradek.broker.admin.errors import InvalidTopicError
from odradek.broker.admin.validation import validate_topic_name
from odradek.broker.authorization import require_cluster_action
from odradek.broker.context import RequestContext
from odradek.broker.partition import PartitionState
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
)

API_KEY = ApiKey.LEADER_AND_ISR


async def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    refused = require_cluster_action(ctx, request, error_response)
    if refused is not None:  # before any epoch is compared: no STALE_BROKER_EPOCH oracle
        return refused
    broker = ctx.broker
    stale = await controller_requests.stale_epoch(broker, request, "LeaderAndIsr")
    if stale is not None:
        return error_response(request, stale)
    topics = []
    for topic in request.topic_states:
        try:
            validate_topic_name(topic.topic_name)
        except InvalidTopicError:
            topics.append(_topic_fails(topic, ErrorCode.invalid_topic_exception))
            continue
        if broker.topic_configs is not None:
            await broker.topic_configs.ensure(topic.topic_name)
        errors = []
        for p in topic.partition_states:
            if p.partition_index < 0:
                errors.append(
                    LeaderAndIsrPartitionError(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                    )
                )
                continue
            state = PartitionState(
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=tuple(p.isr),
                replicas=tuple(p.replicas),
                controller_epoch=p.controller_epoch,
                partition_epoch=p.partition_epoch,
                adding_replicas=tuple(p.adding_replicas),
            )
            error = controller_requests.become_leader_or_follower(
                broker.replica_manager, topic.topic_name, p.partition_index, state, is_new=p.is_new
            )
            errors.append(
                LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=error)
            )
        topics.append(
            LeaderAndIsrTopicError(topic_id=topic.topic_id, partition_errors=tuple(errors))
        )
    broker.replica_manager.update_gauges(broker.metrics)
    return LeaderAndIsrResponse(error_code=ErrorCode.none, topics=tuple(topics))


def error_response(request: LeaderAndIsrRequest, error: ErrorCode) -> LeaderAndIsrResponse:
    """``error`` at the top and for every partition of the request."""
    return LeaderAndIsrResponse(
        error_code=error,
        topics=tuple(_topic_fails(topic, error) for topic in request.topic_states),
    )


def _topic_fails(topic: LeaderAndIsrTopicState, error: ErrorCode) -> LeaderAndIsrTopicError:
    return LeaderAndIsrTopicError(
        topic_id=topic.topic_id,
        partition_errors=tuple(
            LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=error)
            for p in topic.partition_states
        ),
    )
