"""test_write.py's streaming driver to kill -9: Parquet files -> a transactional odradek sink.

Reads ``--input`` one file per micro-batch (availableNow), hash-partitions the ids into 3 Spark
partitions (deterministic, as exactly-once requires), and writes each id as a record's value with
``transactional=true``. ``--batch-delay-s`` slows every task by about that much (a UDF sleeping per
row), so a test can kill the driver while some writers of a batch have committed and Spark has
not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

RUN_TIMEOUT_S = 300
PARTITIONS = 3


def start_query(
    spark,
    *,
    bootstrap_servers: str,
    topic: str,
    input_dir: str,
    checkpoint: str,
    rows_per_file: int,
    batch_delay_s: float = 0.0,
):
    """The query, started in ``spark`` (this script's session, or a test's for the restart)."""
    from pyspark.sql.functions import udf

    from odradek.spark import register

    register(spark)
    rows_per_task = rows_per_file / PARTITIONS

    def slow(value: str) -> str:  # a plain UDF: mapInArrow would need pandas
        time.sleep(batch_delay_s / rows_per_task)
        return value

    rows = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", 1)
        .parquet(input_dir)
        .repartition(PARTITIONS, "id")
        .selectExpr("CAST(id AS STRING) AS value")
    )
    if batch_delay_s:
        rows = rows.select(udf(slow, "string")("value").alias("value"))
    return (
        rows.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .option("transactional", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--rows-per-file", type=int, required=True)
    parser.add_argument("--batch-delay-s", type=float, default=0.0)
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-stream-write-driver")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    query = start_query(
        spark,
        bootstrap_servers=args.bootstrap_servers,
        topic=args.topic,
        input_dir=args.input,
        checkpoint=args.checkpoint,
        rows_per_file=args.rows_per_file,
        batch_delay_s=args.batch_delay_s,
    )
    print(f"query {query.id} started", flush=True)
    finished = query.awaitTermination(RUN_TIMEOUT_S)
    error = query.exception()
    print(f"query finished={finished} error={error}", flush=True)
    spark.stop()
    return 0 if finished and error is None else 1


if __name__ == "__main__":
    sys.exit(main())
