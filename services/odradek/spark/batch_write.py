"""``BatchWriter``: ``df.write.format("odradek")``, at-least-once, as Spark's Kafka sink.

Constructed on the driver, where the options and the DataFrame's columns are checked
(``write_options``) before any task runs; pickled to the tasks, each of which produces its
partition's rows with one idempotent producer and fails on any record not written
(``producing.write_records``). Spark allows Python data sources the modes Append and Overwrite
only; Overwrite is refused as Spark's Kafka sink refuses it, so writes say ``mode("append")``.

A failed job leaves the records its finished tasks wrote in the topic (a topic cannot be rolled
back), and a retried task writes its rows again: at-least-once, as Spark's Kafka sink.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from odradek.spark.write_options import refuse_overwrite, write_options

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BatchWriter"]

log = logging.getLogger(__name__)


class BatchWriter(DataSourceArrowWriter):
    """Writes a DataFrame's rows as records (see ``write_options`` for the columns)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        refuse_overwrite(overwrite)
        self.options = write_options(options, schema, streaming=False)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from odradek.spark.producing import write_records

        context = TaskContext.get()
        partition_id = context.partitionId() if context is not None else 0
        return write_records(
            self.options.producer_config,
            iterator,
            self.options.columns,
            self.options.topic,
            partition_id,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(getattr(message, "rows", 0) for message in messages)
        log.info("odradek write committed: %d rows from %d tasks", rows, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(getattr(message, "rows", 0) for message in messages)
        log.warning(
            "odradek write aborted: %d rows of finished tasks stay in the topic (records "
            "cannot be removed)",
            written,
        )
