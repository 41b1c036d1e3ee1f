"""ListTransactions (66), v0-1: the transactions this broker coordinates, filtered by state,
producer id and (v1, KIP-994) how long they have been running; unknown state names are listed
back. COORDINATOR_LOAD_IN_PROGRESS while one of its ``__transaction_state`` partitions loads.
v2 adds a transactional id pattern, not implemented: not advertised.

Only the transactional ids the principal may DESCRIBE are listed (Kafka's
``handleListTransactionsRequest``), with no error.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.errors import error_of
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.transactions.result import TransactionListing

API_KEY = ApiKey.LIST_TRANSACTIONS


async def handle(ctx: RequestContext, request: Any) -> Any:
    transactions = ctx.broker.transactions
    listings: list[TransactionListing] = []
    unknown: list[str] = []
    if transactions is None:
        error = ErrorCode.coordinator_not_available
    else:
        try:
            error, listings, unknown = await transactions.list_transactions(
                request.state_filters,
                request.producer_id_filters,
                getattr(request, "duration_filter", -1),
            )
        except Exception as e:
            error = error_of(e, "ListTransactions")[0]
    listings = [
        listing
        for listing in listings
        if ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, listing.transactional_id
        )
    ]
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    state_type = element_type(response_type, "transaction_states")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            state_type(
                transactional_id=listing.transactional_id,
                producer_id=listing.producer_id,
                transaction_state=listing.transaction_state,
            )
            for listing in listings
        ),
    )
