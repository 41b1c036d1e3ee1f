"""ListPartitionReassignments (46, v0, KIP-455): the partitions being reassigned, with RS, AR, RR.

Every partition being reassigned (``topics`` null) or those named that are
(``Controller.list_partition_reassignments``); partitions named that are not moving (or do not
exist) are left out, as Kafka does, and duplicates are answered once. A request may name
millions of partitions (5M empty topic names fit in 35 MB), and the controller's loop must stay
free to elect leaders meanwhile: the controller reads the names lazily (no copy) and looks them
up in time slices (``reassignment.list_reassignments``), and the answer is built here in time
slices too (``time_slices``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from odradek.controller.refused import Refused
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.time_slices import TimeSlices, sliced

if TYPE_CHECKING:
    from odradek.controller.controller import Controller

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)
NO_THROTTLE = timedelta(0)


def _element(cls: type[Any], name: str) -> type[Any]:
    return cls.__dataclass_fields__[name].type.__args__[0]


async def handle(controller: Controller, request: Any) -> Any:
    named: Iterator[tuple[str, Sequence[int]]] | None = None
    if request.topics is not None:  # read lazily, in the event's time slices: no copy of 5M
        named = ((str(t.name), t.partition_indexes) for t in request.topics)
    answer = await controller.list_partition_reassignments(named)
    if isinstance(answer, Refused):
        return error_response(request, answer.error)
    slices = TimeSlices()
    response_type = schemas.response_schema(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, request.__version__
    )
    topic_type = _element(response_type, "topics")
    partition_type = _element(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    async for tp, assignment in sliced(answer, slices):
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


def error_response(request: Any, error: ErrorCode) -> Any:
    response_type = schemas.response_schema(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, request.__version__
    )
    return response_type(
        throttle_time=NO_THROTTLE, error_code=error, error_message=error.name, topics=()
    )
