"""AlterReplicaLogDirs (34): move replicas of this broker to other log dirs (KIP-113).

Each partition's answer is ``LogDirMover.alter``'s (its module docstring gives Kafka's rules);
NONE means the move started (or the replica already is there), not that it finished:
DescribeLogDirs shows the future log and its lag until the swap. A broker without a mover (tests
that run one without its background parts) answers KAFKA_STORAGE_ERROR.

Needs ALTER on the cluster (Kafka's ``handleAlterReplicaLogDirsRequest``): else every partition
answers CLUSTER_AUTHORIZATION_FAILED and nothing moves.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS


async def handle(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    mover = replicas.log_dir_moves
    results: dict[str, dict[int, ErrorCode]] = {}
    allowed = authorize_cluster(ctx, AclOperation.ALTER)
    for wanted in request.dirs:
        for topic in wanted.topics:
            for partition in topic.partitions:
                if not allowed:
                    error = ErrorCode.cluster_authorization_failed
                elif mover is None:
                    error = ErrorCode.kafka_storage_error
                else:
                    error = await mover.alter(
                        replicas, ctx.broker.metadata, topic.name, int(partition), wanted.path
                    )
                results.setdefault(topic.name, {})[int(partition)] = error

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "results")
    partition_type = element_type(topic_type, "partitions")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(
                topic_type,
                topic_name=name,
                partitions=tuple(
                    build(partition_type, partition_index=index, error_code=error)
                    for index, error in partitions.items()
                ),
            )
            for name, partitions in results.items()
        ),
    )
