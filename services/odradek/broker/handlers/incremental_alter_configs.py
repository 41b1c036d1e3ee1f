"""IncrementalAlterConfigs (44): SET, DELETE, APPEND or SUBTRACT a topic's config overrides.

Authorization, as Kafka's ``handleIncrementalAlterConfigsRequest``: a topic needs ALTER_CONFIGS
on it, a broker (or broker logger) ALTER_CONFIGS on the cluster; otherwise the resource answers
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED and is left unchanged.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.configs import (
    AlterResult,
    ConfigAdmin,
    ConfigResource,
    IncrementalAlteration,
)
from odradek.broker.authorization import config_refusal, merge_refused
from odradek.broker.context import RequestContext
from odradek.broker.handlers.alter_configs import alter_configs_response
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation

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
    refused = {
        i: AlterResult(r.resource_type, r.name, error)
        for i, r in enumerate(resources)
        if (error := config_refusal(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.name))
    }
    allowed = [r for i, r in enumerate(resources) if i not in refused]
    results = merge_refused(
        len(resources),
        await admin.incremental_alter(allowed, validate_only=request.validate_only),
        refused,
    )
    return alter_configs_response(API_KEY, ctx.api_version, results)
