"""The ``DataSource`` Spark sees: the Kafka source's schema and options, under ``odradek``.

Spark makes one instance per read or write on the driver and pickles the readers and writers it
returns to the executors, so everything they carry is plain data (options, plans), never a client.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.spark import FORMAT
from odradek.spark.schema import read_schema

__all__ = ["OdradekDataSource"]


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {name!r} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


class OdradekDataSource(DataSource):
    """Reads and writes topics; see docs/spark.md for the options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return read_schema(_flag(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        from odradek.spark.batch_read import BatchReader

        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from odradek.spark.stream_read import StreamReader

        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.batch_write import BatchWriter

        return BatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.stream_write import StreamWriter

        return StreamWriter(self.options, schema, overwrite)
