"""Fetch (1): long-poll read; records go out as file regions for ``sendfile``, never copied.

Sessions (KIP-227) are not kept: every answer has session id 0, which tells clients to send
full fetch requests, as Kafka allows.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.replica_manager import FetchPartitionRequest
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.FETCH


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [
        FetchPartitionRequest(
            topic.topic,
            partition.partition,
            partition.fetch_offset,
            partition.partition_max_bytes,
            current_leader_epoch=getattr(partition, "current_leader_epoch", -1),
            last_fetched_epoch=getattr(partition, "last_fetched_epoch", -1),
            log_start_offset=getattr(partition, "log_start_offset", -1),
        )
        for topic in request.topics
        for partition in topic.partitions
    ]
    results = await ctx.broker.replica_manager.fetch(
        wanted,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=request.min_bytes,
        max_bytes=getattr(request, "max_bytes", 0x7FFFFFFF),
        isolation_level=getattr(request, "isolation_level", 0),
        replica_id=request.replica_id,
    )
    metrics = ctx.broker.metrics
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "responses")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    offsets = {(r.topic, r.partition): r.fetch_offset for r in wanted}
    for result in results:
        if metrics is not None and result.records is not None and result.size:
            # Records leave by sendfile, unread: count the offsets the slice spans (records
            # removed by compaction inside it are counted too).
            sent = result.records.next_offset - offsets[(result.topic, result.partition)]
            metrics.record_fetch(result.topic, bytes_out=result.size, messages_out=max(sent, 0))
        by_topic.setdefault(result.topic, []).append(
            build(
                partition_type,
                partition_index=result.partition,
                error_code=result.error,
                high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset,
                log_start_offset=result.log_start_offset,
                aborted_transactions=(),
                preferred_read_replica=-1,
                **_diverging(partition_type, result.diverging_epoch),
                # Never null: Kafka writes an empty record set, and librdkafka 2.0 (Debian's
                # kcat) rejects a null one as "invalid MessageSetSize -1".
                records=b"" if result.records is None else result.records,
            )
        )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            build(topic_type, topic=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


def _diverging(partition_type: Any, diverging: tuple[int, int] | None) -> dict[str, Any]:
    """The ``diverging_epoch`` field (v12+) when the leader found the follower diverging."""
    if diverging is None or "diverging_epoch" not in partition_type.__dataclass_fields__:
        return {}
    epoch_type = partition_type.__dataclass_fields__["diverging_epoch"].type
    return {"diverging_epoch": epoch_type(epoch=diverging[0], end_offset=diverging[1])}
