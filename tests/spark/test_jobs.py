"""The batch job spark/batch_key_stats.py: its --help, and the exact per-key, per-hour statistics
of a small topic (records over three hours, two partitions, a null key, a tombstone, a key that is
not UTF-8), run in the shared session through its ``main``."""

from __future__ import annotations

import datetime
import importlib.util
import subprocess
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]

JOB = Path(__file__).resolve().parents[2] / "spark" / "batch_key_stats.py"
WAIT_S = 30.0
PARTITIONS = 2
HOUR_S = 3600
BASE_MS = 1_714_557_600_000  # 2024-05-01 10:00:00 UTC


@pytest.fixture(scope="module")
def job():
    spec = importlib.util.spec_from_file_location("batch_key_stats_under_test", JOB)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_help_runs_without_spark():
    result = subprocess.run(
        [sys.executable, str(JOB), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for option in ("--bootstrap-servers", "--topic", "--output", "--starting-offsets"):
        assert option in result.stdout


def test_arguments_become_the_kafka_source_options(job):
    args = job.parse_args(
        ["--bootstrap-servers", "b:9092", "--topic", "t", "--output", "/o", "--min-partitions", "8"]
        + ["--kafka", "security.protocol=SSL", "--kafka", "fetch.max.bytes=1048576"]
        + ["--ending-offsets", '{"t": {"0": 5}}']
    )
    assert job.source_options(args) == {
        "kafka.bootstrap.servers": "b:9092",
        "subscribe": "t",
        "startingOffsets": "earliest",
        "endingOffsets": '{"t": {"0": 5}}',
        "minPartitions": "8",
        "kafka.security.protocol": "SSL",
        "kafka.fetch.max.bytes": "1048576",
    }
    for bad in (["--kafka", "no-equals"], ["--conf", "no-equals"], ["--min-partitions", "0"]):
        with pytest.raises(SystemExit):
            job.parse_args(["--bootstrap-servers", "b", "--topic", "t", "--output", "/o", *bad])


def test_command_config_becomes_kafka_options_under_the_flags(job, tmp_path):
    """An OdradekUser Secret's client.properties, as mounted in the driver and executors."""
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# OdradekUser orders-app\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="orders-app" password="pw";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/odradek/user/ca.crt\n"
        "bootstrap.servers=elsewhere:1\n"
    )
    args = job.parse_args(
        ["--bootstrap-servers", "b:9095", "--topic", "t", "--output", "/o"]
        + ["--command-config", str(properties), "--kafka", "ssl.truststore.type=PEM"]
    )
    options = job.source_options(args)
    assert options["kafka.bootstrap.servers"] == "b:9095"  # the flag wins over the file
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.jaas.config"].endswith('password="pw";')
    assert options["kafka.ssl.truststore.location"] == "/etc/odradek/user/ca.crt"
    missing = job.parse_args(
        ["--bootstrap-servers", "b", "--topic", "t", "--output", "/o", "--command-config", "/no"]
    )
    with pytest.raises(FileNotFoundError):
        job.source_options(missing)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=WAIT_S)

    def led() -> bool:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        partitions = found.partitions.values() if found else ()
        return len(partitions) == PARTITIONS and all(p.leader >= 0 for p in partitions)

    wait_until(led, f"{topic}'s leaders", WAIT_S, poll_s=0.1)


