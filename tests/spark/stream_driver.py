"""A streaming query in a driver process of its own, for tests/spark/test_stream_read.py to kill.

Reads a topic with ``format("odradek")`` and appends ``(partition, offset, value)`` to a Parquet
sink with a checkpoint, ``trigger(availableNow=True)``, then exits 0. With ``--sink
foreach-batch`` each micro-batch is written by ``foreachBatch`` to ``<output>/batch=<id>``
(overwritten on a replay), and ``--hold-batch-0 PATH`` makes batch 0 touch PATH once written and
then wait (at most ``HOLD_MAX_S``) before Spark commits it, for a test to kill it there. The
test restarts the same query (``start_query``) in its own session on the checkpoint.
``--batch-delay-ms`` makes each micro-batch sleep in the executor, so that a kill lands inside a
batch. The test starts it in a process group of its own: the group holds the JVM that PySpark
starts, so one ``killpg`` stops both. Run with the environment's PYTHONPATH so that Spark's
workers import ``odradek.spark``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HOLD_MAX_S = 300.0  # a held batch 0 waits this long for the test's kill at most


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0)
    parser.add_argument("--batch-delay-ms", type=int, default=0)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--sink", choices=("parquet", "foreach-batch"), default="parquet")
    parser.add_argument("--hold-batch-0", default=None)
    return parser.parse_args(argv)


def start_query(spark, args: argparse.Namespace):
    """The query, in ``spark`` (this process's session, or the test's for the restart)."""
    from pyspark.sql.functions import udf

    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    frame = reader.load().select("partition", "offset", "value")
    # A plain Python UDF (mapInArrow would need pandas): a sleep per row, about --batch-delay-ms
    # per task of a full batch, so that batches take long enough to kill one.
    row_delay_s = args.batch_delay_ms / 1000 / max(1, args.max_offsets_per_trigger // 3)

    @udf("long", useArrow=False)
    def slow(offset):
        time.sleep(row_delay_s)
        return offset

    if args.sink == "foreach-batch":
        return (
            frame.writeStream.foreachBatch(lambda batch, batch_id: write(args, batch, batch_id))
            .option("checkpointLocation", args.checkpoint)
            .trigger(availableNow=True)
            .start()
        )
    return (
        frame.withColumn("offset", slow("offset"))
        .writeStream.format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def write(args: argparse.Namespace, batch, batch_id: int) -> None:
    """One micro-batch to ``<output>/batch=<id>``; batch 0 held if asked (see the docstring)."""
    batch.write.mode("overwrite").parquet(f"{args.output}/batch={batch_id}")
    if batch_id == 0 and args.hold_batch_0:
        Path(args.hold_batch_0).touch()
        time.sleep(HOLD_MAX_S)  # the test kills this process in here


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from odradek.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-stream-driver")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # A Python worker must connect back within this (default 15 s): on a loaded 2-core
        # machine the streaming planner's worker took longer and the query failed at start.
        .config("spark.python.authenticate.socketTimeout", "60s")
        .getOrCreate()
    )
    register(spark)
    start_query(spark, args).awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
