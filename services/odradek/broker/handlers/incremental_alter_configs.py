"""IncrementalAlterConfigs (44): SET, DELETE, APPEND or SUBTRACT a topic's config overrides."""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.configs import ConfigAdmin, ConfigResource, IncrementalAlteration
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS


async def handle(ctx: RequestContext, request: Any) -> Any:
    resources = [
        ConfigResource(
            r.resource_type,
            r.resource_name,
            ops=tuple(
                IncrementalAlteration(c.name, c.config_operation, c.value) for c in r.configs
            ),
        )
        for r in request.resources
    ]
    admin = ConfigAdmin(ctx.broker.zk, ctx.broker.broker_id, ctx.broker.config)
    results = await admin.incremental_alter(resources, validate_only=request.validate_only)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
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
