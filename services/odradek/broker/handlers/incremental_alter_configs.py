"""IncrementalAlterConfigs (44): SET, DELETE, APPEND or SUBTRACT a topic's config overrides.

Authorization, as Kafka's ``handleIncrementalAlterConfigsRequest``: a topic needs ALTER_CONFIGS
on it, a broker (or broker logger) ALTER_CONFIGS on the cluster; otherwise the resource answers
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED and is left unchanged. A resource
named twice, and a key named twice in one resource, are refused first, as in AlterConfigs
(``handlers.alter_configs``, whose ``answer_alteration`` this shares); all of it in time slices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odradek.broker.admin.configs import ConfigAdmin, ConfigResource, IncrementalAlteration
from odradek.broker.context import RequestContext
from odradek.broker.handlers.alter_configs import answer_alteration
from odradek.protocol.apis import ApiKey
from odradek.time_slices import TimeSlices, converted, sliced

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    resources = [
        ConfigResource(
            r.resource_type,
            r.resource_name,
            ops=await converted(r.configs, _alteration, slices),
        )
        async for r in sliced(request.resources, slices)
    ]

    async def alter(admin: ConfigAdmin, allowed: Sequence[ConfigResource], s: TimeSlices) -> Any:
        return await admin.incremental_alter(allowed, validate_only=request.validate_only, slices=s)

    return await answer_alteration(ctx, API_KEY, resources, alter, slices)


def _alteration(config: Any) -> IncrementalAlteration:
    return IncrementalAlteration(config.name, config.config_operation, config.value)
