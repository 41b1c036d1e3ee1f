"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on the wire (KIP-455).

Clients send them to any broker, which forwards them to the controller's listener unchanged
(``broker.handlers.alter_partition_reassignments``); the controller decides them as events
(``Controller.alter_partition_reassignments``, ``reassignment``). This module turns requests
into values and results into responses, at the request's version; it does no I/O.

- AlterPartitionReassignments v0-1: per partition, a target replica list or null (cancel). v1's
  ``allow_replication_factor_change`` (KIP-860) false refuses a target whose length differs from
  the original replicas' count with INVALID_REPLICATION_FACTOR; its response echoes the flag. A
  partition named twice in one request is refused (INVALID_REQUEST, both entries) rather than
  one of the two silently winning. ``timeout_ms`` is not waited on: the answer comes once the
  controller has started (or refused) each reassignment, as Kafka's ZooKeeper-mode controller.
- ListPartitionReassignments v0: every partition being reassigned (``topics`` null) or those
  named that are; each with RS, AR and RR. Partitions named that are not moving (or do not exist)
  are left out, as Kafka does. The look-up runs in time slices (``time_slices``): a request may
  name millions of partitions (5M empty topic names fit in 35 MB), and the controller's loop
  must stay free to elect leaders meanwhile. AlterPartitionReassignments' partitions are read,
  decided and answered in time slices too (``wanted_in_slices``, ``alter_response_in_slices``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from odradek.common.partitions import TopicPartition
from odradek.controller.model import ClusterModel
from odradek.controller.reassignment import Result, Target
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.time_slices import TimeSlices, sliced

NO_THROTTLE = timedelta(0)


def _element(cls: type[Any], name: str) -> type[Any]:
    return cls.__dataclass_fields__[name].type.__args__[0]


def _build(cls: type[Any], **values: Any) -> Any:
    fields = cls.__dataclass_fields__
    return cls(**{k: v for k, v in values.items() if k in fields})


# -- AlterPartitionReassignments -----------------------------------------------------------------


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


def alter_error_response(request: Any, error: ErrorCode) -> Any:
    """The whole request refused (NOT_CONTROLLER, a failure): every partition gets ``error``."""
    return alter_response(
        request, [(tp, error, None) for tp, _ in wanted(request)], error, error.name
    )


# -- ListPartitionReassignments ------------------------------------------------------------------


async def list_response(request: Any, model: ClusterModel) -> Any:
    """The partitions of ``request`` being reassigned, looked up in time slices (``time_slices``):
    a forwarded request may name millions of partitions, and this runs on the loop that elects
    leaders. Duplicates are answered once, as Kafka answers a set of partitions."""
    response_type = schemas.response_schema(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, request.__version__
    )
    topic_type = _element(response_type, "topics")
    partition_type = _element(topic_type, "partitions")
    slices = TimeSlices()
    chosen: dict[TopicPartition, None] = {}
    if request.topics is None:
        chosen = dict.fromkeys(model.reassigning_partitions())
    else:
        async for t in sliced(request.topics, slices):
            name = str(t.name)
            if name not in model.topics:  # unknown, or empty: nothing of it is moving
                continue
            async for index in sliced(t.partition_indexes, slices):
                tp = (name, int(index))
                if model.is_reassigning(tp):
                    chosen[tp] = None
    by_topic: dict[str, list[Any]] = {}
    async for tp in sliced(chosen, slices):
        assignment = model.assignment(tp)
        by_topic.setdefault(tp[0], []).append(
            partition_type(
                partition_index=tp[1],
                replicas=assignment.replicas,
                adding_replicas=assignment.adding,
                removing_replicas=assignment.removing,
            )
        )
    return response_type(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            topic_type(name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


def list_error_response(request: Any, error: ErrorCode) -> Any:
    response_type = schemas.response_schema(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, request.__version__
    )
    return response_type(
        throttle_time=NO_THROTTLE, error_code=error, error_message=error.name, topics=()
    )
