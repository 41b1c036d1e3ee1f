"""Kafka's LogValidator: what a record set must satisfy before a log takes it.

``validate_records`` judges a record set (one or more batches, as a producer, a coordinator or a
leader sent it) against a topic's configuration and returns what the log should write:

- every batch whole and intact (length, magic, CRC32C: ``batch.validate_batch``);
- size limits: each batch within ``max.message.bytes``, the set within ``segment.bytes``;
- producer rules for batches that did not come from replication (at least one record, the count
  agreeing with ``last_offset_delta``, one batch per idempotent request, no control batches from
  clients). A client's transactional batch is taken as Kafka takes it without KIP-890's
  verification: the producer state begins its transaction at the batch, and the transaction
  coordinator ends it with a marker (one that no coordinator knows of, a hanging transaction,
  holds the last stable offset until it is aborted by hand: ``odradek transactions``). A
  transactional batch without a producer id is no transaction to the log, as in Kafka;
- the records inside every batch, from every origin, as Kafka's ``DefaultRecord`` reader reads
  them (``walker``): exactly ``records_count`` records, each exactly as long as its length says,
  nothing after the last. Offset deltas are 0..n-1 in a batch from a producer or a coordinator;
  a replicated batch may have the gaps compaction leaves (strictly increasing deltas, at most
  ``last_offset_delta``), but a follower never stores what consumers could not decode.
  Compressed batches are decompressed in bounded pieces to be walked, and refused past
  ``MAX_DECOMPRESSED_BYTES``;
- the topic's record rules, from what the walk found: a key on every record of a compacted
  topic, timestamps within ``message.timestamp.*.max.ms`` (Kafka skips records without a
  timestamp, -1, and so does this); then re-encoding for ``compression.type``;
- a CreateTime batch whose header claims another ``max_timestamp`` than its records' largest is
  stored with the true one, as Kafka's validator sets it: retention and the time index judge a
  segment by that field, so a lying producer could otherwise keep a segment forever or have it
  deleted at once;
- ``message.timestamp.type=LogAppendTime`` stamps every batch with the broker's time.

Errors are Kafka's: the record format broken is INVALID_RECORD (Kafka's reader throws
``InvalidRecordException``), damage the CRC or a codec finds is CORRUPT_MESSAGE, a timestamp out of
bounds INVALID_TIMESTAMP, a batch too large MESSAGE_TOO_LARGE. One deliberate difference: Kafka
rewrites a compressed producer batch whose offset deltas are not 0..n-1, and stores an uncompressed
one as it came; this broker never rewrites producer bytes for that, so it refuses such a batch.

Nothing here touches a log or its files: the result depends only on the bytes, the configuration
and the time passed in, so validation may run on any thread (the broker runs large or compressed
record sets on a worker thread, off its event loop) and the log then appends the result on its
own thread (``Log.append_validated``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.config.keys import LONG_MAX
from odradek.config.topic import TopicConfig
from odradek.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from odradek.storage.batch import (
    NO_TIMESTAMP,
    BatchHeader,
    check_producer_batch,
    iter_batches,
    set_log_append_time,
    set_max_timestamp,
)
from odradek.storage.compression import MAX_DECOMPRESSED_BYTES, Compression
from odradek.storage.records import decode_records, reencode_batch
from odradek.storage.walker import RecordWalker, walk_batch

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
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> ValidatedRecords:
    """Validate ``records`` for a log with ``config``; see the module docstring.

    ``max_decompressed_bytes`` bounds what one compressed batch may expand to; a caller may pass
    a smaller bound to try cheap validation first (``DecompressionLimitError`` then says so).

    Raises ``CorruptRecordError``, ``InvalidRecordError``, ``RecordTooLargeError`` or
    ``InvalidTimestampError``; an empty record set is valid and holds no batches.
    """
    view = memoryview(records).cast("B")
    if not view:
        return ValidatedRecords(EMPTY, (), origin)
    batches = list(iter_batches(view))
    _check_batches(batches, len(view), config, origin)
    max_timestamps: list[tuple[int, int]] = []  # (position, the records' true maximum)
    for position, header in batches:
        walker = walk_batch(
            view,
            position,
            header,
            exact_offsets=origin != AppendOrigin.REPLICATION,
            max_decompressed_bytes=max_decompressed_bytes,
        )
        if not header.is_control:
            _check_record_rules(walker, position, header, config, now_ms)
            if origin != AppendOrigin.REPLICATION and not header.is_log_append_time:
                actual = walker.max_timestamp if walker.max_timestamp_record >= 0 else NO_TIMESTAMP
                if actual != header.max_timestamp:
                    max_timestamps.append((position, actual))
    if max_timestamps:  # a header claiming another maximum than its records': store the truth
        view = memoryview(bytearray(view))
        for position, actual in max_timestamps:
            set_max_timestamp(view, position, actual)
        batches = list(iter_batches(view))
    if _needs_reencoding(config, batches):
        view = _reencode(view, batches, Compression.from_name(config.compression_type))
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
        check_producer_batch(header, from_coordinator=origin == AppendOrigin.COORDINATOR)
        if len(batches) > 1 and header.has_producer_id:
            raise InvalidRecordError(
                "a record set from an idempotent producer must hold exactly one batch"
            )
        if header.is_control and origin == AppendOrigin.CLIENT:
            raise InvalidRecordError("clients may not write control batches")


def _check_record_rules(
    walker: RecordWalker, position: int, header: BatchHeader, config: TopicConfig, now_ms: int
) -> None:
    """The topic's rules on the records of one batch, judged from what its walk found."""
    if config.compact and walker.null_key_record >= 0:
        raise InvalidRecordError(
            f"compacted topic cannot accept a record without a key (record "
            f"{walker.null_key_record} of the batch at position {position})"
        )
    before_ms = config.message_timestamp_before_max_ms
    after_ms = config.message_timestamp_after_max_ms
    if config.log_append_time or (before_ms == LONG_MAX and after_ms == LONG_MAX):
        return
    if header.is_log_append_time:  # every record's timestamp is the batch's (Kafka's rule)
        timestamps = [(header.max_timestamp, 0)] if header.max_timestamp != NO_TIMESTAMP else []
    else:
        timestamps = [
            (walker.min_timestamp, walker.min_timestamp_record),
            (walker.max_timestamp, walker.max_timestamp_record),
        ]
    earliest, latest = now_ms - before_ms, now_ms + after_ms
    for timestamp, record in timestamps:
        if record >= 0 and not earliest <= timestamp <= latest:
            raise InvalidTimestampError(
                f"record timestamp {timestamp} (record {record} of the batch at position "
                f"{position}) is outside [{earliest}, {latest}] allowed by "
                f"message.timestamp.*.max.ms"
            )


def _needs_reencoding(config: TopicConfig, batches: list[tuple[int, BatchHeader]]) -> bool:
    if config.compression_type == "producer":
        return False
    target = Compression.from_name(config.compression_type)
    return any(not h.is_control and h.compression != target for _, h in batches)


def _reencode(
    view: memoryview, batches: list[tuple[int, BatchHeader]], target: Compression
) -> memoryview:
    """Re-encode batches sent with another codec than ``compression.type`` (as Kafka does).

    Only after every batch passed its walk, so the records decode.
    """
    parts: list[bytes | memoryview] = []
    for position, header in batches:
        data = view[position : position + header.size_in_bytes]
        if not header.is_control and header.compression != target:
            data = reencode_batch(header, decode_records(data), target)
        parts.append(data)
    return memoryview(b"".join(parts))
