"""IncrementalAlterConfigs (44): SET, DELETE, APPEND or SUBTRACT a topic's config overrides."""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.configs import ConfigAdmin, ConfigResource, IncrementalAlteration
from odradek.broker.context import RequestContext
from odradek.broker.handlers.alter_configs import alter_configs_response
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
    return alter_configs_response(API_KEY, ctx.api_version, results)
