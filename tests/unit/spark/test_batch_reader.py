"""The batch reader validates its options and schema on creation, before touching a cluster."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from odradek.spark.batch_read import BatchReader, RangePartition
from odradek.spark.ranges import OffsetRange
from odradek.spark.read_options import OptionError
from odradek.spark.schema import read_schema

OPTIONS = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}


def test_reader_and_partitions_pickle() -> None:
    reader = BatchReader({**OPTIONS, "includeheaders": "true"}, read_schema(True))
    assert pickle.loads(pickle.dumps(reader))._settings.include_headers
    part = pickle.loads(pickle.dumps(RangePartition(OffsetRange("t", 0, 1, 5))))
    assert part.offset_range == OffsetRange("t", 0, 1, 5)
    assert list(reader.read(RangePartition(None))) == []


def test_a_custom_schema_is_refused() -> None:
    with pytest.raises(OptionError, match="fixed schema"):
        BatchReader(OPTIONS, StructType([StructField("value", StringType())]))
    with pytest.raises(OptionError, match="fixed schema"):
        BatchReader(OPTIONS, read_schema(True))  # headers without includeHeaders


def test_bad_options_fail_on_creation() -> None:
    with pytest.raises(OptionError, match="'startingOffsets' can't be latest"):
        BatchReader({**OPTIONS, "startingoffsets": "latest"}, read_schema(False))
