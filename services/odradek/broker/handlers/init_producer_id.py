"""InitProducerId (22), v0-4: a producer id and epoch.

Without ``transactional.id``: a new producer id (epoch 0) for an idempotent producer, from the
blocks reserved in ZooKeeper (``admin.producer_ids``), unique across brokers and restarts.

With one: the transaction coordinator that owns the id (``odradek.transactions``) answers:
INVALID_TRANSACTION_TIMEOUT outside ``(0, transaction.max.timeout.ms]``, the epoch bumped for a
known id (its running transaction aborted and the client told CONCURRENT_TRANSACTIONS until the
abort completes), KIP-360's resume with ``producer_id``/``producer_epoch`` (v3+), and
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4, ``fenced_error_for``). NOT_COORDINATOR and
COORDINATOR_LOAD_IN_PROGRESS send the client to FindCoordinator; ZooKeeper out of reach is
COORDINATOR_LOAD_IN_PROGRESS (retriable), as for idempotent producers.

Authorization, as Kafka's ``handleInitProducerIdRequest``: a transactional producer needs WRITE on
its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent one
IDEMPOTENT_WRITE on the cluster or, KIP-679, WRITE on some topic (else
CLUSTER_AUTHORIZATION_FAILED). Refused, no producer id is allocated.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from odradek.broker.admin.errors import error_of
from odradek.broker.admin.producer_ids import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, init_producer_id
from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.transactions.result import InitProducerIdAnswer, fenced_error_for

API_KEY = ApiKey.INIT_PRODUCER_ID


async def handle(ctx: RequestContext, request: Any) -> Any:
    refused = _refusal(ctx, request.transactional_id)
    if refused is not None:
        error, producer_id, epoch = refused, -1, -1
    elif request.transactional_id is None:
        result = await init_producer_id(ctx.broker.producer_ids, None)
        error, producer_id, epoch = result.error, result.producer_id, result.producer_epoch
    else:
        answer = await _transactional(ctx, request)
        error = fenced_error_for("InitProducerId", ctx.api_version, answer.error)
        producer_id, epoch = answer.producer_id, answer.producer_epoch
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE) or ctx.authorize_any(
        AclOperation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.cluster_authorization_failed


async def _transactional(ctx: RequestContext, request: Any) -> InitProducerIdAnswer:
    transactions = ctx.broker.transactions
    if transactions is None:
        return InitProducerIdAnswer(ErrorCode.coordinator_not_available)
    timeout_ms = request.transaction_timeout // timedelta(milliseconds=1)
    try:
        return await transactions.init_producer_id(
            request.transactional_id,
            timeout_ms,
            getattr(request, "producer_id", NO_PRODUCER_ID),
            getattr(request, "producer_epoch", NO_PRODUCER_EPOCH),
        )
    except OdradekError as e:
        code = e.error_code
    except Exception as e:  # ZooKeeper's errors and anything unexpected
        code, _ = error_of(e, "InitProducerId")
    if code in (ErrorCode.request_timed_out, ErrorCode.network_exception):
        code = ErrorCode.coordinator_load_in_progress  # ZooKeeper out of reach: come back
    return InitProducerIdAnswer(code)
