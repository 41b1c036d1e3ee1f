"""The group coordinator's errors: each one is an answer, a Kafka error code with a message.

``GroupError`` is raised by an operation on a group (unknown member, stale generation, fenced
instance id, ...) before it changed anything; the handler answers with its code. The runtime
raises ``CoordinatorNotAvailableError`` & co. when the shard of ``__consumer_offsets`` that owns
a group is not here, not loaded yet, or could not write.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "GroupError",
    "NotCoordinatorError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "coordinator_error_of",
]


class GroupError(OdradekError):
    """An answer with ``code`` (one of Kafka's group or offset error codes)."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or code.name)
        self.error_code = code


class NotCoordinatorError(OdradekError):
    """This broker does not lead the group's ``__consumer_offsets`` partition (any more)."""

    error_code = ErrorCode.not_coordinator


class CoordinatorLoadInProgressError(OdradekError):
    """The partition is being loaded: its groups are not known yet; retry."""

    error_code = ErrorCode.coordinator_load_in_progress


class CoordinatorNotAvailableError(OdradekError):
    """``__consumer_offsets`` is missing, leaderless, or a write could not be replicated."""

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
    if isinstance(error, (GroupError, NotCoordinatorError, CoordinatorLoadInProgressError)):
        return error
    code = error.error_code if isinstance(error, OdradekError) else ErrorCode.unknown_server_error
    mapped = _WRITE_ERRORS.get(code, code)
    if mapped == ErrorCode.not_coordinator:
        return NotCoordinatorError(str(error))
    if mapped == ErrorCode.coordinator_not_available:
        return CoordinatorNotAvailableError(str(error))
    return GroupError(mapped, str(error))