def sample_records() -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(partition, key, value, timestamp ms): offsets follow the order within a partition."""
    records = []
    for i in range(60):  # partition 0: keys a, b over three hours, every 3 minutes
        key = b"a" if i % 3 else b"b"
        records.append((0, key, b"v" * (i % 7 + 1), BASE_MS + i * 3 * 60_000))
    records += [
        (1, None, b"no key", BASE_MS + 5 * 60_000),
        (1, b"a", None, BASE_MS + 6 * 60_000),  # a tombstone
        (1, b"\xff\xfe", b"xyz", BASE_MS + HOUR_S * 1000 + 1),  # not UTF-8
        (1, b"a", b"late", BASE_MS + 2 * HOUR_S * 1000 + 59 * 60_000 + 999),
    ]
    return records


def produce(bootstrap: str, topic: str, records) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []
    for partition, key, value, timestamp_ms in records:
        producer.produce(
            topic,
            value,
            key,
            partition=partition,
            timestamp=timestamp_ms,
            on_delivery=lambda err, _: err and failures.append(err),
        )
    assert producer.flush(WAIT_S) == 0 and not failures, failures


def hour_start_s(timestamp_ms: int, zone: ZoneInfo) -> int:
    local = datetime.datetime.fromtimestamp(timestamp_ms / 1000, zone)
    return int(local.replace(minute=0, second=0, microsecond=0).timestamp())


def expected_stats(topic: str, records, zone: ZoneInfo) -> dict[tuple, dict]:
    offsets = {p: 0 for p in range(PARTITIONS)}
    stats: dict[tuple, dict] = {}
    for partition, key, value, timestamp_ms in records:
        offset = offsets[partition]
        offsets[partition] += 1
        hour_s = hour_start_s(timestamp_ms, zone)
        row = stats.setdefault(
            (topic, partition, key, hour_s),
            {"records": 0, "tombstones": 0, "key_bytes": 0, "value_bytes": 0, "ts": [], "off": []},
        )
        row["records"] += 1
        row["tombstones"] += value is None
        row["key_bytes"] += len(key or b"")
        row["value_bytes"] += len(value or b"")
        row["ts"].append(timestamp_ms)
        row["off"].append(offset)
    return {
        k: {
            "records": r["records"],
            "tombstones": r["tombstones"],
            "key_bytes": r["key_bytes"],
            "value_bytes": r["value_bytes"],
            "bytes": r["key_bytes"] + r["value_bytes"],
            "first_ms": min(r["ts"]),
            "last_ms": max(r["ts"]),
            "min_offset": min(r["off"]),
            "max_offset": max(r["off"]),
        }
        for k, r in stats.items()
    }


def test_statistics_per_key_and_hour(job, spark, spark_cluster, unique, tmp_path, capsys):
    bootstrap = spark_cluster.bootstrap_servers
    topic = unique("topic")
    create_topic(bootstrap, topic)
    records = sample_records()
    produce(bootstrap, topic, records)
    output = tmp_path / "stats"

    argv = ["--bootstrap-servers", bootstrap, "--topic", topic, "--output", str(output)]
    assert job.main([*argv, "--show", "3"], spark=spark) == 0
    printed = capsys.readouterr().out
    assert f"{len(records)} records of topic {topic}" in printed

    # Hours start in the session's time zone (the job leaves a given session's zone alone).
    zone = ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))
    rows = (
        spark.read.parquet(str(output))
        .selectExpr(
            "topic",
            "partition",
            "key",
            "key_text",
            "unix_seconds(hour) AS hour_s",
            "records",
            "tombstones",
            "key_bytes",
            "value_bytes",
            "bytes",
            "unix_millis(first_timestamp) AS first_ms",
            "unix_millis(last_timestamp) AS last_ms",
            "min_offset",
            "max_offset",
            "date",
        )
        .collect()
    )
    expected = expected_stats(topic, records, zone)
    got = {
        (r["topic"], r["partition"], None if r["key"] is None else bytes(r["key"]), r["hour_s"]): {
            name: r[name] for name in next(iter(expected.values()))
        }
        for r in rows
    }
    assert got == expected
    for r in rows:
        hour = datetime.datetime.fromtimestamp(r["hour_s"], zone)
        assert str(r["date"]) == hour.strftime("%Y-%m-%d")
    texts = {bytes(r["key"]) if r["key"] is not None else None: r["key_text"] for r in rows}
    assert texts == {b"a": "a", b"b": "b", None: None, b"\xff\xfe": "\ufffd\ufffd"}
    assert {p.name for p in output.iterdir() if p.is_dir()} == {f"date={r['date']}" for r in rows}

    # A re-run over a later offset range replaces the dates it writes, and only those.
    later = [(0, b"c", b"new", BASE_MS + 30 * 24 * HOUR_S * 1000)]
    produce(bootstrap, topic, later)
    starting = f'{{"{topic}": {{"0": 60, "1": 4}}}}'
    assert job.main([*argv, "--starting-offsets", starting, "--show", "0"], spark=spark) == 0
    assert f"batch_key_stats: 1 records of topic {topic}" in capsys.readouterr().out
    dates = {
        str(r["date"]): r["n"]
        for r in spark.read.parquet(str(output)).groupBy("date").count().toDF("date", "n").collect()
    }
    assert sum(dates.values()) == len(expected) + 1
