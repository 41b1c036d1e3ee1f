"""DescribeLogDirs (35): this broker's log dirs, each with its logs, their sizes and lags.

As Kafka's ``ReplicaManager.describeLogDirs``: every entry of ``log.dirs``; an offline dir
answers KAFKA_STORAGE_ERROR with no topics; topics null means every log, else only the named
partitions (read in time slices, ``time_slices``). A future log (AlterReplicaLogDirs moving the
replica here) is listed with ``is_future_key`` and ``offset_lag`` = how far its LEO is behind
the current log's. v4's
``total_bytes`` / ``usable_bytes`` are the volume's (``statvfs``, read off the event loop: a
failing disk may hang it), -1 for an offline dir or one whose volume cannot be read. v5 (KIP-1066
cordoned dirs) is not served: Odradek has no cordoning.

Needs DESCRIBE on the cluster (Kafka's ``handleDescribeLogDirsRequest``): else no log dir is
listed and (v3+) the error is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.storage.manager import LogDirDescription
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
UNKNOWN_BYTES = -1


def _volume_bytes(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    """(total, usable) bytes of each path's volume; a path that cannot be read is left out."""
    usage = {}
    for path in paths:
        try:
            found = shutil.disk_usage(path)
        except OSError:
            continue
        usage[path] = (found.total, found.free)
    return usage


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return build(
            schemas.response_schema(API_KEY, ctx.api_version),
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    log_manager = ctx.broker.replica_manager.log_manager
    wanted = None
    if request.topics is not None:  # a set, as Kafka reads it; 1 MB names 250,000 partitions
        slices = TimeSlices()
        named: set[tuple[str, int]] = set()
        async for topic in sliced(request.topics, slices):
            async for partition in sliced(topic.partitions, slices):
                named.add((topic.topic, int(partition)))
        wanted = named.__contains__
    described = log_manager.describe_log_dirs(wanted)
    volumes: dict[Path, tuple[int, int]] = {}
    if ctx.api_version >= 4:
        online = [d.path for d in described if d.offline_reason is None]
        volumes = await asyncio.to_thread(_volume_bytes, online)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "results")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=tuple(_result(result_type, d, volumes.get(d.path)) for d in described),
    )


def _result(result_type: type[Any], described: LogDirDescription, volume: Any) -> Any:
    topic_type = element_type(result_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    for replica in described.replicas:
        by_topic.setdefault(replica.topic, []).append(
            build(
                partition_type,
                partition_index=replica.partition,
                partition_size=replica.size_bytes,
                offset_lag=replica.offset_lag,
                is_future_key=replica.is_future,
            )
        )
    total_bytes, usable_bytes = volume if volume is not None else (UNKNOWN_BYTES, UNKNOWN_BYTES)
    return build(
        result_type,
        error_code=(
            ErrorCode.none if described.offline_reason is None else ErrorCode.kafka_storage_error
        ),
        log_dir=str(described.path),
        topics=tuple(
            build(topic_type, name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
        total_bytes=total_bytes,
        usable_bytes=usable_bytes,
    )
