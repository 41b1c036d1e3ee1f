"""AlterConfigs (33): replace a topic's configuration overrides in ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.broker.admin.configs import ConfigAdmin, ConfigResource
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.ALTER_CONFIGS


async def handle(ctx: RequestContext, request: Any) -> Any:
    resources = [
        ConfigResource(
            r.resource_type, r.resource_name, configs=tuple((c.name, c.value) for c in r.configs)
        )
        for r in request.resources
    ]
    admin = ConfigAdmin(ctx.broker.zk, ctx.broker.broker_id, ctx.broker.config)
    results = await admin.alter(resources, validate_only=request.validate_only)
    return alter_configs_response(API_KEY, ctx.api_version, results)


def alter_configs_response(api_key: int, api_version: int, results: Iterable[Any]) -> Any:
    """The answer to AlterConfigs and IncrementalAlterConfigs: one result per resource."""
    response_type = schemas.response_schema(api_key, api_version)
    result_type = element_type(response_type, "responses")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        responses=tuple(
            build(
                result_type,
                error_code=r.error,
                error_message=r.message,
                resource_type=r.resource_type,
                resource_name=r.name,
            )
            for r in results
        ),
    )
