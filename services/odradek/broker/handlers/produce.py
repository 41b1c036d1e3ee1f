"""Produce (0): append each partition's record set as leader; no answer at all for acks=0."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.PRODUCE


async def handle(ctx: RequestContext, request: Any) -> Any | None:
    entries = {
        (topic.name, partition.index): b"" if partition.records is None else partition.records
        for topic in request.topic_data
        for partition in topic.partition_data
    }
    results = await ctx.broker.replica_manager.append_records(request.acks, entries)
    metrics = ctx.broker.metrics
    if metrics is not None:
        for (topic, _), result in results.items():
            if result.records_count:
                metrics.record_produce(
                    topic, bytes_in=result.valid_bytes, messages_in=result.records_count
                )
    if request.acks == 0:
        return None  # Kafka sends no response to acks=0

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "responses")
    partition_type = element_type(topic_type, "partition_responses")
    responses = []
    for topic in request.topic_data:
        partitions = []
        for partition in topic.partition_data:
            result = results[(topic.name, partition.index)]
            partitions.append(
                build(
                    partition_type,
                    index=partition.index,
                    error_code=result.error,
                    base_offset=result.base_offset,
                    log_append_time=(
                        datetime.fromtimestamp(result.log_append_time_ms / 1000, UTC)
                        if result.log_append_time_ms >= 0
                        else None
                    ),
                    log_start_offset=result.log_start_offset,
                    record_errors=(),
                    error_message=result.error_message,
                )
            )
        responses.append(build(topic_type, name=topic.name, partition_responses=tuple(partitions)))
    return build(response_type, responses=tuple(responses), throttle_time=NO_THROTTLE)
