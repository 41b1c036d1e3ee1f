"""The answer a controller decision gives when it refuses a whole request.

Every typed ``Controller`` method (AlterPartition, ElectLeaders, ControlledShutdown, the
reassignment APIs) answers either its domain result or ``Refused(error)``: NOT_CONTROLLER from a
controller that is not active (or stepped down while the request waited), UNKNOWN_SERVER_ERROR
from a decision that failed, or the API's own whole-request error (STALE_BROKER_EPOCH,
BROKER_NOT_AVAILABLE). The listener's handlers (``controller.handlers``) turn it into the API's
error response (Kafka's ``getErrorResponse``). An immutable value: any task may hold one.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Refused:
    """The whole request is refused with ``error``."""

    error: ErrorCode
