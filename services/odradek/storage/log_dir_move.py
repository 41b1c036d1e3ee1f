"""Moving a replica's log to another log dir of the same broker (KIP-113): the future log.

A move copies the current log ``<topic>-<partition>`` into a *future* log in the destination
dir, named ``<topic>-<partition>.<unique id>-future`` (Kafka's name), while the current log keeps
serving; once the future log holds everything the current one does, it replaces it
(``LogManager.replace_current_with_future``) and the old one is renamed ``-delete`` and removed
later. The copy goes through the logs' own read and append paths, batch by batch, as the leader's
batches reach a follower (``AppendOrigin.REPLICATION``: offsets, epochs and producer state as in
the source), so the future log is a replica of the current one, not a file copy.

Invariants of a future log:
- its batches are a prefix of the current log's from the batch holding the current log start
  (``start_offset``); anything the current log truncated away (a follower diverging from its
  leader) is cut from the future log before the next copy (``align``), using the current log's
  truncation floor;
- it never serves a read or an append of a client and is not flushed, checkpointed, cleaned or
  retained by the manager's upkeep (it is not in ``LogManager.logs``); it becomes durable when the
  swap flushes it.

Threads: ``align`` and ``start_offset`` run on the current log's appending thread (the event
loop), reading its batch headers; ``copy_slice`` runs on a mover thread and appends to the future
log; the caller runs them one at a time for a given future log. Nothing here knows asyncio.
"""

from __future__ import annotations

from odradek.storage.append import LogAppendInfo
from odradek.storage.log import Log
from odradek.storage.segment import FileSlice
from odradek.storage.validator import AppendOrigin

WHOLE_LOG_REPLACED = -1  # the truncation floor of ``Log.truncate_fully_and_start_at``


def start_offset(current: Log) -> int:
    """Where a copy of ``current`` starts: the batch holding its log start offset (the log start
    may sit inside a batch after DeleteRecords; a replica keeps whole batches)."""
    return current.batch_start_at_or_below(current.log_start_offset)


def align(current: Log, future: Log) -> None:
    """Cut from ``future`` what ``current`` truncated away since the last call, and restart it
    at ``current``'s start if ``current`` no longer holds where it ends (retention, DeleteRecords,
    a replaced log)."""
    floor = current.take_truncation_floor()
    if floor is not None and floor < future.log_end_offset:
        if floor == WHOLE_LOG_REPLACED or floor <= future.log_start_offset:
            future.truncate_fully_and_start_at(start_offset(current))
        else:
            future.truncate_to(future.batch_start_at_or_below(floor))
    if future.log_end_offset < current.log_start_offset or (
        future.log_end_offset > current.log_end_offset
    ):
        future.truncate_fully_and_start_at(start_offset(current))


def copy_slice(future: Log, records: FileSlice) -> int:
    """Append ``records`` (read from the current log) to ``future`` as a replica appends its
    leader's batches; returns the bytes copied. A mover thread.

    Written through a duplicated descriptor (``writer_thread``), so a move cancelled meanwhile,
    whose future log's files are closed by its removal, can never have this write land in a
    file that reused the descriptor's number.
    """
    data = records.read_bytes()
    validated = future.validate(data, origin=AppendOrigin.REPLICATION)
    prepared = future.prepare_append(validated, writer_thread=True)
    if isinstance(prepared, LogAppendInfo):
        return 0
    try:
        future.write_prepared(prepared)
    finally:
        future.abandon(prepared)
    future.publish_prepared(prepared)
    return len(data)


def adopt_offsets(current: Log, future: Log) -> None:
    """Before the swap, with the two logs equal: the future log takes the current one's
    configuration, high watermark, log start and leader epochs (a new leader's epoch starts
    before its first batch, so the batches alone may not carry it). The appending thread."""
    future.update_config(current.config)
    future.update_high_watermark(current.high_watermark)
    if current.log_start_offset > future.log_start_offset:
        future.advance_log_start_offset(current.log_start_offset)
    latest = future.latest_epoch
    for entry in current.leader_epoch_cache.entries():
        if latest is None or entry.epoch > latest:
            future.assign_epoch_start_offset(entry.epoch, entry.start_offset)
