"""``StreamWriter``: ``df.writeStream.format("odradek")``, at-least-once or exactly-once.

By default a micro-batch is written as a batch write is (``producing.write_records``): a retried
task, or a batch replayed after a driver restart, writes its rows again. At-least-once, as Spark's
Kafka sink. Output modes: Append and Complete (every batch writes the whole result, as Spark's
Kafka sink does); Spark refuses Update for Python data sources.

With the option ``transactional=true`` each (micro-batch B, Spark partition P) is written in one
Kafka transaction (``producing.write_transactional``), and a reader with
``isolation.level=read_committed`` sees every output row exactly once:

- The writer of P has the transactional id ``odradek-spark-<queryId>-P`` and the consumer group
  ``odradek-spark-<queryId>-P`` (query id: ``sql.streaming.queryId``, kept in the checkpoint, so
  the same after a restart; batch id: ``streaming.sql.batchId``; both Spark's task-local
  properties). It makes a producer, calls ``init_transactions``, reads the group's committed
  offset, and if that says batch B is done (offset >= B + 1) writes nothing. Otherwise it
  produces its rows in a transaction and commits, in that same transaction, the offset B + 1 of
  the group (``send_offsets_to_transaction``): the data and the marker "B of P is done" become
  visible together or not at all.
- Task retry, speculative attempts, executor loss: ``init_transactions`` bumps the producer epoch
  of the id, so every earlier producer of P (a failed attempt, a zombie on a lost executor) is
  fenced (its produce and commit fail) and its open transaction is aborted. The marker is read
  only after that, so it is final: either an earlier attempt committed (marker seen: skip), or
  none did and none can any more (write). If a zombie calls ``init_transactions`` later, it fences
  the current attempt instead, which fails and is retried; at most one commit of (B, P) ever
  succeeds, because a commit needs the id's latest epoch and the marker check follows each epoch
  bump.
- Driver kill -9 and restart from the checkpoint: Spark replays the last batch B whose offsets
  are in the checkpoint's offset log but not in its commit log, with the same source offsets.
  Partitions whose marker says B is done skip it; the others write it. Batches before B are in
  the commit log and are not replayed.
- The driver's ``commit``/``abort`` have nothing to do but log: each partition's output is
  already committed or aborted by its writer.

Limits (what exactly-once here rests on):

- Deterministic output per batch and partition: the replay of B must put the same rows in the
  same Spark partition P as the first run (a Kafka or file source with the checkpoint's offsets,
  deterministic transformations, hash partitioning; not ``rand()``, ``current_timestamp()`` in the
  data, nondeterministic UDFs, or a changed number of partitions between the runs).
- The markers live as committed offsets of one group per writer partition, and the producer ids
  as transactional ids: a query stopped longer than ``offsets.retention.minutes`` or
  ``transactional.id.expiration.ms`` (7 days each by default) can duplicate its replayed batch.
- Readers must read with ``isolation.level=read_committed``; ``read_uncommitted`` also sees
  aborted attempts' records.
- An empty partition writes no transaction and no marker (nothing to duplicate).
- Each non-empty partition of each batch pays a transaction (about 5 round trips): size
  micro-batches (trigger interval, ``maxOffsetsPerTrigger``) so that this is small.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from odradek.spark.write_options import write_options

if TYPE_CHECKING:
    import pyarrow as pa

    from odradek.spark.producing import TaskIds

__all__ = ["StreamWriter", "task_ids"]

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def task_ids() -> TaskIds:
    """The running task's query id, batch id and partition (Spark's task-local properties)."""
    from odradek.spark.producing import TaskIds, WriteError

    context = TaskContext.get()
    if context is None:
        raise WriteError("a transactional write runs in a Spark task only")
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_id is None:
        raise WriteError(
            f"the task has no {QUERY_ID_PROPERTY}/{BATCH_ID_PROPERTY}: transactional writes need "
            "a micro-batch streaming query"
        )
    return TaskIds(query_id=query_id, batch_id=int(batch_id), partition_id=context.partitionId())


class StreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch's rows as records; ``transactional=true``: exactly-once."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        # overwrite is Complete mode: the whole result is appended each batch, as Spark's sink.
        self.options = write_options(options, schema, streaming=True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from odradek.spark.producing import write_records, write_transactional

        options = self.options
        if options.transactional:
            return write_transactional(
                options.producer_config, task_ids(), iterator, options.columns, options.topic
            )
        context = TaskContext.get()
        return write_records(
            options.producer_config,
            iterator,
            options.columns,
            options.topic,
            context.partitionId() if context is not None else 0,
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = sum(getattr(message, "rows", 0) for message in messages)
        skipped = sum(1 for message in messages if getattr(message, "skipped", False))
        log.info("odradek stream write: batch %d committed, %d rows", batchId, rows)
        if skipped:
            log.info(
                "batch %d: %d partition(s) were committed before and skipped", batchId, skipped
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.transactional:
            log.warning(
                "batch %d aborted: committed partitions stay, the replay skips them", batchId
            )
        else:
            log.warning("batch %d aborted: rows of finished tasks stay in the topic", batchId)
