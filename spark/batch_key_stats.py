"""Per-key, per-hour statistics of a topic, written to Parquet: a batch job over Odradek.

Reads the topic with the Odradek data source (``spark.read.format("odradek")``, the options and
columns of Spark's Kafka source) between ``--starting-offsets`` and ``--ending-offsets``, and
writes one row per (topic, partition, key, hour) to ``--output``, partitioned by ``date``:

    topic, partition, key (binary, as read), key_text (UTF-8, malformed bytes replaced),
    hour (timestamp, start of the hour), records, tombstones (null values), key_bytes,
    value_bytes, bytes (key + value), first_timestamp, last_timestamp, min_offset, max_offset,
    date (yyyy-MM-dd of the hour; the partition column)

Rows are per partition as well as per key because offsets only compare within a partition (and a
key lives in one partition under the default partitioner). Hours and dates are in the session's
time zone, UTC unless ``--time-zone`` says otherwise. A date partition is replaced as a whole
when the job writes rows for it again (dynamic partition overwrite), so a re-run over the same
offsets gives the same output and a run over a later range adds its dates; dates a run does not
touch are kept.

Locally: ``python spark/batch_key_stats.py --bootstrap-servers 127.0.0.1:9092 --topic orders
--output /tmp/orders-stats`` (a ``local[2]`` session). Under ``spark-submit`` the master and the
rest of the session's configuration come from spark-submit (docs/spark.md, "Spark on
Kubernetes"); ``--master`` is then left unset unless given. The source's client settings
(``security.protocol``, SASL, ...) are passed with ``--kafka KEY=VALUE``, Spark settings for a
session the job starts with ``--conf KEY=VALUE``.

``main(argv, spark=session)`` runs the job in a session the caller owns (tests, notebooks) and
leaves that session running.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.spark import jobs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

APP_NAME = "odradek-batch-key-stats"
DEFAULT_TIME_ZONE = "UTC"
PARTITION_COLUMN = "date"


@dataclass(frozen=True)
class Summary:
    """What a run read and wrote."""

    records: int  # records read from the topic
    rows: int  # statistics rows written (one per topic, partition, key and hour)
    elapsed_s: float  # read, aggregate and write, session start excluded


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="batch_key_stats.py",
        description="Per-key and per-hour statistics of an Odradek topic, written to Parquet "
        "(partitioned by date).",
        epilog="Offsets take what Spark's Kafka source takes: earliest, latest, or per-partition "
        'JSON such as \'{"orders": {"0": 100, "1": -2}}\' (-2 earliest, -1 latest).',
    )
    parser.add_argument(
        "--bootstrap-servers",
        required=True,
        help="the cluster's bootstrap servers, host:port[,host:port...]",
    )
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument(
        "--output", required=True, help="Parquet directory (any path Spark writes: file, s3a://)"
    )
    parser.add_argument("--starting-offsets", default="earliest", help="default: earliest")
    parser.add_argument("--ending-offsets", default="latest", help="default: latest")
    parser.add_argument(
        "--min-partitions",
        type=int,
        default=None,
        help="split the topic's partitions into at least this many Spark tasks",
    )
    parser.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client setting for the source, passed as option kafka.KEY (repeatable)",
    )
    parser.add_argument(
        "--command-config",
        default=None,
        metavar="FILE",
        help="a Kafka client properties file (an OdradekUser's client.properties), each key "
        "passed as option kafka.KEY; --kafka and --bootstrap-servers win",
    )
    parser.add_argument(
        "--master",
        default=None,
        help=f"Spark master (default: spark-submit's, else {jobs.DEFAULT_MASTER})",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session this job starts, as spark-submit's --conf "
        "(repeatable; ignored with a session given to main)",
    )
    parser.add_argument(
        "--time-zone",
        default=None,
        help=f"time zone of hours and dates (default: {DEFAULT_TIME_ZONE} in a session this job "
        "starts; the session's own when given one)",
    )
    parser.add_argument(
        "--show", type=int, default=5, metavar="N", help="print the N busiest rows (default 5)"
    )
    args = parser.parse_args(argv)
    for option, settings in (("--kafka", args.kafka), ("--conf", args.conf)):
        for setting in settings:
            if "=" not in setting:
                parser.error(f"{option} takes KEY=VALUE, not {setting!r}")
    if args.min_partitions is not None and args.min_partitions < 1:
        parser.error("--min-partitions must be at least 1")
    return args


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The data source's options, named as Spark's Kafka source names them."""
    options = {
        "kafka.bootstrap.servers": args.bootstrap_servers,
        "subscribe": args.topic,
        "startingOffsets": args.starting_offsets,
        "endingOffsets": args.ending_offsets,
    }
    if args.min_partitions is not None:
        options["minPartitions"] = str(args.min_partitions)
    return {
        **jobs.command_config_options(args.command_config),
        **options,
        **jobs.kafka_options(args.kafka),
    }


