"""Spark reads and writes Odradek topics: a PySpark data source with the Kafka source's contract.

``odradek.spark.register(spark)`` registers the data source under the name ``odradek``; then
``spark.read.format("odradek")``, ``spark.readStream``, ``df.write`` and ``df.writeStream`` take
the options and give the schema of Spark's own Kafka source (docs/spark.md). The name cannot be
``kafka``: Spark 4 reserves it for its JVM connector and refuses to register a Python source under
it (``DATA_SOURCE_ALREADY_EXISTS``), whether or not the connector's jar is on the class path.

The driver plans (topics, partitions, offset ranges); executors import this package and read or
write with confluent-kafka. Modules:

- ``source``        the ``DataSource`` Spark sees: schema, and which reader or writer to make
- ``schema``        the Kafka source's columns
- ``client_config`` ``kafka.*`` options -> the confluent-kafka client's configuration
- reading: ``read_options``, ``offsets``, ``ranges``, ``batch_read``, ``stream_read``,
  ``partition_read``
- writing: ``write_options``, ``batch_write``, ``stream_write``, ``producing``
- ``jobs``          what the job scripts in spark/ share: their session, ``--kafka`` settings
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "register"]

FORMAT = "odradek"


def register(spark: SparkSession) -> None:
    """Make ``format("odradek")`` available in ``spark`` (idempotent within a session)."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
