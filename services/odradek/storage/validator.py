"""Kafka's LogValidator: what a record set must satisfy before a log takes it.

``validate_records`` judges a record set (one or more batches, as a producer, a coordinator or a
leader sent it) against a topic's configuration and returns what the log should write:

- every batch whole and intact (length, magic, CRC32C: ``batch.validate_batch``);
- size limits: each batch within ``max.message.bytes``, the set within ``segment.bytes``;
- producer rules for batches that did not come from replication (counts against offset deltas,
  one batch per idempotent request, no control batches from clients);
- record-level rules only where the topic asks for them: a key on every record of a compacted
  topic, timestamps within ``message.timestamp.*.max.ms``, re-encoding for ``compression.type``;
- ``message.timestamp.type=LogAppendTime`` stamps every batch with the broker's time.

Nothing here touches a log or its files: the result depends only on the bytes, the configuration
and the time passed in, so validation may run on any thread (the broker runs large or compressed
record sets on a worker thread, off its event loop) and the log then appends the result on its
own thread (``Log.append_validated``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.config.keys import LONG_MAX
from odradek.config.topic import TopicConfig
from odradek.errors import InvalidRecordError, InvalidTimestampError, RecordTooLargeError
from odradek.storage.batch import (
    BatchHeader,
    check_producer_batch,
    iter_batches,
    set_log_append_time,
)
from odradek.storage.compression import Compression
from odradek.storage.records import decode_records, reencode_batch

__all__ = ["AppendOrigin", "ValidatedRecords", "validate_records"]


class AppendOrigin:
    """Who is appending: decides which rules apply and whether offsets are assigned."""

    CLIENT = "client"  # a producer: assign offsets, producer rules, no control batches
    COORDINATOR = "coordinator"  # the broker's own coordinators: may write control batches
    REPLICATION = "replication"  # a follower copying its leader: offsets kept as they are


@dataclass(frozen=True, slots=True)
class ValidatedRecords:
    """A record set that passed validation: the bytes to write and each batch's header.

    ``records`` is the caller's buffer unless validation had to rewrite it (re-encoding,
    LogAppendTime); ``batches`` are ``(position in records, header)`` in order.
    """

    records: memoryview
    batches: tuple[tuple[int, BatchHeader], ...]
    origin: str
    log_append_time_ms: int = -1  # -1 unless message.timestamp.type=LogAppendTime

    @property
    def size_in_bytes(self) -> int:
        return len(self.records)


EMPTY = memoryview(b"")


def validate_records(
    records: bytes | bytearray | memoryview,
    config: TopicConfig,
    *,
    origin: str = AppendOrigin.CLIENT,
    now_ms: int,
) -> ValidatedRecords:
    """Validate ``records`` for a log with ``config``; see the module docstring.

    Raises ``CorruptRecordError``, ``InvalidRecordError``, ``RecordTooLargeError`` or
    ``InvalidTimestampError``; an empty record set is valid and holds no batches.
    """
    view = memoryview(records).cast("B")
    if not view:
        return ValidatedRecords(EMPTY, (), origin)
    batches = list(iter_batches(view))
    _check_batches(batches, len(view), config, origin)
    if _needs_record_validation(config):
        view = _validate_records(view, batches, config, now_ms)
        batches = list(iter_batches(view))
    log_append_time_ms = -1
    if config.log_append_time and origin != AppendOrigin.REPLICATION:
        log_append_time_ms = now_ms
        view = memoryview(bytearray(view))
        for position, _ in batches:
            set_log_append_time(view, position, log_append_time_ms)
        batches = [(p, BatchHeader.parse(view, p)) for p, _ in batches]
    return ValidatedRecords(view, tuple(batches), origin, log_append_time_ms)


def _check_batches(
    batches: list[tuple[int, BatchHeader]], total_bytes: int, config: TopicConfig, origin: str
) -> None:
    if total_bytes > config.segment_bytes:
        raise RecordTooLargeError(
            f"record set of {total_bytes} bytes exceeds segment.bytes ({config.segment_bytes})"
        )
    for _, header in batches:
        if header.size_in_bytes > config.max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
                f"({config.max_message_bytes})"
            )
        if origin == AppendOrigin.REPLICATION:
            continue
        check_producer_batch(header)
        if len(batches) > 1 and header.has_producer_id:
            raise InvalidRecordError(
                "a record set from an idempotent producer must hold exactly one batch"
            )
        if header.is_control and origin == AppendOrigin.CLIENT:
            raise InvalidRecordError("clients may not write control batches")


def _needs_record_validation(config: TopicConfig) -> bool:
    return (
        config.compact
        or config.compression_type != "producer"
        or (
            not config.log_append_time
            and (
                config.message_timestamp_before_max_ms != LONG_MAX
                or config.message_timestamp_after_max_ms != LONG_MAX
            )
        )
    )


def _validate_records(
    view: memoryview, batches: list[tuple[int, BatchHeader]], config: TopicConfig, now_ms: int
) -> memoryview:
    """The slow path: look inside batches for rules a header cannot show.

    Taken only when the topic asks for it: compacted topics need a key on every record,
    timestamp bounds need every record's timestamp, and ``compression.type`` other than
    ``producer`` re-encodes batches sent with another codec (as Kafka does).
    """
    target = (
        None
        if config.compression_type == "producer"
        else Compression.from_name(config.compression_type)
    )
    earliest = now_ms - config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    check_time = not config.log_append_time
    parts: list[bytes | memoryview] = []
    changed = False
    for position, header in batches:
        data = view[position : position + header.size_in_bytes]
        if header.is_control:
            parts.append(data)
            continue
        records = decode_records(data)
        for record in records:
            if config.compact and record.key is None:
                raise InvalidRecordError(
                    f"compacted topic cannot accept a record without a key "
                    f"(offset delta {record.offset - header.base_offset})"
                )
            if check_time and not earliest <= record.timestamp <= latest:
                raise InvalidTimestampError(
                    f"record timestamp {record.timestamp} is outside "
                    f"[{earliest}, {latest}] allowed by message.timestamp.*.max.ms"
                )
        if target is not None and target != header.compression:
            data = reencode_batch(header, records, target)
            changed = True
        parts.append(data)
    return memoryview(b"".join(parts)) if changed else view
