"""AlterClientQuotas (49): set or remove client quotas in ZooKeeper (``admin/client_quotas``).

Needs ALTER_CONFIGS on the Cluster, as Kafka's ``handleAlterClientQuotasRequest``: without it
every entry is CLUSTER_AUTHORIZATION_FAILED. Each entry is validated and written on its own
(one failing leaves the others); ``validate_only`` checks and writes nothing.

As Kafka's ``ZkAdminManager.alterClientQuotas`` answers (a map from entity to error): entries
naming the same entity are applied in turn and the entity is answered once, with the last one's
outcome. The entries are read, applied and answered in time slices (``time_slices``), the
entities with a znode listed once for the request (``client_quotas.stored_entities``).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from odradek.broker.admin import client_quotas
from odradek.broker.admin.errors import error_of
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.time_slices import TimeSlices, run_at_once, run_sliced, sliced

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS

Entity = tuple[tuple[str, str | None], ...]  # (entity_type, entity_name), as the request names it


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    allowed = ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    zk = ctx.broker.zk
    stored = None
    if allowed and zk is not None and request.entries:
        stored = await client_quotas.stored_entities(zk)
    results: dict[frozenset[tuple[str, str | None]], tuple[Entity, ErrorCode, str | None]] = {}
    async for entry in sliced(request.entries, slices):
        parts = tuple((e.entity_type, e.entity_name) for e in entry.entity)
        error, message = ErrorCode.none, None
        if not allowed:
            error = ErrorCode.cluster_authorization_failed
        elif zk is None:
            error, message = ErrorCode.unknown_server_error, "this broker has no ZooKeeper"
        else:
            try:
                entity = client_quotas.entity_of(parts)
                ops = [client_quotas.Op(op.key, op.value, op.remove) for op in entry.ops]
                await client_quotas.alter_entity(zk, entity, ops, request.validate_only, stored)
            except Exception as e:  # noqa: BLE001 - each entry answers its own error
                error, message = error_of(e, "AlterClientQuotas")
        key = frozenset(dict(parts).items())  # Kafka's ClientQuotaEntity: a map of the parts
        results.pop(key, None)  # answered where it was last named, with that entry's outcome
        results[key] = (parts, error, message)
    return await _response(ctx.api_version, list(results.values()), slices)


async def _response(
    api_version: int,
    results: list[tuple[Entity, ErrorCode, str | None]],
    slices: TimeSlices | None = None,
) -> Any:
    return await run_sliced(_answer(api_version, results), slices)


def error_response(request: Any, error: ErrorCode) -> Any:
    results = [
        (tuple((e.entity_type, e.entity_name) for e in entry.entity), error, None)
        for entry in request.entries
    ]
    return run_at_once(_answer(request.__version__, results))


def _answer(
    api_version: int, results: list[tuple[Entity, ErrorCode, str | None]]
) -> Generator[None, None, Any]:
    """Builds the answer, an entry per result, pausing (``yield``) after each; returns it."""
    response_type = schemas.response_schema(API_KEY, api_version)
    entry_type = element_type(response_type, "entries")
    entity_type = element_type(entry_type, "entity")
    entries = []
    for parts, error, message in results:
        entries.append(
            build(
                entry_type,
                error_code=error,
                error_message=message,
                entity=tuple(
                    build(entity_type, entity_type=kind, entity_name=name) for kind, name in parts
                ),
            )
        )
        yield
    return build(response_type, throttle_time=NO_THROTTLE, entries=tuple(entries))