def read_topic(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    return spark.read.format("odradek").options(**source_options(args)).load()


def key_hour_stats(records: DataFrame) -> DataFrame:
    """Kafka-source rows -> one statistics row per (topic, partition, key, hour)."""
    from pyspark.sql import functions as F

    hour = F.date_trunc("hour", F.col("timestamp"))
    key_bytes = F.coalesce(F.length("key"), F.lit(0)).cast("long")
    value_bytes = F.coalesce(F.length("value"), F.lit(0)).cast("long")
    stats = (
        records.withColumn("hour", hour)
        .groupBy("topic", "partition", "key", "hour")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.count_if(F.col("value").isNull()).alias("tombstones"),
            F.sum(key_bytes).alias("key_bytes"),
            F.sum(value_bytes).alias("value_bytes"),
            F.min("timestamp").alias("first_timestamp"),
            F.max("timestamp").alias("last_timestamp"),
            F.min("offset").alias("min_offset"),
            F.max("offset").alias("max_offset"),
        )
    )
    return stats.select(
        "topic",
        "partition",
        "key",
        F.make_valid_utf8(F.col("key").cast("string")).alias("key_text"),
        "hour",
        "records",
        "tombstones",
        "key_bytes",
        "value_bytes",
        (F.col("key_bytes") + F.col("value_bytes")).alias("bytes"),
        "first_timestamp",
        "last_timestamp",
        "min_offset",
        "max_offset",
        F.date_format("hour", "yyyy-MM-dd").alias(PARTITION_COLUMN),
    )


def write_stats(stats: DataFrame, output: str) -> None:
    # REBALANCE: with adaptive execution, a few files of a sensible size per date rather than
    # one per shuffle partition (200 by default).
    (
        stats.hint("rebalance", PARTITION_COLUMN)
        .write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")  # replace only the dates written
        .partitionBy(PARTITION_COLUMN)
        .parquet(output)
    )


def run(spark: SparkSession, args: argparse.Namespace) -> Summary:
    """Read, aggregate, write; then summarise and show this run's rows."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    import odradek.spark

    odradek.spark.register(spark)
    if args.time_zone is not None:
        spark.conf.set("spark.sql.session.timeZone", args.time_zone)
    # The statistics are small next to the topic: kept after the write computes them, the
    # summary and the rows shown need no second read of the topic (nor of other runs' output).
    stats = key_hour_stats(read_topic(spark, args)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        started = time.monotonic()
        write_stats(stats, args.output)
        elapsed_s = time.monotonic() - started
        # Sums only: distinct keys and hours would cost a shuffle each (measured 2-3 s more).
        totals = stats.agg(
            F.coalesce(F.sum("records"), F.lit(0)).alias("records"),
            F.count(F.lit(1)).alias("rows"),
        ).first()
        summary = Summary(
            records=int(totals["records"]), rows=int(totals["rows"]), elapsed_s=elapsed_s
        )
        print(
            f"batch_key_stats: {summary.records} records of topic {args.topic} -> "
            f"{summary.rows} (partition, key, hour) rows in {args.output}, "
            f"{summary.elapsed_s:.1f} s",
            flush=True,
        )
        if args.show > 0:
            busiest = stats.orderBy(F.desc("records"), "partition", "key_text", "hour")
            busiest.select(
                "hour",
                "partition",
                "key_text",
                "records",
                "bytes",
                "first_timestamp",
                "last_timestamp",
                "min_offset",
                "max_offset",
            ).show(args.show, truncate=False)
    finally:
        stats.unpersist()
    return summary


def start_session(args: argparse.Namespace) -> SparkSession:
    conf = {"spark.sql.session.timeZone": args.time_zone or DEFAULT_TIME_ZONE}
    for setting in args.conf:  # after the defaults: the user's settings win
        key, value = setting.split("=", 1)
        conf[key.strip()] = value
    return jobs.start_session(APP_NAME, args.master, conf)


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    args = parse_args(argv)
    if spark is not None:
        run(spark, args)
        return 0
    session = start_session(args)
    try:
        run(session, args)
    finally:
        session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
