"""AddPartitionsToTxn (24), v0-3: the client's form, one transaction whose partitions join it.

Partitions of a topic (or a partition) this broker's metadata does not know get
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, nothing being added (Kafka's
answer); otherwise every partition gets the coordinator's one answer (``shard.add_partitions``),
PRODUCER_FENCED as the version knows it (``fenced_error_for``).

v4+ (the broker-to-broker verification of KIP-890 part 1, several transactions) is not
advertised: brokers here do not verify a transactional produce with its coordinator.

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
from odradek.broker.controller_requests import INTERNAL_TOPICS
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.handlers.transactions import coordinator_answer
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.transactions.result import fenced_error_for

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted: dict[str, list[int]] = {}
    for topic in request.v3_and_below_topics:
        wanted.setdefault(topic.name, []).extend(topic.partitions)
    transactional_id = request.v3_and_below_transactional_id
    writable = filter_authorized(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t for t in wanted if t not in INTERNAL_TOPICS)
    )
    refused = {
        (name, index): ErrorCode.topic_authorization_failed
        for name, indexes in wanted.items()
        if name not in writable
        for index in indexes
    }
    refused |= {
        (name, index): ErrorCode.unknown_topic_or_partition
        for name, indexes in wanted.items()
        for index in indexes
        if name in writable and not _known(ctx, name, index)
    }
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
        errors = {(name, index): error for name, indexes in wanted.items() for index in indexes}
    elif refused:
        errors = {
            (name, index): refused.get((name, index), ErrorCode.operation_not_attempted)
            for name, indexes in wanted.items()
            for index in indexes
        }
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
        errors = {(name, index): error for name, indexes in wanted.items() for index in indexes}
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "results_by_topic_v3_and_below")
    partition_type = element_type(topic_type, "results_by_partition")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            topic_type(
                name=name,
                results_by_partition=tuple(
                    partition_type(partition_index=index, partition_error_code=errors[name, index])
                    for index in dict.fromkeys(indexes)
                ),
            )
            for name, indexes in wanted.items()
        ),
    )


def _known(ctx: RequestContext, topic: str, partition: int) -> bool:
    cached = ctx.broker.metadata.topic(topic)
    return cached is not None and partition in cached.partitions
