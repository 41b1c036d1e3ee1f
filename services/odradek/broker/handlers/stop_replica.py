"""StopReplica (5): stop hosting partitions, deleting their logs when the controller says so.

The sender needs CLUSTER_ACTION on the cluster, asked first: without it the request is refused
whole with CLUSTER_AUTHORIZATION_FAILED (``error_response``) before any epoch is compared.
A request with another broker epoch (STALE_BROKER_EPOCH) or from an older controller epoch
(STALE_CONTROLLER_EPOCH) answers that error with no partition errors and changes nothing (as
Kafka's handler). Otherwise each partition is stopped by ``controller_requests.stop_replica`` and
answers with its own error code. ``error_response`` (Kafka's ``getErrorResponse``, the answer on
a client listener) names the error at the top and for every partition.
"""

from __future__ import annotations

from odradek.broker import controller_requests
from odradek.broker.authorization import require_cluster_action
from odradek.broker.context import RequestContext
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)

API_KEY = ApiKey.STOP_REPLICA


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    refused = require_cluster_action(ctx, request, error_response)
    if refused is not None:  # before any epoch is compared: no STALE_BROKER_EPOCH oracle
        return refused
    broker = ctx.broker
    stale = await controller_requests.stale_epoch(broker, request, "StopReplica")
    if stale is not None:
        return StopReplicaResponse(error_code=stale, partition_errors=())
    errors = []
    for topic in request.topic_states:
        for p in topic.partition_states:
            error = controller_requests.stop_replica(
                broker.replica_manager,
                topic.topic_name,
                p.partition_index,
                p.leader_epoch,
                delete=p.delete_partition,
            )
            errors.append(
                StopReplicaPartitionError(
                    topic_name=topic.topic_name,
                    partition_index=p.partition_index,
                    error_code=error,
                )
            )
    ctx.broker.replica_manager.update_gauges(ctx.broker.metrics)
    return StopReplicaResponse(error_code=ErrorCode.none, partition_errors=tuple(errors))


def error_response(request: StopReplicaRequest, error: ErrorCode) -> StopReplicaResponse:
    """``error`` at the top and for every partition of the request."""
    return StopReplicaResponse(
        error_code=error,
        partition_errors=tuple(
            StopReplicaPartitionError(
                topic_name=topic.topic_name, partition_index=p.partition_index, error_code=error
            )
            for topic in request.topic_states
            for p in topic.partition_states
        ),
    )
