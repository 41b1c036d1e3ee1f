"""AlterPartitionReassignments (45, v0-1, KIP-455): start, replace or cancel reassignments.

Clients send it to any broker, which forwards it to the controller's listener unchanged
(``broker.handlers.alter_partition_reassignments``). Per partition, a target replica list or
null (cancel); v1's ``allow_replication_factor_change`` (KIP-860) false refuses a target whose
length differs from the original replicas' count, and its response echoes the flag (v0 cannot
say, and may change it). ``timeout_ms`` is not waited on: the answer comes once the controller
has started (or refused) each reassignment, as Kafka's ZooKeeper-mode controller. The rules
(a partition named twice is INVALID_REQUEST, both entries) are ``Controller
.alter_partition_reassignments``' and ``reassignment``'s.

The partitions are read and answered in time slices (``time_slices``): a forwarded request may
name millions, and the controller's loop must stay free to elect leaders meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from odradek.common.partitions import TopicPartition
from odradek.controller.reassignment import Result, Target
from odradek.controller.refused import Refused
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.time_slices import sliced

if TYPE_CHECKING:
    from odradek.controller.controller import Controller

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
VERSIONS = (0, 1)
NO_THROTTLE = timedelta(0)


async def handle(controller: Controller, request: Any) -> Any:
    answer = await controller.alter_partition_reassignments(
        await wanted_in_slices(request),
        allow_replication_factor_change=allow_replication_factor_change(request),
    )
    if isinstance(answer, Refused):
        return error_response(request, answer.error)
    return await alter_response_in_slices(request, answer)


def _element(cls: type[Any], name: str) -> type[Any]:
    return cls.__dataclass_fields__[name].type.__args__[0]


def _build(cls: type[Any], **values: Any) -> Any:
    fields = cls.__dataclass_fields__
    return cls(**{k: v for k, v in values.items() if k in fields})


def _wanted(request: Any) -> Iterator[tuple[TopicPartition, Target]]:
    for topic in request.topics:
        for p in topic.partitions:
            target = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            yield (str(topic.name), int(p.partition_index)), target


def wanted(request: Any) -> list[tuple[TopicPartition, Target]]:
    """Each partition of the request with its target replicas (None: cancel), in order."""
    return list(_wanted(request))


async def wanted_in_slices(request: Any) -> list[tuple[TopicPartition, Target]]:
    """``wanted``, in time slices (``time_slices``): for the controller's loop."""
    return [item async for item in sliced(_wanted(request))]


def allow_replication_factor_change(request: Any) -> bool:
    """v1's flag (KIP-860); v0 cannot say, and may change it."""
    return bool(getattr(request, "allow_replication_factor_change", True))


async def alter_response_in_slices(request: Any, results: list[Result]) -> Any:
    """``alter_response`` of decided partitions, built in time slices (``time_slices``)."""
    response_type = schemas.response_schema(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, request.__version__
    )
    topic_type = _element(response_type, "responses")
    partition_type = _element(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    async for (topic, partition), code, text in sliced(results):
        by_topic.setdefault(topic, []).append(
            partition_type(partition_index=partition, error_code=code, error_message=text)
        )
    return _response(request, response_type, topic_type, by_topic, ErrorCode.none, None)


def _response(
    request: Any,
    response_type: type[Any],
    topic_type: type[Any],
    by_topic: dict[str, list[Any]],
    error: ErrorCode,
    message: str | None,
) -> Any:
    return _build(
        response_type,
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=allow_replication_factor_change(request),
        error_code=error,
        error_message=message,
        responses=tuple(
            topic_type(name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


def alter_response(
    request: Any,
    results: list[Result],
    error: ErrorCode = ErrorCode.none,
    message: str | None = None,
) -> Any:
    response_type = schemas.response_schema(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, request.__version__
    )
    topic_type = _element(response_type, "responses")
    partition_type = _element(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code, text in results:
        by_topic.setdefault(topic, []).append(
            partition_type(partition_index=partition, error_code=code, error_message=text)
        )
    return _response(request, response_type, topic_type, by_topic, error, message)


def error_response(request: Any, error: ErrorCode) -> Any:
    """The whole request refused (NOT_CONTROLLER, a failure): every partition gets ``error``."""
    return alter_response(
        request, [(tp, error, None) for tp, _ in wanted(request)], error, error.name
    )
