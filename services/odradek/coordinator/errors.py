"""The errors both coordinators' runtime raises: each one is an answer, a Kafka error code with a
message.

The runtime (``coordinator.runtime``) raises ``NotCoordinatorError`` when the partition of the
internal topic that owns a key (a group id, a transactional id) is not led here (any more),
``CoordinatorLoadInProgressError`` while it is being loaded, and ``CoordinatorNotAvailableError``
when the topic is missing or a write could not be replicated. ``coordinator_error_of`` turns
whatever failed a write into the answer a client gets (Kafka's ``normalizeException``).
``CoordinatorError`` is an answer with any other code; the group coordinator's ``GroupError``
is one. Pure values; any thread.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "CoordinatorError",
    "NotCoordinatorError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "coordinator_error_of",
]


class CoordinatorError(OdradekError):
    """An answer with ``code`` (one of Kafka's coordinator error codes)."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or code.name)
        self.error_code = code


class NotCoordinatorError(OdradekError):
    """This broker does not lead the key's partition of the internal topic (any more)."""

    error_code = ErrorCode.not_coordinator


class CoordinatorLoadInProgressError(OdradekError):
    """The partition is being loaded: its state is not known yet; retry."""

    error_code = ErrorCode.coordinator_load_in_progress


class CoordinatorNotAvailableError(OdradekError):
    """The internal topic is missing, leaderless, or a write could not be replicated."""

    error_code = ErrorCode.coordinator_not_available


# Kafka's CoordinatorRuntime / GroupCoordinatorService.normalizeException: what a failed write
# of the coordinator tells the client (a produce error means nothing to a group member).
_WRITE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def coordinator_error_of(error: BaseException) -> OdradekError:
    """The error a client gets for a coordinator write that failed with ``error``."""
    if isinstance(error, (CoordinatorError, NotCoordinatorError, CoordinatorLoadInProgressError)):
        return error
    code = error.error_code if isinstance(error, OdradekError) else ErrorCode.unknown_server_error
    mapped = _WRITE_ERRORS.get(code, code)
    if mapped == ErrorCode.not_coordinator:
        return NotCoordinatorError(str(error))
    if mapped == ErrorCode.coordinator_not_available:
        return CoordinatorNotAvailableError(str(error))
    return CoordinatorError(mapped, str(error))
