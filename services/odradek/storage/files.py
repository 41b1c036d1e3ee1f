"""Every file and directory name of the storage engine, as Kafka spells them: the one home.

A log directory (one entry of ``log.dirs``) holds, as Kafka lays it out::

    recovery-point-offset-checkpoint   offsets below which each log is known to be on disk
    log-start-offset-checkpoint        each log's start offset
    cleaner-offset-checkpoint          each compacted log's first dirty offset
    replication-offset-checkpoint      each log's high watermark
    .kafka_cleanshutdown               present only between a clean shutdown and the next start
    <topic>-<partition>/               a partition's log (``common.topics.log_directory_name``)
    <topic>-<partition>.<hex>-delete/  a deleted log, its files removed in the background
    <topic>-<partition>.<hex>-future/  a copy being made from another log dir (KIP-113)

and a partition's directory holds::

    00000000000000001234.log           a segment's batches; 1234 is its base offset
    00000000000000001234.index         its sparse offset index (``index``)
    00000000000000001234.timeindex     its sparse time index (``index``)
    00000000000000001234.txnindex      its aborted transactions (``txn_index``)
    00000000000000001234.snapshot      the producer state at offset 1234 (``producer_state``)
    leader-epoch-checkpoint            where each leader epoch starts (``leader_epoch``)

plus, for a moment, a segment's four files with one more suffix: ``.deleted`` (left the log,
removed after ``file.delete.delay.ms``), ``.cleaned`` (the cleaner's output being written) and
``.swap`` (the cleaner's finished output, taking over from the segments it replaces). Loading
removes the first two and completes the third (``loader``).

The offset-to-file-name rule: an offset in 20 zero-padded decimal digits (the width of the
largest int64), so names sort as their offsets do. A partition directory's own name is the
shared kernel's (``odradek.common.topics``: the operator's CRD pattern is built from it too);
the names made from it for the ``-delete`` and ``-future`` directories are here. Names only:
nothing here touches the disk, and every function is pure (any thread).
"""

from __future__ import annotations

import uuid

from odradek.common.partitions import TopicPartition
from odradek.common.topics import log_directory_name, parse_log_directory_name

__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_MARKER",
    "DELETED_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "INDEX_SUFFIX",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "LOG_SUFFIX",
    "OFFSET_DIGITS",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SEGMENT_FILE_SUFFIXES",
    "SEGMENT_INDEX_SUFFIXES",
    "SNAPSHOT_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "delete_directory_name",
    "future_directory_name",
    "offset_file_name",
    "parse_future_directory_name",
    "snapshot_file_name",
]

# -- a log directory ----------------------------------------------------------------------

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

# -- a partition's directory --------------------------------------------------------------

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# The files of one segment, and those of them that are indexes of its ``.log``.
SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
SEGMENT_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Appended to a segment's file names while it is in transit (see the module docstring).
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

OFFSET_DIGITS = 20


def offset_file_name(offset: int, suffix: str) -> str:
    """``00000000000000001234<suffix>``: the name of a segment's file or of a snapshot."""
    return f"{offset:0{OFFSET_DIGITS}d}{suffix}"


def snapshot_file_name(offset: int) -> str:
    """The producer-state snapshot taken at ``offset``."""
    return offset_file_name(offset, SNAPSHOT_SUFFIX)


def delete_directory_name(log_directory: str) -> str:
    """``<topic>-<partition>.<32 hex digits>-delete``: a deleted log's directory, unique so a
    new log of the same partition may be created while the old one's files are removed."""
    return f"{log_directory}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def future_directory_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<32 hex digits>-future``, as Kafka names a future log's dir."""
    return f"{log_directory_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_directory_name(name: str) -> TopicPartition | None:
    """``orders-3.<hex>-future`` -> ("orders", 3); None for any other name."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32 or any(c not in "0123456789abcdef" for c in unique):
        return None
    return parse_log_directory_name(stem)
