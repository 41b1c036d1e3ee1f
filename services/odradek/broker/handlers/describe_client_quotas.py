"""DescribeClientQuotas (48): the client quotas stored in ZooKeeper that match a filter.

Needs DESCRIBE_CONFIGS on the Cluster (else CLUSTER_AUTHORIZATION_FAILED for the request), as
Kafka's ``handleDescribeClientQuotasRequest``. The filter's components and ``strict`` are
matched as ``ZkAdminManager.describeClientQuotas`` matches them (``admin/client_quotas``).
"""

from __future__ import annotations

import typing
from typing import Any

from odradek.broker.admin import client_quotas
from odradek.broker.admin.errors import error_of
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(ctx.api_version, ErrorCode.cluster_authorization_failed, None, None)
    if ctx.broker.zk is None:
        return _response(
            ctx.api_version, ErrorCode.unknown_server_error, "this broker has no ZooKeeper", None
        )
    try:
        found = await client_quotas.describe(
            ctx.broker.zk,
            [(c.entity_type, c.match_type, c.match) for c in request.components],
            request.strict,
        )
    except Exception as e:  # noqa: BLE001 - the request answers its error
        error, message = error_of(e, "DescribeClientQuotas")
        return _response(ctx.api_version, error, message, None)
    return _response(ctx.api_version, ErrorCode.none, None, found)


def _response(api_version: int, error: ErrorCode, message: str | None, found: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, api_version)
    # ``entries`` is nullable: ``tuple[EntryData, ...] | None``
    entry_type = typing.get_args(
        typing.get_args(response_type.__dataclass_fields__["entries"].type)[0]
    )[0]
    entity_type = element_type(entry_type, "entity")
    value_type = element_type(entry_type, "values")
    entries = None
    if found is not None:
        entries = tuple(
            build(
                entry_type,
                entity=tuple(
                    build(entity_type, entity_type=kind, entity_name=name)
                    for kind, name in client_quotas.entity_parts(entity)
                ),
                values=tuple(
                    build(value_type, key=key, value=value) for key, value in sorted(quotas.items())
                ),
            )
            for entity, quotas in found
        )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        entries=entries,
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return _response(request.__version__, error, None, None)
