"""Windowed per-key counts from one topic to another, exactly once: a streaming job over Odradek.

Reads ``--topic`` with the Odradek data source (``spark.readStream.format("odradek")``, the options
and columns of Spark's Kafka source), groups records by key and by tumbling ``--window`` of the
record timestamp, with a ``--watermark`` for late records, and writes one record per (key, window)
to ``--output-topic`` once the watermark has passed the window's end (append mode: each window
once, final). The output record's key is the input key; its value is JSON:

    {"key": "k1", "window_start": "2026-11-26T08:00:00.000Z", "window_end": "...",
     "records": 12, "sum": 30.5}

``sum`` adds the number at ``--value-field`` of JSON values (null when no value has it), so the
job serves both plain event counting and amounts such as ``{"amount": 2.5}``. Records arriving
later than the watermark (``--watermark`` behind the latest timestamp seen) are dropped, as
Spark drops them.

Delivery: by default the sink writes each micro-batch in Kafka transactions
(``transactional=true``), so a reader with ``isolation.level=read_committed`` sees each window
exactly once, even after the driver is killed and restarted on the same ``--checkpoint``
(docs/spark.md explains how; the output must be deterministic, which this job's is).
``--at-least-once`` writes without transactions, as Spark's own Kafka sink.

Runs: ``--available-now`` reads what the topic holds when the job starts, in batches of at most
``--max-offsets-per-trigger`` records, and stops (a bounded run; windows the watermark has not
closed yet are emitted by a later run, from the checkpoint). Otherwise a micro-batch starts every
``--trigger-interval`` until the job is stopped (or for ``--run-seconds``).

Locally: ``python spark/stream_windowed_counts.py --bootstrap-servers 127.0.0.1:9092 --topic
clicks --output-topic clicks-per-minute --checkpoint /tmp/clicks-ckpt --available-now``.
Under ``spark-submit`` the master comes from spark-submit (docs/spark.md, "Spark on Kubernetes").
``main(argv, spark=session)`` runs the job in a session the caller owns (tests, notebooks).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from odradek.spark import jobs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

APP_NAME = "odradek-stream-windowed-counts"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="stream_windowed_counts.py",
        description="Per-key counts (and sums) over tumbling windows of an Odradek topic, "
        "written to another topic exactly once.",
        epilog="Durations are Spark's: '1 minute', '30 seconds', '10 seconds'. Offsets take "
        "what Spark's Kafka source takes: earliest, latest or per-partition JSON.",
    )
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...]")
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument("--output-topic", required=True, help="the topic to write windows to")
    parser.add_argument(
        "--checkpoint", required=True, help="the query's checkpoint directory (keep it to resume)"
    )
    parser.add_argument("--window", default="1 minute", help="window length (default 1 minute)")
    parser.add_argument(
        "--watermark", default="30 seconds", help="how late a record may be (default 30 seconds)"
    )
    parser.add_argument(
        "--value-field",
        default="amount",
        help="JSON field of the value to sum (default amount; records without it count only)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="latest",
        help="where a new query starts (default latest, as Spark; a checkpoint overrides it)",
    )
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=None, help="cap records per micro-batch"
    )
    run = parser.add_mutually_exclusive_group()
    run.add_argument(
        "--available-now", action="store_true", help="read what is there now, then stop"
    )
    run.add_argument(
        "--trigger-interval", default="10 seconds", help="micro-batch interval (default 10 s)"
    )
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=None,
        help="stop a continuous run after this long (default: run until stopped)",
    )
    parser.add_argument(
        "--at-least-once",
        action="store_true",
        help="write without transactions (a replayed batch may duplicate windows)",
    )
    parser.add_argument(
        "--command-config",
        default=None,
        metavar="FILE",
        help="a Kafka client properties file (an OdradekUser's client.properties), each key "
        "passed as option kafka.KEY; --kafka and --bootstrap-servers win",
    )
    parser.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client setting for source and sink, passed as option kafka.KEY (repeatable)",
    )
    parser.add_argument(
        "--master",
        default=None,
        help=f"Spark master (default: spark-submit's, else {jobs.DEFAULT_MASTER})",
    )
    args = parser.parse_args(argv)
    for setting in args.kafka:
        if "=" not in setting:
            parser.error(f"--kafka takes KEY=VALUE, not {setting!r}")
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
        parser.error("--max-offsets-per-trigger must be at least 1")
    return args


def client_options(args: argparse.Namespace) -> dict[str, str]:
    return {
        **jobs.command_config_options(args.command_config),
        "kafka.bootstrap.servers": args.bootstrap_servers,
        **jobs.kafka_options(args.kafka),
    }


def windowed_counts(records: DataFrame, window: str, watermark: str, value_field: str):
    """Kafka-source rows -> (key, value) rows, one per key and closed window, value as JSON."""
    from pyspark.sql import functions as F

    amount = F.get_json_object(F.col("value").cast("string"), f"$.{value_field}").cast("double")
    counts = (
        records.select(F.col("key").cast("string").alias("key"), "timestamp", amount.alias("x"))
        .withWatermark("timestamp", watermark)
        .groupBy("key", F.window("timestamp", window))
        .agg(F.count(F.lit(1)).alias("records"), F.sum("x").alias("sum"))
    )
    stamp = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
    return counts.select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.col("key"),
                F.date_format("window.start", stamp).alias("window_start"),
                F.date_format("window.end", stamp).alias("window_end"),
                F.col("records"),
                F.col("sum"),
            )
        ).alias("value"),
    )


def start_query(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    import odradek.spark

    odradek.spark.register(spark)
    source = (
        spark.readStream.format("odradek")
        .options(**client_options(args))
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.max_offsets_per_trigger is not None:
        source = source.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    output = windowed_counts(source.load(), args.window, args.watermark, args.value_field)
    writer = (
        output.writeStream.format("odradek")
        .options(**client_options(args))
        .option("topic", args.output_topic)
        .option("transactional", "false" if args.at_least_once else "true")
        .option("checkpointLocation", args.checkpoint)
        .outputMode("append")
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger_interval)
    return writer.start()


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    """Runs the query to its end (availableNow), for ``--run-seconds``, or until stopped."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    started = time.monotonic()
    query = start_query(spark, args)
    try:
        if args.run_seconds is not None and not args.available_now:
            query.awaitTermination(args.run_seconds)
        else:
            query.awaitTermination()
    finally:
        query.stop()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(
        f"stream_windowed_counts: {len(query.recentProgress)} micro-batches, {rows} records of "
        f"{args.topic} -> {args.output_topic} in {time.monotonic() - started:.1f} s "
        f"(progress of the last 100 batches)",
        flush=True,
    )
    return 0


def start_session(args: argparse.Namespace) -> SparkSession:
    # Two shuffle partitions in a local session: each non-empty one is a transaction per batch.
    return jobs.start_session(
        APP_NAME, args.master, local_conf={"spark.sql.shuffle.partitions": "2"}
    )


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    args = parse_args(argv)
    if spark is not None:
        return run(spark, args)
    session = start_session(args)
    try:
        return run(session, args)
    finally:
        session.stop()


if __name__ == "__main__":
    sys.exit(main())
