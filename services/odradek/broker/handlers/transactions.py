"""What the transaction APIs' handlers share: running one coordinator call and turning what it
raises into the one error code of the answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE: the client finds the coordinator again or retries). Not a handler
(it has no ``API_KEY``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from odradek.broker.admin.errors import error_of
from odradek.broker.context import RequestContext
from odradek.errors import ErrorCode
from odradek.transactions.coordinator import TransactionCoordinator

__all__ = ["coordinator_answer"]


async def coordinator_answer(
    ctx: RequestContext,
    call: Callable[[TransactionCoordinator], Awaitable[ErrorCode]],
) -> ErrorCode:
    transactions = ctx.broker.transactions
    if transactions is None:
        return ErrorCode.coordinator_not_available
    try:
        return await call(transactions)
    except Exception as e:  # the coordinator's errors carry their code; others are logged
        return error_of(e, "a transaction coordinator request")[0]
