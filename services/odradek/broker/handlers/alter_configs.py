"""AlterConfigs (33): replace a topic's configuration overrides in ZooKeeper.

Authorization, as Kafka's ``processLegacyAlterConfigsRequest``: a topic needs ALTER_CONFIGS on
it, a broker ALTER_CONFIGS on the cluster; otherwise the resource answers
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED and is left unchanged.

A resource named more than once is refused first, each occurrence INVALID_REQUEST ("Each
resource must appear at most once."), as Kafka's ``ConfigAdminManager.preprocess``. The request
is read, authorized, altered (``ConfigAdmin``) and answered in time slices (``time_slices``):
1 MB names 142,000 resources. ``answer_alteration`` is shared with IncrementalAlterConfigs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from odradek.broker.admin.configs import (
    DUPLICATE_RESOURCE,
    AlterResult,
    ConfigAdmin,
    ConfigResource,
    repeated_resources,
)
from odradek.broker.authorization import config_refusal, merge_refused
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.time_slices import TimeSlices, converted, sliced

API_KEY = ApiKey.ALTER_CONFIGS

Alter = Callable[[ConfigAdmin, Sequence[ConfigResource], TimeSlices], Awaitable[list[AlterResult]]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    resources = [
        ConfigResource(
            r.resource_type,
            r.resource_name,
            configs=await converted(r.configs, _pair, slices),
        )
        async for r in sliced(request.resources, slices)
    ]

    async def alter(admin: ConfigAdmin, allowed: Sequence[ConfigResource], s: TimeSlices) -> Any:
        return await admin.alter(allowed, validate_only=request.validate_only, slices=s)

    return await answer_alteration(ctx, API_KEY, resources, alter, slices)


def _pair(config: Any) -> tuple[str, str | None]:
    return config.name, config.value


async def answer_alteration(
    ctx: RequestContext,
    api_key: int,
    resources: list[ConfigResource],
    alter: Alter,
    slices: TimeSlices,
) -> Any:
    """Refuse repeated and unauthorized resources, ``alter`` the others, answer each."""
    repeated = await repeated_resources(resources, slices)
    refused: dict[int, AlterResult] = {}
    async for i, r in sliced(enumerate(resources), slices):
        if (r.resource_type, r.name) in repeated:
            error, message = ErrorCode.invalid_request, DUPLICATE_RESOURCE
            refused[i] = AlterResult(r.resource_type, r.name, error, message)
        elif error := config_refusal(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.name):
            refused[i] = AlterResult(r.resource_type, r.name, error)
    allowed = [r async for i, r in sliced(enumerate(resources), slices) if i not in refused]
    admin = ConfigAdmin(ctx.broker.zk, ctx.broker.broker_id, ctx.broker.config)
    results = merge_refused(len(resources), await alter(admin, allowed, slices), refused)

    response_type = schemas.response_schema(api_key, ctx.api_version)
    result_type = element_type(response_type, "responses")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        responses=tuple(
            [
                build(
                    result_type,
                    error_code=r.error,
                    error_message=r.message,
                    resource_type=r.resource_type,
                    resource_name=r.name,
                )
                async for r in sliced(results, slices)
            ]
        ),
    )
