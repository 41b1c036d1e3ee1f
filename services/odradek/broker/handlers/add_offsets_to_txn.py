"""AddOffsetsToTxn (25), v0-3: a group's ``__consumer_offsets`` partition joins the transaction
(its offsets then come by TxnOffsetCommit to the group coordinator, settled by the markers).
Thin: ``shard.add_offsets``; PRODUCER_FENCED as the version knows it. v4 only adds
TRANSACTION_ABORTABLE (KIP-890), not answered here: not advertised.

Authorization, as Kafka's ``handleAddOffsetsToTxnRequest``: WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build
from odradek.broker.handlers.transactions import coordinator_answer
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.transactions.result import fenced_error_for

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return _answer(ctx, ErrorCode.transactional_id_authorization_failed)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed)
    error = await coordinator_answer(
        ctx,
        lambda transactions: transactions.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        ),
    )
    return _answer(ctx, fenced_error_for("AddOffsetsToTxn", ctx.api_version, error))


def _answer(ctx: RequestContext, error: ErrorCode) -> Any:
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        throttle_time=NO_THROTTLE,
        error_code=error,
    )
