"""Produce (0): append each partition's record set as leader; no answer at all for acks=0.

With ``acks=all`` the records are appended at once and the answer waits for replication as a
``DeferredAnswer``: the connection goes on with its next request meanwhile, and writes the
answers in request order. Records are counted in the metrics once acknowledged.

Before anything is appended, each partition's record set must be what Kafka's
``ProduceRequest.validateRecords`` requires of every version served (3+): exactly one whole
record batch, of magic 2. Anything else (no batch, two batches, an old message set) is
INVALID_RECORD for that partition, as Kafka answers it; the other partitions are appended.
The answer says why (Kafka's words) for the first ``EXPLAINED_RECORD_ERRORS_MAX`` of them, and
gives the others the code only, as Kafka answers all of them: 1 MB of 166,666 partitions
without records was answered with 19 MB of the same sentence (issue 23), now 5.5 MB (the
fields every partition answer has, as Kafka's).
Each partition is answered once, grouped by topic (Kafka's maps keyed by partition): a repeat
appends the last records named for it, a topic named without partitions is not answered. The
request's arrays are gone through in time slices (``time_slices``).
Clients never write the internal topics (``__consumer_offsets`` is the group coordinator's):
INVALID_TOPIC_EXCEPTION, as Kafka's ``appendToLocalLog`` answers.

Authorization, as Kafka's ``handleProduceRequest``, before anything else: a request carrying a
transactional batch needs WRITE on its ``transactional_id`` (none, or not allowed: every partition
answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs WRITE (its partitions answer
TOPIC_AUTHORIZATION_FAILED, and are not checked further). An idempotent producer's right
(IDEMPOTENT_WRITE) is checked by InitProducerId, as in Kafka 3.x, not here.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import DeferredAnswer, RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.replica_manager import ProduceResult
from odradek.common.topics import INTERNAL_TOPICS
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.storage.batch import ATTRIBUTES_OFFSET, LOG_OVERHEAD, MAGIC, TRANSACTIONAL_MASK
from odradek.time_slices import TimeSlices

API_KEY = ApiKey.PRODUCE
EXPLAINED_RECORD_ERRORS_MAX = 100  # INVALID_RECORD answers that carry their reason, a request


async def handle(ctx: RequestContext, request: Any) -> Any | None:
    acks = request.acks
    slices = TimeSlices()
    # Each partition once, grouped by topic in the order first named (a repeat's records are
    # the last ones, a topic named without partitions is not answered), as Kafka's maps keyed
    # by partition; in time slices (issue 23: 333,000 empty topics held the loop 2.7 s).
    entries: dict[tuple[str, int], bytes | memoryview] = {}
    for topic in request.topic_data:  # plain loops and ticks: the data path's cheapest form
        await slices.tick()
        for partition in topic.partition_data:
            records = b"" if partition.records is None else partition.records
            entries[(topic.name, partition.index)] = records
            await slices.tick()
    order: dict[str, list[int]] = {}
    for name, index in entries:
        order.setdefault(name, []).append(index)
    transactional_id = getattr(request, "transactional_id", None)
    if any(_is_transactional(records) for records in entries.values()) and not (
        transactional_id is not None
        and ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    ):
        error = ErrorCode.transactional_id_authorization_failed
        return await _answer(
            ctx, acks_zero=acks == 0, order=order, results=_all(entries, error), slices=slices
        )
    writable = filter_authorized(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (topic for topic, _ in entries)
    )
    refused: dict[tuple[str, int], ProduceResult] = {}
    explained = 0  # partitions refused for their record set whose answer says why
    for tp, records in entries.items():
        await slices.tick()
        if tp[0] not in writable:
            refused[tp] = ProduceResult(ErrorCode.topic_authorization_failed)
        elif (problem := _not_one_batch(records, ctx.api_version)) is not None:
            explained += 1
            message = problem if explained <= EXPLAINED_RECORD_ERRORS_MAX else None
            refused[tp] = ProduceResult(ErrorCode.invalid_record, error_message=message)
        elif tp[0] in INTERNAL_TOPICS:
            refused[tp] = ProduceResult(
                ErrorCode.invalid_topic_exception,
                error_message=f"Cannot append to internal topic {tp[0]}",
            )
    results, replication = await ctx.broker.replica_manager.append_records_then_wait(
        request.acks,
        {tp: records for tp, records in entries.items() if tp not in refused},
        timeout_ms=int(request.timeout.total_seconds() * 1000),
    )
    results.update(refused)
    # Only names and indexes from here on: a deferred answer must hold no view of the frame.
    del request, entries
    if replication is not None:  # acks=all: answered once replicated, see DeferredAnswer
        return DeferredAnswer(_answer_when_replicated(ctx, order, results, replication))
    return await _answer(ctx, acks_zero=acks == 0, order=order, results=results, slices=slices)


async def _answer_when_replicated(
    ctx: RequestContext,
    order: dict[str, list[int]],
    results: dict[tuple[str, int], ProduceResult],
    replication: Awaitable[dict[tuple[str, int], ProduceResult]],
) -> Any:
    results.update(await replication)
    return await _answer(ctx, acks_zero=False, order=order, results=results, slices=TimeSlices())


async def _answer(
    ctx: RequestContext,
    *,
    acks_zero: bool,
    order: dict[str, list[int]],
    results: dict[tuple[str, int], ProduceResult],
    slices: TimeSlices,
) -> Any | None:
    metrics = ctx.broker.metrics
    if metrics is not None:
        for (topic, _), result in results.items():
            if result.records_count and result.error == ErrorCode.none:
                metrics.record_produce(
                    topic, bytes_in=result.valid_bytes, messages_in=result.records_count
                )
    if acks_zero:
        return None  # Kafka sends no response to acks=0

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "responses")
    partition_type = element_type(topic_type, "partition_responses")
    responses = []
    for name, indexes in order.items():
        partitions = []
        for index in indexes:
            await slices.tick()
            result = results[(name, index)]
            partitions.append(
                build(
                    partition_type,
                    index=index,
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
        responses.append(build(topic_type, name=name, partition_responses=tuple(partitions)))
    return build(response_type, responses=tuple(responses), throttle_time=NO_THROTTLE)


_MAGIC_OFFSET = 16  # base_offset, batch_length, partition_leader_epoch, then magic


def _all(entries: dict[tuple[str, int], Any], error: ErrorCode) -> dict[Any, ProduceResult]:
    return {tp: ProduceResult(error) for tp in entries}


def _is_transactional(records: bytes | memoryview) -> bool:
    """Whether the (first) batch of ``records`` is transactional, as Kafka's
    ``RequestUtils.hasTransactionalRecords`` asks; a batch too short to say is not."""
    if len(records) < ATTRIBUTES_OFFSET + 2 or records[_MAGIC_OFFSET] != MAGIC:
        return False
    attributes = int.from_bytes(records[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2], "big")
    return bool(attributes & TRANSACTIONAL_MASK)


def _not_one_batch(records: bytes | memoryview, version: int) -> str | None:
    """Why ``records`` is not exactly one whole batch of magic 2 (Kafka's words), or None."""
    size = len(records)
    first = 0  # bytes of the first batch, as its header says
    if size >= LOG_OVERHEAD:
        first = LOG_OVERHEAD + int.from_bytes(records[8:LOG_OVERHEAD], "big", signed=True)
    prefix = f"Produce requests with version {version}"
    if size <= _MAGIC_OFFSET or not _MAGIC_OFFSET < first <= size:
        return f"{prefix} must have at least one record batch per partition"
    if records[_MAGIC_OFFSET] != MAGIC:
        return f"{prefix} are only allowed to contain record batches with magic version {MAGIC}"
    if first != size:
        return f"{prefix} are only allowed to contain exactly one record batch per partition"
    return None
