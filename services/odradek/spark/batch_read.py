"""``spark.read.format("odradek")``: the batch reader Spark pickles to its executors.

On the driver (``__init__``, ``partitions``): the options are validated, the subscription's
partitions listed and the starting and ending offsets resolved once (``offsets.OffsetReader``),
then cut into Spark input partitions (``ranges``): one per topic partition, or several per large
partition with ``minPartitions`` / ``maxRecordsPerPartition``. In the executors (``read``): one
range -> Arrow batches (``partition_read.read_range``). The reader carries only plain data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from odradek.spark.offsets import OffsetReader
from odradek.spark.partition_read import ReadSettings, arrow_schema, read_range
from odradek.spark.ranges import OffsetRange, plan_ranges, split_ranges
from odradek.spark.read_options import OptionError, ReadOptions, parse_read_options
from odradek.spark.schema import read_schema

__all__ = ["BatchReader", "RangePartition", "check_schema", "plan_batch"]


class RangePartition(InputPartition):
    """One Spark task's input: an offset range of one topic partition (``None``: nothing)."""

    def __init__(self, offset_range: OffsetRange | None) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def plan_batch(options: ReadOptions) -> list[OffsetRange]:
    """The ranges a batch read covers, split into tasks; resolved now, against the cluster."""
    if options.ending is None:
        raise ValueError("a batch read needs ending offsets")
    with OffsetReader.for_options(options) as reader:
        tps = reader.partitions(options.subscription)
        start = reader.resolve(options.starting, tps, starting=True)
        end = reader.resolve(options.ending, tps, starting=False)
    return split_ranges(
        plan_ranges(start, end), options.min_partitions, options.max_records_per_partition
    )


def check_schema(schema: StructType, options: ReadOptions) -> None:
    """Spark's Kafka source has a fixed schema: refuse a user-specified one that differs."""
    expected = read_schema(options.include_headers)
    if schema != expected:
        raise OptionError(
            "the Kafka source has a fixed schema and cannot be set with a custom one: "
            f"expected {expected.simpleString()}, got {schema.simpleString()}"
        )


class BatchReader(DataSourceReader):
    """Reads the options' offset ranges once; see docs/spark.md for the options."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._options = parse_read_options(options, streaming=False)
        check_schema(schema, self._options)
        self._settings = ReadSettings.from_options(self._options)

    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan_batch(self._options)
        # Spark needs at least one partition; an empty read is one empty task.
        return [RangePartition(r) for r in ranges] or [RangePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        offset_range = partition.offset_range  # type: ignore[attr-defined]
        if offset_range is None:
            return iter(())
        return read_range(
            offset_range, self._settings, arrow_schema(self._settings.include_headers)
        )
