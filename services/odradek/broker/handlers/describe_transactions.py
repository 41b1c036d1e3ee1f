"""DescribeTransactions (65), v0: state, producer, timeout, start and partitions of each
transactional id asked for, from the coordinator that owns it here (``shard.describe``). An id
another broker coordinates is NOT_COORDINATOR (the admin client asks that one), one not known
TRANSACTIONAL_ID_NOT_FOUND; one answer per id, in the order asked.

Authorization, as Kafka's ``handleDescribeTransactionsRequest``: each transactional id needs
DESCRIBE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it), and only the topics the principal
may DESCRIBE are listed in its partitions.

Ids are answered in time slices, each distinct id looked up once (``time_slices.answer_each``):
a 1 MB request may name a million; Kafka caps nothing here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from odradek.broker.admin.errors import error_of
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import answer_each
from odradek.transactions.result import TransactionDescription

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
_EPOCH = datetime.fromtimestamp(0, UTC)


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    state_type = element_type(response_type, "transaction_states")
    topic_type = element_type(state_type, "topics")

    async def one(transactional_id: str) -> Any:
        found = await _describe(ctx, transactional_id)
        if found.error is not ErrorCode.none:  # Kafka's defaults beside an error: zeros
            return state_type(
                error_code=found.error,
                transactional_id=transactional_id,
                transaction_state="",
                transaction_timeout=timedelta(0),
                transaction_start_time=_EPOCH,
                producer_id=0,
                producer_epoch=0,
                topics=(),
            )
        start_ms = found.transaction_start_time_ms
        return state_type(
            error_code=found.error,
            transactional_id=transactional_id,
            transaction_state=found.state,
            transaction_timeout=timedelta(milliseconds=found.transaction_timeout_ms),
            # -1 (no transaction yet: Empty) as Kafka sends it
            transaction_start_time=(
                None if start_ms < 0 else datetime.fromtimestamp(start_ms / 1000, UTC)
            ),
            producer_id=found.producer_id,
            producer_epoch=found.producer_epoch,
            topics=tuple(
                topic_type(topic=topic, partitions=tuple(partitions))
                for topic, partitions in sorted(found.topics.items())
                if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
            ),
        )

    states = await answer_each(request.transactional_ids, one)
    return build(response_type, throttle_time=NO_THROTTLE, transaction_states=tuple(states))


async def _describe(ctx: RequestContext, transactional_id: str) -> TransactionDescription:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
        return TransactionDescription(error, transactional_id)
    transactions = ctx.broker.transactions
    if transactions is None:
        return TransactionDescription(ErrorCode.coordinator_not_available, transactional_id)
    if not transactional_id:
        return TransactionDescription(ErrorCode.invalid_request, transactional_id)
    try:
        return await transactions.describe(transactional_id)
    except Exception as e:
        return TransactionDescription(error_of(e, "DescribeTransactions")[0], transactional_id)
