"""EndTxn (26), v0-3: commit or abort the producer's transaction (transaction version 1).

The answer comes once PrepareCommit/PrepareAbort is replicated; the markers are then written
and the transaction completed in the background (``odradek.transactions.coordinator``): a client
that begins its next transaction meanwhile is told CONCURRENT_TRANSACTIONS and retries. Thin:
``shard.end_transaction``; PRODUCER_FENCED as the version knows it. v4 only adds
TRANSACTION_ABORTABLE and v5 bumps the epoch at every transaction (KIP-890 part 2): neither is
advertised.

Needs WRITE on the transactional id (Kafka's ``handleEndTxnRequest``): else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and the coordinator is not asked.
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

API_KEY = ApiKey.END_TXN


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return _answer(ctx, ErrorCode.transactional_id_authorization_failed)
    error = await coordinator_answer(
        ctx,
        lambda transactions: transactions.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            bool(request.committed),
        ),
    )
    return _answer(ctx, fenced_error_for("EndTxn", ctx.api_version, error))


def _answer(ctx: RequestContext, error: ErrorCode) -> Any:
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        throttle_time=NO_THROTTLE,
        error_code=error,
    )
