"""Client admin requests that only the controller decides, forwarded to it.

A broker takes AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders from
clients on its client listeners and sends them to the active controller (``ControllerLink``);
the reassignment requests go unchanged, at the client's version, and their answers go back as
they are (ElectLeaders adapts both, ``admin.leader_election``). The wait is the request's own
``timeout_ms``, bounded to [``FORWARD_TIMEOUT_S_MIN``, ``FORWARD_TIMEOUT_S_MAX``], unless the
caller sets it. No active controller within it answers REQUEST_TIMED_OUT (retriable); a broker
without a link to a controller (one run without a cluster) answers NOT_CONTROLLER. Runs on the
broker's event loop.

Each handler authorizes on this broker before it forwards, as Kafka's ZooKeeper-mode broker does
(ALTER on the cluster for reassignments and elections, DESCRIBE to list reassignments): an
unauthorized request never reaches the controller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.broker.controller_link import ControllerLink, ControllerUnavailableError
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S_MIN = 1.0
FORWARD_TIMEOUT_S_MAX = 60.0

Refuse = Callable[[ErrorCode, str], Any]


def forward_timeout_s(request: Any) -> float:
    timeout = getattr(request, "timeout", None)
    wanted_s = timeout.total_seconds() if timeout is not None else FORWARD_TIMEOUT_S_MAX
    return min(max(wanted_s, FORWARD_TIMEOUT_S_MIN), FORWARD_TIMEOUT_S_MAX)


async def forward(
    link: ControllerLink | None, request: Any, refuse: Refuse, *, timeout_s: float | None = None
) -> Any:
    """The controller's answer to ``request``, or ``refuse(error, message)``."""
    if link is None:
        return refuse(ErrorCode.not_controller, "This broker has no link to a controller.")
    if timeout_s is None:
        timeout_s = forward_timeout_s(request)
    try:
        return await link.send(request, timeout_s=timeout_s)
    except ControllerUnavailableError as e:
        log.warning("forwarding %s: %s", type(request).__name__, e)
        return refuse(ErrorCode.request_timed_out, f"No active controller answered: {e}")
