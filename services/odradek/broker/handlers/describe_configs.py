"""DescribeConfigs (32): a topic's effective configuration, or this broker's static one.
Authorization, as Kafka's ``ConfigHelper``: a topic needs DESCRIBE_CONFIGS on it, a broker (or
broker logger) DESCRIBE_CONFIGS on the cluster; otherwise the resource answers
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED with no configs.

Bounded work: a resource named twice is refused, every occurrence INVALID_REQUEST ("Duplicate
resource in request"), as Kafka refuses one in AlterConfigs and IncrementalAlterConfigs: else
1 MB could ask for this broker's ~200 configs 200,000 times. The rest is described and answered
in time slices (``time_slices``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.configs import ConfigAdmin, ConfigResource, DescribeResult
from odradek.broker.authorization import config_refusal
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.DESCRIBE_CONFIGS
DUPLICATE_RESOURCE = "Duplicate resource in request"


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    resources = [
        ConfigResource(
            r.resource_type,
            r.resource_name,
            # Kafka describes every key for a null list, and for an empty one too.
            keys=tuple(r.configuration_keys) if r.configuration_keys else None,
        )
        async for r in sliced(request.resources, slices)
    ]
    refused: dict[int, DescribeResult] = {}
    seen: dict[tuple[int, str], int] = {}
    async for i, r in sliced(enumerate(resources), slices):
        first = seen.setdefault((r.resource_type, r.name), i)
        if first != i:  # named twice: both refused, as Kafka's AlterConfigs does
            refused[i] = refused[first] = DescribeResult(
                r.resource_type, r.name, ErrorCode.invalid_request, DUPLICATE_RESOURCE
            )
        elif error := config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.name):
            refused[i] = DescribeResult(r.resource_type, r.name, error)
    admin = ConfigAdmin(ctx.broker.zk, ctx.broker.broker_id, ctx.broker.config)
    described = await admin.describe(
        [r for i, r in enumerate(resources) if i not in refused],
        include_synonyms=getattr(request, "include_synonyms", False),
        include_documentation=getattr(request, "include_documentation", False),
        slices=slices,
    )
    rest = iter(described)
    results = [
        refused[i] if i in refused else next(rest) async for i in sliced(range(len(resources)))
    ]

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "results")
    entry_type = element_type(result_type, "configs")
    synonym_type = element_type(entry_type, "synonyms")
    answered = []
    async for r in sliced(results, slices):
        answered.append(
            build(
                result_type,
                error_code=r.error,
                error_message=r.message,
                resource_type=r.resource_type,
                resource_name=r.name,
                configs=tuple(
                    build(
                        entry_type,
                        name=c.name,
                        value=c.value,
                        read_only=c.read_only,
                        config_source=int(c.source),
                        is_sensitive=c.is_sensitive,
                        synonyms=tuple(
                            build(synonym_type, name=s.name, value=s.value, source=int(s.source))
                            for s in c.synonyms
                        ),
                        config_type=c.config_type,
                        documentation=c.documentation,
                    )
                    for c in r.configs
                ),
            )
        )
    return build(response_type, throttle_time=NO_THROTTLE, results=tuple(answered))
