"""AlterConfigs (33): replace a topic's configuration overrides in ZooKeeper.

Authorization, as Kafka's ``processLegacyAlterConfigsRequest``: a topic needs ALTER_CONFIGS on
it, a broker ALTER_CONFIGS on the cluster; otherwise the resource answers
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED and is left unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.broker.admin.configs import AlterResult, ConfigAdmin, ConfigResource
from odradek.broker.authorization import config_refusal, merge_refused
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation

API_KEY = ApiKey.ALTER_CONFIGS


async def handle(ctx: RequestContext, request: Any) -> Any:
    resources = [
        ConfigResource(
            r.resource_type, r.resource_name, configs=tuple((c.name, c.value) for c in r.configs)
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
        len(resources), await admin.alter(allowed, validate_only=request.validate_only), refused
    )
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
