"""AlterPartition (56, v2-3, KIP-497): a leader asks the controller to record its partition's ISR.

Decodes each partition of a v2 or v3 request into a ``ProposedIsr`` (v3's ``new_isr_with_epochs``
carries a broker epoch per ISR member, v2 none), asks ``Controller.alter_partition`` (the rules
are ``controller.alter_partition``'s), and answers each partition's result grouped by topic in
request order: the new ISR and the state znode's version as ``partition_epoch`` on success. A
whole-request refusal (NOT_CONTROLLER, STALE_BROKER_EPOCH) answers the top-level error with no
partitions.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from odradek.controller.alter_partition import PartitionResult, ProposedIsr
from odradek.controller.refused import Refused
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

if TYPE_CHECKING:
    from odradek.controller.controller import Controller

API_KEY = ApiKey.ALTER_PARTITION
VERSIONS = (2, 3)


async def handle(controller: Controller, request: Any) -> Any:
    answer = await controller.alter_partition(
        int(request.broker_id), int(request.broker_epoch), proposals(request)
    )
    if isinstance(answer, Refused):
        return error_response(request, answer.error)
    return build_response(request.__version__, ErrorCode.none, answer)


def proposals(request: Any) -> list[ProposedIsr]:
    """The partitions of a v2 or v3 request, in request order."""
    found = []
    for topic in request.topics:
        for p in topic.partitions:
            if request.__version__ >= 3:
                isr = tuple(int(b.broker_id) for b in p.new_isr_with_epochs)
                epochs: tuple[int, ...] | None = tuple(
                    int(b.broker_epoch) for b in p.new_isr_with_epochs
                )
            else:
                isr, epochs = tuple(int(b) for b in p.new_isr), None
            found.append(
                ProposedIsr(
                    topic_id=topic.topic_id or uuid.UUID(int=0),
                    partition_index=int(p.partition_index),
                    leader_epoch=int(p.leader_epoch),
                    new_isr=isr,
                    broker_epochs=epochs,
                    leader_recovery_state=int(p.leader_recovery_state),
                    partition_epoch=int(p.partition_epoch),
                )
            )
    return found


def build_response(version: int, error_code: ErrorCode, results: list[PartitionResult]) -> Any:
    """An AlterPartitionResponse of ``version``; partitions grouped by topic in request order."""
    response_type = schemas.response_schema(ApiKey.ALTER_PARTITION, version)
    topic_type = response_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for r in results:
        state = r.state
        by_topic.setdefault(r.topic_id, []).append(
            partition_type(
                partition_index=r.partition_index,
                error_code=r.error_code,
                leader_id=state.leader if state is not None else -1,
                leader_epoch=state.leader_epoch if state is not None else -1,
                isr=tuple(state.isr) if state is not None else (),
                leader_recovery_state=state.leader_recovery_state if state is not None else -1,
                partition_epoch=r.partition_epoch,
            )
        )
    return response_type(
        throttle_time=timedelta(0),
        error_code=error_code,
        topics=tuple(
            topic_type(topic_id=topic_id, partitions=tuple(partitions))
            for topic_id, partitions in by_topic.items()
        ),
    )


def error_response(request: Any, error_code: ErrorCode) -> Any:
    """The whole request refused with ``error_code`` (NOT_CONTROLLER, STALE_BROKER_EPOCH)."""
    return build_response(request.__version__, error_code, [])
