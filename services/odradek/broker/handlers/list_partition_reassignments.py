"""ListPartitionReassignments (46, v0, KIP-455): forwarded to the active controller, which
knows every reassignment in progress; refused when no controller answers.

Needs DESCRIBE on the cluster (Kafka's ``handleListPartitionReassignmentsRequest``), asked here
before forwarding: else CLUSTER_AUTHORIZATION_FAILED, and nothing reaches the controller.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.forwarding import forward
from odradek.broker.handlers.build import NO_THROTTLE
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return error_response(request, ErrorCode.cluster_authorization_failed)
    return await forward(
        ctx.broker.controller, request, lambda error, message: _refused(request, error, message)
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return _refused(request, error, None)


def _refused(request: Any, error: ErrorCode, message: str | None) -> Any:
    response_type = schemas.response_schema(API_KEY, request.__version__)
    return response_type(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, topics=()
    )
