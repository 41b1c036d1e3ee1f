"""The columns of Spark's Kafka source, which reads give and writes take.

``headers`` is present only with ``includeHeaders=true``, as in Spark: an array of
``(key string, value binary)`` structs in the record's order. ``timestampType`` is 0 for
CreateTime and 1 for LogAppendTime.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["HEADERS_TYPE", "read_schema"]

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

_COLUMNS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def read_schema(include_headers: bool) -> StructType:
    """The read schema, with ``headers`` last when asked for."""
    fields = list(_COLUMNS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)
