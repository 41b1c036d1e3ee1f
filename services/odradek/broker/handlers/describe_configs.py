"""DescribeConfigs (32): a topic's effective configuration, or this broker's static one.
Authorization, as Kafka's ``ConfigHelper``: a topic needs DESCRIBE_CONFIGS on it, a broker (or
broker logger) DESCRIBE_CONFIGS on the cluster; otherwise the resource answers
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED with no configs.

Bounded work: a resource named twice is refused, every occurrence INVALID_REQUEST ("Each
resource must appear at most once."), as Kafka's ``ConfigAdminManager.preprocess`` refuses one in
IncrementalAlterConfigs (Kafka's DescribeConfigs describes it again, but here 1 MB could then ask
for this broker's ~200 configs 250,000 times: a 2.5 GB answer). The rest is described and answered
in time slices (``time_slices``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.config_entries import ConfigDescription
from odradek.broker.admin.configs import (
    DUPLICATE_RESOURCE,
    ConfigAdmin,
    ConfigResource,
    DescribeResult,
)
from odradek.broker.authorization import config_refusal
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.time_slices import TimeSlices, answer_each, sliced

API_KEY = ApiKey.DESCRIBE_CONFIGS


def config_entry(
    entry_type: type[Any], c: ConfigDescription, synonym_type: type[Any] | None = None
) -> Any:
    """One described key on the wire: a DescribeConfigs entry, or a CreateTopics (v5+) config
    (``build`` keeps the fields ``entry_type`` has; a type without synonyms gives no
    ``synonym_type``)."""
    return build(
        entry_type,
        name=c.name,
        value=c.value,
        read_only=c.read_only,
        config_source=int(c.source),
        is_sensitive=c.is_sensitive,
        synonyms=()
        if synonym_type is None
        else tuple(
            build(synonym_type, name=s.name, value=s.value, source=int(s.source))
            for s in c.synonyms
        ),
        config_type=c.config_type,
        documentation=c.documentation,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    # Each resource once (the first naming of it), its repeats counted; see the module.
    first: dict[tuple[int, str], Any] = {}
    counts: dict[tuple[int, str], int] = {}
    async for r in sliced(request.resources, slices):
        key = (r.resource_type, r.resource_name)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, r)
    results: dict[tuple[int, str], DescribeResult] = {}
    wanted: list[tuple[tuple[int, str], ConfigResource]] = []
    async for key, r in sliced(first.items(), slices):
        resource_type, name = key
        if counts[key] > 1:
            error, message = ErrorCode.invalid_request, DUPLICATE_RESOURCE
            results[key] = DescribeResult(resource_type, name, error, message)
        elif error := config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, resource_type, name):
            results[key] = DescribeResult(resource_type, name, error)
        else:
            # Kafka describes every key for a null list, and for an empty one too.
            keys = tuple(r.configuration_keys) if r.configuration_keys else None
            wanted.append((key, ConfigResource(resource_type, name, keys=keys)))
    admin = ConfigAdmin(ctx.broker.zk, ctx.broker.broker_id, ctx.broker.config)
    described = await admin.describe(
        [resource for _, resource in wanted],
        include_synonyms=getattr(request, "include_synonyms", False),
        include_documentation=getattr(request, "include_documentation", False),
        slices=slices,
    )
    for (key, _), result in zip(wanted, described, strict=True):
        results[key] = result

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "results")
    entry_type = element_type(result_type, "configs")
    synonym_type = element_type(entry_type, "synonyms")

    async def answer(key: tuple[int, str]) -> Any:
        r = results[key]
        return build(
            result_type,
            error_code=r.error,
            error_message=r.message,
            resource_type=r.resource_type,
            resource_name=r.name,
            configs=tuple(config_entry(entry_type, c, synonym_type) for c in r.configs),
        )

    keys = ((r.resource_type, r.resource_name) for r in request.resources)
    answered = await answer_each(keys, answer, slices)
    return build(response_type, throttle_time=NO_THROTTLE, results=tuple(answered))
