"""ControlledShutdown (7, v3): a broker about to stop asks the controller to move what it holds.

Decodes the sender's broker id and epoch, asks ``Controller.controlled_shutdown`` (the rules are
``controller.controlled_shutdown``'s) and answers the partitions the broker still leads
(``remaining_partitions``: empty, it may stop), or the whole-request error alone
(BROKER_NOT_AVAILABLE, STALE_BROKER_EPOCH, NOT_CONTROLLER).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from odradek.common.partitions import TopicPartition
from odradek.controller.refused import Refused
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import ControlledShutdownResponse, RemainingPartition

if TYPE_CHECKING:
    from odradek.controller.controller import Controller

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
VERSIONS = (3, 3)


async def handle(controller: Controller, request: Any) -> Any:
    answer = await controller.controlled_shutdown(int(request.broker_id), int(request.broker_epoch))
    if isinstance(answer, Refused):
        return response(answer.error)
    return response(ErrorCode.none, answer)


def response(error_code: ErrorCode, remaining: Iterable[TopicPartition] = ()) -> Any:
    return ControlledShutdownResponse(
        error_code=error_code,
        remaining_partitions=tuple(
            RemainingPartition(topic_name=topic, partition_index=index)
            for topic, index in remaining
        ),
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return response(error)
