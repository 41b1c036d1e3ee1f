"""The brokers' answers to the controller's requests, decoded at the edge (``channel``).

The channel calls ``on_response(broker_id, response)`` with every answer it reads
(``ControllerChannels.on_response``); a LeaderAndIsr answer becomes each partition's error, by
topic id (``log_dir_events.PartitionError``), which the controller judges as an event
(``Controller.leader_and_isr_answered``: a KAFKA_STORAGE_ERROR is a replica on a failed log dir).
Other answers need nothing of the controller. Called on the controller's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from odradek.controller.log_dir_events import PartitionError
from odradek.protocol.apis import ApiKey

if TYPE_CHECKING:
    from odradek.controller.controller import Controller


def leader_and_isr_errors(response: Any) -> list[PartitionError]:
    """Each partition's error code in a LeaderAndIsr answer, in answer order (read as an
    ``ErrorCode`` inside the event, where an unknown one fails that event only)."""
    return [
        (topic.topic_id, int(partition.partition_index), int(partition.error_code))
        for topic in response.topics
        for partition in topic.partition_errors
    ]


def on_response(controller: Controller) -> Callable[[int, Any], None]:
    """The channel's ``on_response`` for ``controller``."""

    def answered(broker_id: int, response: Any) -> None:
        if getattr(response, "__api_key__", None) == ApiKey.LEADER_AND_ISR:
            controller.leader_and_isr_answered(broker_id, leader_and_isr_errors(response))

    return answered
