"""Fetch (1): long-poll read; records go out as file regions for ``sendfile``, never copied.

The request's session fields pick a fetch context (``broker/fetch_sessions.py``, KIP-227): the
context says which partitions to read (a full fetch's own, or every partition of an incremental
fetch's session) and which of the results to answer (all, or only those that changed). Fetch
v4-6 have no session fields and are always sessionless.

Authorization, as Kafka's ``handleFetchRequest``: a follower's fetch (``replica_id`` >= 0) needs
CLUSTER_ACTION on the cluster, asked before anything else: without it every partition of the
request answers TOPIC_AUTHORIZATION_FAILED, and no session is looked up or made (Kafka makes the
context first; refusing earlier tells an impostor nothing about sessions either). A consumer's
fetch needs READ on each topic: the partitions of other topics answer TOPIC_AUTHORIZATION_FAILED
and are not read.

Size: the answer holds at most min(the request's ``max_bytes``, ``fetch.max.bytes``) of records
(Fetch v0-v2 have no ``max_bytes``: only the broker's bound), less when a fetch quota's window
allows less; the first batch of the first partition with records is sent whole even if larger,
so a consumer always makes progress (KIP-74).

The partitions are read (``ReplicaManager.fetch``) and answered in time slices
(``time_slices``): 1 MB names 30,000 of them.
"""

from __future__ import annotations

import logging
import typing
from datetime import timedelta
from typing import Any

from odradek.broker.authorization import authorize_cluster, filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.fetch_sessions import FINAL_EPOCH, INVALID_SESSION_ID, FetchResponseData
from odradek.broker.handlers.build import build, element_type
from odradek.broker.quotas import FetchQuota
from odradek.broker.replica_manager import FetchPartitionRequest, FetchResult
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices

log = logging.getLogger(__name__)

API_KEY = ApiKey.FETCH
TOPIC_IDS_MIN_VERSION = 13  # Fetch v13+ names topics by id (not served yet)


async def handle(ctx: RequestContext, request: Any) -> Any:
    replica_id = getattr(request, "replica_id", -1)
    if replica_id >= 0 and not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        log.warning(
            "refusing a follower fetch as replica %d from %s (principal %s): no CLUSTER_ACTION",
            replica_id,
            ctx.host or "?",
            ctx.principal,
        )
        refused = [
            FetchResult(topic.topic, p.partition, ErrorCode.topic_authorization_failed)
            for topic in request.topics
            for p in topic.partitions
        ]
        answer = FetchResponseData(ErrorCode.none, INVALID_SESSION_ID, refused)
        return await _response(ctx, [], answer)
    context = ctx.broker.fetch_sessions.new_context(
        getattr(request, "session_id", INVALID_SESSION_ID),
        getattr(request, "session_epoch", FINAL_EPOCH),
        (
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
        ),
        [
            (topic.topic, index)
            for topic in getattr(request, "forgotten_topics_data", ())
            for index in topic.partitions
        ],
        privileged=replica_id >= 0,
        uses_topic_ids=ctx.api_version >= TOPIC_IDS_MIN_VERSION,
    )
    results: list[FetchResult] = []
    wanted = context.partitions
    if replica_id < 0 and wanted:
        readable = filter_authorized(
            ctx, AclOperation.READ, ResourceType.TOPIC, (r.topic for r in wanted)
        )
        results = [
            FetchResult(r.topic, r.partition, ErrorCode.topic_authorization_failed)
            for r in wanted
            if r.topic not in readable
        ]
        wanted = [r for r in wanted if r.topic in readable]
    quota = FetchQuota.of(ctx.broker.client_quotas, ctx.principal.name, ctx.header.client_id)
    if wanted:  # a session error reads nothing and answers at once, as Kafka does
        results += await ctx.broker.replica_manager.fetch(
            wanted,
            max_wait_ms=int(request.max_wait.total_seconds() * 1000),
            min_bytes=request.min_bytes,
            # fetch.max.bytes bounds every fetch, a follower's too (KafkaApis.handleFetchRequest)
            max_bytes=quota.max_bytes(
                min(getattr(request, "max_bytes", 0x7FFFFFFF), ctx.broker.fetch_max_bytes),
                replica_id,
            ),
            isolation_level=getattr(request, "isolation_level", 0),
            replica_id=replica_id,
        )
    throttle_ms = quota.record(results, replica_id)
    answer = context.throttled() if throttle_ms else context.respond(results)
    return await _response(ctx, wanted, answer, throttle_ms)


async def _response(
    ctx: RequestContext, wanted: list[FetchPartitionRequest], answer: Any, throttle_ms: int = 0
) -> Any:
    """The answer, built in time slices (``time_slices``)."""
    metrics = ctx.broker.metrics
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "responses")
    partition_type = element_type(topic_type, "partitions")
    epoch_type = partition_type.__dataclass_fields__.get("diverging_epoch")
    # ``tuple[AbortedTransaction, ...] | None`` (nullable from v4): the element class
    aborted_type = partition_type.__dataclass_fields__["aborted_transactions"].type
    aborted_type = typing.get_args(typing.get_args(aborted_type)[0])[0]
    by_topic: dict[str, list[Any]] = {}
    offsets = {(r.topic, r.partition): r.fetch_offset for r in wanted}
    slices = TimeSlices()
    for result in answer.results:
        await slices.tick()
        if metrics is not None and result.records is not None and result.size:
            # Records leave by sendfile, unread: count the offsets the slice spans (records
            # removed by compaction inside it are counted too).
            sent = result.records.next_offset - offsets[(result.topic, result.partition)]
            metrics.record_fetch(result.topic, bytes_out=result.size, messages_out=max(sent, 0))
        diverging = {}
        if result.diverging_epoch is not None and epoch_type is not None:
            epoch, end_offset = result.diverging_epoch
            diverging["diverging_epoch"] = build(
                epoch_type.type, epoch=epoch, end_offset=end_offset
            )
        by_topic.setdefault(result.topic, []).append(
            build(
                partition_type,
                partition_index=result.partition,
                error_code=result.error,
                high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset,
                log_start_offset=result.log_start_offset,
                # read_committed (v4+): the aborted transactions overlapping the records sent
                aborted_transactions=tuple(
                    build(
                        aborted_type,
                        producer_id=txn.producer_id,
                        first_offset=txn.first_offset,
                    )
                    for txn in result.aborted_transactions
                ),
                preferred_read_replica=-1,
                # Never null: Kafka writes an empty record set, and librdkafka 2.0 (Debian's
                # kcat) rejects a null one as "invalid MessageSetSize -1".
                records=b"" if result.records is None else result.records,
                **diverging,
            )
        )
    return build(
        response_type,
        throttle_time=timedelta(milliseconds=throttle_ms),
        error_code=answer.error,
        session_id=answer.session_id,
        responses=tuple(
            build(topic_type, topic=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )
