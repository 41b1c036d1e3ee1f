"""Client admin requests that only the controller decides, forwarded to it unchanged.

A broker takes AlterPartitionReassignments and ListPartitionReassignments from clients on its
client listeners and sends them, at the client's version, to the active controller
(``ControllerLink``); the controller's answer goes back as it is. The wait is the request's own
``timeout_ms``, bounded to [``FORWARD_TIMEOUT_S_MIN``, ``FORWARD_TIMEOUT_S_MAX``]. No active
controller within it answers REQUEST_TIMED_OUT (retriable); a broker without a link to a
controller (one run without a cluster) answers NOT_CONTROLLER. Runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.controller_link import ControllerUnavailableError
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S_MIN = 1.0
FORWARD_TIMEOUT_S_MAX = 60.0

Refuse = Callable[[ErrorCode, str], Any]


def forward_timeout_s(request: Any) -> float:
    timeout = getattr(request, "timeout", None)
    wanted_s = timeout.total_seconds() if timeout is not None else FORWARD_TIMEOUT_S_MAX
    return min(max(wanted_s, FORWARD_TIMEOUT_S_MIN), FORWARD_TIMEOUT_S_MAX)


async def forward(ctx: RequestContext, request: Any, refuse: Refuse) -> Any:
    """The controller's answer to ``request``, or ``refuse(error, message)``."""
    link = ctx.broker.controller
    if link is None:
        return refuse(ErrorCode.not_controller, "This broker has no link to a controller.")
    try:
        return await link.send(request, timeout_s=forward_timeout_s(request))
    except ControllerUnavailableError as e:
        log.warning("forwarding %s: %s", type(request).__name__, e)
        return refuse(ErrorCode.request_timed_out, f"No active controller answered: {e}")
