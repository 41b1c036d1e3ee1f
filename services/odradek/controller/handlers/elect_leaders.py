"""ElectLeaders (43, v0-2), forwarded by a broker: preferred or unclean elections.

Reads the request in time slices into an ``ElectionAsked`` (its election type, the partitions
named, deduplicated, or None for every partition), asks ``Controller.elect_leaders`` (the rules
are ``leader_balance``'s) and answers each partition's outcome, by topic, in time slices; with a
null request the partitions that needed no election are left out. The request and response
forms are ``controller.elect_leaders``', which the broker shares to forward the request and
answer it. An unknown election type is INVALID_REQUEST for the whole request, as Kafka's
controller refuses it; a controller that is not active answers NOT_CONTROLLER first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.cluster import elect_leaders as el
from odradek.controller.refused import Refused
from odradek.errors import ErrorCode
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey

if TYPE_CHECKING:
    from odradek.controller.controller import Controller

API_KEY = ApiKey.ELECT_LEADERS
VERSIONS = SUPPORTED_VERSIONS[ApiKey.ELECT_LEADERS]


async def handle(controller: Controller, request: Any) -> Any:
    if not controller.active:
        return error_response(request, ErrorCode.not_controller)
    try:
        asked = await el.parse_in_slices(request)
    except el.InvalidElectionRequest as e:
        return await el.error_response_in_slices(request, ErrorCode.invalid_request, str(e))
    answer = await controller.elect_leaders(asked.election_type, asked.partitions)
    if isinstance(answer, Refused):
        return error_response(request, answer.error)
    return await el.build_response_in_slices(
        request.__version__, answer, all_partitions=asked.partitions is None
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return el.error_response(request, error)
