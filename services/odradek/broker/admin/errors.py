"""The admin APIs' errors, each with the Kafka error code a client gets for it.

Errors shared with the data path (``UnknownTopicOrPartitionError``, ``InvalidConfigError``...)
live in ``odradek.errors``; placement's (``InvalidPartitionsError``,
``InvalidReplicationFactorError``) in ``odradek.cluster.placement``; ZooKeeper's in
``odradek.zk.errors``. ``error_of`` turns any of them, or anything unexpected, into the
(code, message) pair a per-item answer carries.
"""

from __future__ import annotations

import logging

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "WRITE_ATTEMPTS_MAX",
    "AdminRequestError",
    "ConcurrentUpdateError",
    "CoordinatorNotAvailableError",
    "InvalidReplicaAssignmentError",
    "InvalidTopicError",
    "NoZooKeeperError",
    "PolicyViolationError",
    "ReassignmentInProgressError",
    "TopicDeletionDisabledError",
    "TopicExistsError",
    "error_of",
]

log = logging.getLogger(__name__)

# Compare-and-set rounds a ZooKeeper write may lose to concurrent writers (each loss means
# reading again and deciding again) before the request gets ConcurrentUpdateError.
WRITE_ATTEMPTS_MAX = 5


class AdminRequestError(OdradekError):
    """The request itself is wrong (Kafka's ``InvalidRequestException``): duplicates, nulls..."""

    error_code = ErrorCode.invalid_request


class InvalidTopicError(OdradekError):
    """The topic name breaks Kafka's rules, or the topic cannot be used as asked."""

    error_code = ErrorCode.invalid_topic_exception


class TopicExistsError(OdradekError):
    error_code = ErrorCode.topic_already_exists


class InvalidReplicaAssignmentError(OdradekError):
    """A manual assignment is malformed: uneven, duplicated, unknown brokers, holes."""

    error_code = ErrorCode.invalid_replica_assignment


class TopicDeletionDisabledError(OdradekError):
    """``delete.topic.enable=false``; DeleteTopics before v3 answers INVALID_REQUEST instead."""

    error_code = ErrorCode.topic_deletion_disabled


class ReassignmentInProgressError(OdradekError):
    error_code = ErrorCode.reassignment_in_progress


class PolicyViolationError(OdradekError):
    """E.g. DeleteRecords on a topic whose ``cleanup.policy`` does not include delete."""

    error_code = ErrorCode.policy_violation


class CoordinatorNotAvailableError(OdradekError):
    """No transaction coordinator yet; also producer ids while ZooKeeper cannot be reached."""

    error_code = ErrorCode.coordinator_not_available


class ConcurrentUpdateError(OdradekError):
    """A compare-and-set kept losing against other writers; the client may try again."""

    error_code = ErrorCode.request_timed_out


class NoZooKeeperError(OdradekError):
    """This broker runs without ZooKeeper (a test set-up): it cannot change the cluster."""


def error_of(exc: Exception, what: object) -> tuple[ErrorCode, str]:
    """The Kafka error code and message answering ``exc``; unexpected errors are logged, with
    ``what`` (formatted only then: a request may refuse a hundred thousand entries)."""
    if isinstance(exc, OdradekError):
        return exc.error_code, str(exc)
    log.exception("unexpected error in %s", what)
    return ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}"
