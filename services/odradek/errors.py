"""Odradek's two levels of errors.

Wire errors are Kafka's own error codes: ``ErrorCode`` is kio's enum, generated from Kafka's
message schemas, so a code (and whether it is retriable) never drifts from what clients expect.

Internal errors form one small tree under ``OdradekError``. Each class names the Kafka error code
it maps to, so a request handler turns any of them into a response with ``exc.error_code`` and
never needs a table of its own. Library errors are chained with ``raise ... from``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "OdradekError",
    "CorruptRecordError",
    "RecordTooLargeError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "OffsetOutOfRangeError",
    "InvalidConfigError",
    "KafkaStorageError",
    "UnknownTopicOrPartitionError",
    "NotLeaderOrFollowerError",
    "NotEnoughReplicasError",
    "InvalidRequiredAcksError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "NotEnoughReplicasAfterAppendError",
    "RequestTimedOutError",
    "LogDirNotFoundError",
    "ReplicaNotAvailableError",
]


class OdradekError(Exception):
    """Base of every error Odradek raises on purpose."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    @property
    def retriable(self) -> bool:
        return self.error_code.retriable


class CorruptRecordError(OdradekError):
    """A batch failed its CRC, has a wrong magic or length, or cannot be parsed."""

    error_code = ErrorCode.corrupt_message


class RecordTooLargeError(OdradekError):
    """A batch is larger than ``max.message.bytes`` (or a segment could ever hold)."""

    error_code = ErrorCode.message_too_large


class InvalidRecordError(OdradekError):
    """A batch is well formed but breaks a rule of the log (counts, deltas, null keys...)."""

    error_code = ErrorCode.invalid_record


class InvalidTimestampError(OdradekError):
    """A batch timestamp is outside ``message.timestamp.{before,after}.max.ms``."""

    error_code = ErrorCode.invalid_timestamp


class OffsetOutOfRangeError(OdradekError):
    """An offset is below the log start offset or beyond the log end (or high watermark)."""

    error_code = ErrorCode.offset_out_of_range


class InvalidConfigError(OdradekError):
    """A configuration key is unknown or its value is not valid."""

    error_code = ErrorCode.invalid_config


class KafkaStorageError(OdradekError):
    """The log directory holding a partition is offline after an I/O error."""

    error_code = ErrorCode.kafka_storage_error


class UnknownTopicOrPartitionError(OdradekError):
    """This broker has no log for the topic-partition."""

    error_code = ErrorCode.unknown_topic_or_partition


class NotLeaderOrFollowerError(OdradekError):
    """This broker does not lead the partition (clients refresh metadata and retry)."""

    error_code = ErrorCode.not_leader_or_follower


class NotEnoughReplicasError(OdradekError):
    """``acks=all`` with fewer in-sync replicas than ``min.insync.replicas``."""

    error_code = ErrorCode.not_enough_replicas


class InvalidRequiredAcksError(OdradekError):
    """``acks`` is not 0, 1 or -1."""

    error_code = ErrorCode.invalid_required_acks


class FencedLeaderEpochError(OdradekError):
    """A request carries a leader epoch older than the partition's."""

    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpochError(OdradekError):
    """A request carries a leader epoch newer than the partition's (this broker is behind)."""

    error_code = ErrorCode.unknown_leader_epoch


class NotEnoughReplicasAfterAppendError(OdradekError):
    """``acks=all``: written, but the ISR fell below ``min.insync.replicas`` before it was
    replicated; the producer retries (with idempotence, without duplicates)."""

    error_code = ErrorCode.not_enough_replicas_after_append


class RequestTimedOutError(OdradekError):
    """``acks=all``: the ISR did not replicate the append within the request's timeout."""

    error_code = ErrorCode.request_timed_out


class LogDirNotFoundError(OdradekError):
    """A log dir named in a request is not one of this broker's ``log.dirs``."""

    error_code = ErrorCode.log_dir_not_found


class ReplicaNotAvailableError(OdradekError):
    """The topic exists but this broker hosts no replica of the partition (yet)."""

    error_code = ErrorCode.replica_not_available
