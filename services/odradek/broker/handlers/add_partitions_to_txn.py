"""AddPartitionsToTxn (24), v0-3: the client's form, one transaction whose partitions join it.

Partitions of a topic (or a partition) this broker's metadata does not know get
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, nothing being added (Kafka's
answer); otherwise every partition gets the coordinator's one answer (``shard.add_partitions``),
PRODUCER_FENCED as the version knows it (``fenced_error_for``).

v4+ (the broker-to-broker verification of KIP-890 part 1, several transactions) is not
advertised: brokers here do not verify a transactional produce with its coordinator.
Each partition is answered once, grouped by topic (Kafka's maps keyed by partition); the
request is gone through in time slices (``time_slices``).

Authorization, as Kafka's ``handleAddPartitionsToTxnRequest`` (v0-3, from clients): WRITE on the
transactional id (else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED); WRITE on
each topic, never granted for an internal one (else its partitions answer
TOPIC_AUTHORIZATION_FAILED, unknown ones UNKNOWN_TOPIC_OR_PARTITION, and the others
OPERATION_NOT_ATTEMPTED: nothing is added).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.handlers.transactions import coordinator_answer
from odradek.common.topics import INTERNAL_TOPICS
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced
from odradek.transactions.result import fenced_error_for

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    # Each partition once, by topic in the order first named (Kafka's maps keyed by partition).
    wanted: dict[str, dict[int, None]] = {}
    async for topic in sliced(request.v3_and_below_topics, slices):
        indexes = wanted.setdefault(topic.name, {})
        for index in topic.partitions:
            indexes[index] = None
            await slices.tick()
    transactional_id = request.v3_and_below_transactional_id
    writable = filter_authorized(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t for t in wanted if t not in INTERNAL_TOPICS)
    )
    refused: dict[tuple[str, int], ErrorCode] = {}
    for name, indexes in wanted.items():
        for index in indexes:
            if name not in writable:
                refused[(name, index)] = ErrorCode.topic_authorization_failed
            elif not _known(ctx, name, index):
                refused[(name, index)] = ErrorCode.unknown_topic_or_partition
            await slices.tick()
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error: ErrorCode | None = ErrorCode.transactional_id_authorization_failed
    elif refused:
        error = None  # each partition its refusal, the others OPERATION_NOT_ATTEMPTED
    else:
        error = await coordinator_answer(
            ctx,
            lambda transactions: transactions.add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                [(name, index) for name, indexes in wanted.items() for index in indexes],
            ),
        )
        error = fenced_error_for("AddPartitionsToTxn", ctx.api_version, error)
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "results_by_topic_v3_and_below")
    partition_type = element_type(topic_type, "results_by_partition")
    topics = []
    for name, indexes in wanted.items():
        if not indexes:
            continue  # a topic named without partitions: nothing to answer (Kafka's maps)
        partitions = []
        for index in indexes:
            partition_error = (
                refused.get((name, index), ErrorCode.operation_not_attempted)
                if error is None
                else error
            )
            partitions.append(
                partition_type(partition_index=index, partition_error_code=partition_error)
            )
            await slices.tick()
        topics.append(topic_type(name=name, results_by_partition=tuple(partitions)))
    return build(
        response_type, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(topics)
    )


def _known(ctx: RequestContext, topic: str, partition: int) -> bool:
    cached = ctx.broker.metadata.topic(topic)
    return cached is not None and partition in cached.partitions
