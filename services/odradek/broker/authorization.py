"""What request handlers ask the authorizer, in Kafka's words (``AuthHelper`` of Kafka 3.9).

Handlers call these with their ``RequestContext``; each asks ``ctx.authorize`` (one resource) or
``ctx.authorize_any`` (KIP-679), so a broker without an authorizer allows everything and answers
exactly as before. Kafka's rules, kept the same everywhere:

- an unauthorized resource in a request of several gets its own error (TOPIC_, GROUP_,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the others are served; a request about one resource,
  or about the cluster, is refused whole (the handler's ``error_response`` or its own error field);
- a resource listed without being named ("every topic", "every group") is left out unless
  DESCRIBE is allowed, so its existence is not disclosed; a named one is answered
  TOPIC_AUTHORIZATION_FAILED before the broker even looks whether it exists;
- requests only brokers and the controller send (LeaderAndIsr, StopReplica, UpdateMetadata,
  WriteTxnMarkers, a follower fetch) need CLUSTER_ACTION on the cluster, asked before anything
  else, so an unauthorized caller learns no epoch (``require_cluster_action``).

``authorized_operations`` is Kafka's bitfield of ``AuthHelper.authorizedOperations``: bit
``1 << code`` for each operation of ``SUPPORTED_OPERATIONS[resource_type]`` (``AclEntry``'s)
that is allowed; ``OPERATIONS_NOT_ASKED`` (the schemas' default) when the client did not ask.

Pure functions over the context; safe from any coroutine of the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from odradek.broker.admin.configs import ResourceType as ConfigResourceType
from odradek.broker.context import RequestContext
from odradek.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

log = logging.getLogger(__name__)

__all__ = [
    "OPERATIONS_NOT_ASKED",
    "SUPPORTED_OPERATIONS",
    "answer_permitted",
    "authorize_cluster",
    "config_refusal",
    "authorized_operations",
    "filter_authorized",
    "filter_authorized_in_slices",
    "merge_refused",
    "partition_authorized",
    "require_cluster_action",
]

T = TypeVar("T")
R = TypeVar("R")

OPERATIONS_NOT_ASKED = -2147483648  # Int.MinValue: authorized operations not asked for


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    """May the principal do ``operation`` to the cluster (``kafka-cluster``)?"""
    return ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def filter_authorized(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The names of ``names`` the principal may do ``operation`` to, each asked once."""
    return {name for name in dict.fromkeys(names) if ctx.authorize(operation, resource_type, name)}


async def filter_authorized_in_slices(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    slices: TimeSlices | None = None,
) -> set[str]:
    """``filter_authorized`` in time slices (``time_slices``), for a request that may name a
    hundred thousand resources: the authorizer's matching costs microseconds per name."""
    allowed = set()
    async for name in sliced(dict.fromkeys(names), slices):
        if ctx.authorize(operation, resource_type, name):
            allowed.add(name)
    return allowed


def partition_authorized(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    items: Iterable[T],
    name: Callable[[T], str],
) -> tuple[list[T], list[T]]:
    """``items`` split into (authorized, unauthorized) by ``name(item)``, order kept."""
    items = list(items)
    allowed = filter_authorized(ctx, operation, resource_type, (name(i) for i in items))
    return [i for i in items if name(i) in allowed], [i for i in items if name(i) not in allowed]


def merge_refused(count: int, answered: Iterable[T], refused: Mapping[int, T]) -> list[T]:
    """The answers to ``count`` entries in request order: ``refused[i]`` for the refused ones,
    the next of ``answered`` (the answers to the others, in order) for the rest."""
    rest = iter(answered)
    merged = [refused[i] if i in refused else next(rest) for i in range(count)]
    if next(rest, None) is not None:
        raise RuntimeError("more answers than entries left to answer")
    return merged


async def answer_permitted(
    items: Sequence[T],
    permitted: Callable[[T], bool],
    answer: Callable[[list[T]], Awaitable[list[R]]],
    refusal: Callable[[T], R],
    slices: TimeSlices | None = None,
) -> list[R]:
    """The answers to ``items`` in request order, in time slices: ``answer`` gets the permitted
    ones (in order) and answers each of them; every other item is answered ``refusal(item)``."""
    allowed = [item async for item in sliced(items, slices) if permitted(item)]
    answered = iter(await answer(allowed))
    return [
        next(answered) if permitted(item) else refusal(item) async for item in sliced(items, slices)
    ]


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """Kafka's bitfield of the operations on ``name`` the principal may do."""
    field = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if ctx.authorize(operation, resource_type, name):
            field |= 1 << int(operation)
    return field


# Config resources whose configs are the cluster's to guard (Kafka's ConfigHelper).
_CLUSTER_CONFIG_RESOURCES = frozenset(
    {ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER, ConfigResourceType.CLIENT_METRICS}
)


def config_refusal(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> ErrorCode | None:
    """Why the principal may not DESCRIBE_CONFIGS / ALTER_CONFIGS a config resource
    (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED), or None; other types are the admin's to refuse."""
    if resource_type == ConfigResourceType.TOPIC:
        if not ctx.authorize(operation, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed
    elif resource_type in _CLUSTER_CONFIG_RESOURCES and not authorize_cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed
    return None


def require_cluster_action(
    ctx: RequestContext, request: Any, error_response: Callable[[Any, ErrorCode], Any]
) -> Any | None:
    """None if the principal has CLUSTER_ACTION; else the refusal of the whole request
    (CLUSTER_AUTHORIZATION_FAILED, Kafka's ``authorizeClusterOperation``), logged."""
    if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return None
    log.warning(
        "refusing %s from %s (principal %s): CLUSTER_ACTION on the cluster is not allowed",
        type(request).__name__,
        ctx.host or "?",
        ctx.principal,
    )
    return error_response(request, ErrorCode.cluster_authorization_failed)
