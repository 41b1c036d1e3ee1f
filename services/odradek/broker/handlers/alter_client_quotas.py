"""AlterClientQuotas (49): set or remove client quotas in ZooKeeper (``admin/client_quotas``).

Needs ALTER_CONFIGS on the Cluster, as Kafka's ``handleAlterClientQuotasRequest``: without it
every entry is CLUSTER_AUTHORIZATION_FAILED. Each entry is validated and written on its own
(one failing leaves the others); ``validate_only`` checks and writes nothing.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin import client_quotas
from odradek.broker.admin.errors import error_of
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS


async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for entry in request.entries:
        error, message = ErrorCode.none, None
        if not allowed:
            error = ErrorCode.cluster_authorization_failed
        elif ctx.broker.zk is None:
            error, message = ErrorCode.unknown_server_error, "this broker has no ZooKeeper"
        else:
            try:
                entity = client_quotas.entity_of(
                    (e.entity_type, e.entity_name) for e in entry.entity
                )
                ops = [client_quotas.Op(op.key, op.value, op.remove) for op in entry.ops]
                await client_quotas.alter_entity(ctx.broker.zk, entity, ops, request.validate_only)
            except Exception as e:  # noqa: BLE001 - each entry answers its own error
                error, message = error_of(e, "AlterClientQuotas")
        results.append((entry, error, message))
    return _response(ctx.api_version, results)


def _response(api_version: int, results: list[tuple[Any, ErrorCode, str | None]]) -> Any:
    response_type = schemas.response_schema(API_KEY, api_version)
    entry_type = element_type(response_type, "entries")
    entity_type = element_type(entry_type, "entity")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        entries=tuple(
            build(
                entry_type,
                error_code=error,
                error_message=message,
                entity=tuple(
                    build(entity_type, entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
            for entry, error, message in results
        ),
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return _response(request.__version__, [(entry, error, None) for entry in request.entries])
