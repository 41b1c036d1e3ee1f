"""StopReplica (5): stop hosting partitions, deleting their logs when the controller says so.

A request from an older controller epoch answers STALE_CONTROLLER_EPOCH with no partition errors
and changes nothing (as Kafka). Otherwise each partition is stopped by
``controller_requests.stop_replica`` and answers with its own error code.
"""

from __future__ import annotations

from odradek.broker import controller_requests
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
    broker = ctx.broker
    if not controller_requests.accept_controller_epoch(
        broker, request.controller_epoch, "StopReplica"
    ):
        return StopReplicaResponse(error_code=ErrorCode.stale_controller_epoch, partition_errors=())
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
