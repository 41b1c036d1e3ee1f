"""AlterReplicaLogDirs (34): move replicas of this broker to other log dirs (KIP-113).

Each partition's answer is ``LogDirMover.alter_all``'s (its module docstring gives Kafka's rules);
NONE means the move started (or the replica already is there), not that it finished:
DescribeLogDirs shows the future log and its lag until the swap. A broker without a mover (tests
that run one without its background parts) answers KAFKA_STORAGE_ERROR.

Needs ALTER on the cluster (Kafka's ``handleAlterReplicaLogDirsRequest``): else every partition
answers CLUSTER_AUTHORIZATION_FAILED and nothing moves.

Bounded work, as Kafka reads the request (``AlterReplicaLogDirsRequest.partitionDirs``, a map): a
partition named more than once is moved and answered once, to the dir named last; the request
is read, decided and answered in time slices (``time_slices``). 1 MB names 250,000 partitions,
which held the broker's loop 5.7 s before.
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
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    partition_dirs: dict[tuple[str, int], str] = {}  # each partition once: the dir named last
    async for wanted in sliced(request.dirs, slices):
        async for topic in sliced(wanted.topics, slices):
            async for partition in sliced(topic.partitions, slices):
                partition_dirs[(topic.name, int(partition))] = wanted.path
    replicas = ctx.broker.replica_manager
    mover = replicas.log_dir_moves
    if not authorize_cluster(ctx, AclOperation.ALTER):
        results = dict.fromkeys(partition_dirs, ErrorCode.cluster_authorization_failed)
    elif mover is None:
        results = dict.fromkeys(partition_dirs, ErrorCode.kafka_storage_error)
    else:
        results = await mover.alter_all(replicas, ctx.broker.metadata, partition_dirs, slices)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "results")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    async for (name, index), error in sliced(results.items(), slices):
        by_topic.setdefault(name, []).append(
            build(partition_type, partition_index=index, error_code=error)
        )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(topic_type, topic_name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )
