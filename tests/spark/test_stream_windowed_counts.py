"""spark/stream_windowed_counts.py: closed windows reach the output topic once per key, with the
right counts and sums, through the transactional sink; a second run on the checkpoint adds none."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.spark, pytest.mark.integration]

JOB = Path(__file__).parents[2] / "spark" / "stream_windowed_counts.py"
TIMEOUT_S = 30
MINUTE_MS = 60_000
T0_MS = 1_790_000_040_000 - 1_790_000_040_000 % MINUTE_MS  # a whole minute


def load_job():
    spec = importlib.util.spec_from_file_location("stream_windowed_counts", JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_windowed_counts_reach_the_output_topic_once(spark, spark_cluster, unique, tmp_path):
    bootstrap = spark_cluster.bootstrap_servers
    source, output = unique("clicks"), unique("counts")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for futures in admin.create_topics(
        [NewTopic(source, 2, replication_factor=3), NewTopic(output, 2, replication_factor=3)]
    ).values():
        futures.result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": "true"})
    events = [  # (key, minute, second, amount)
        ("k1", 0, 5, 1.0),
        ("k1", 0, 50, 2.5),
        ("k2", 0, 10, 4.0),
        ("k1", 1, 0, 10.0),
        ("k2", 1, 30, None),
        ("k2", 1, 59, 1.0),
        ("k1", 5, 0, 0.0),  # moves the watermark past minutes 0 and 1
    ]
    for key, minute, second, amount in events:
        value = {"amount": amount} if amount is not None else {"other": 1}
        producer.produce(
            source,
            key=key.encode(),
            value=json.dumps(value).encode(),
            timestamp=T0_MS + minute * MINUTE_MS + second * 1000,
        )
    assert producer.flush(TIMEOUT_S) == 0
    job = load_job()
    argv = [
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        source,
        "--output-topic",
        output,
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--starting-offsets",
        "earliest",
        "--available-now",
    ]
    assert job.main(argv, spark=spark) == 0
    assert job.main(argv, spark=spark) == 0  # nothing new: no window written twice

    written = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", output)
        .load()
        .collect()
    )
    got = sorted(
        (
            bytes(r.key).decode(),
            (v := json.loads(bytes(r.value)))["window_start"],
            v["records"],
            v["sum"],
        )
        for r in written
    )
    from datetime import UTC, datetime

    def start(minute: int) -> str:
        moment = datetime.fromtimestamp((T0_MS + minute * MINUTE_MS) / 1000, UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    assert got == [
        ("k1", start(0), 2, 3.5),
        ("k1", start(1), 1, 10.0),
        ("k2", start(0), 1, 4.0),
        ("k2", start(1), 2, 1.0),
    ]
