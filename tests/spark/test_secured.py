"""A Spark job on a SASL_SSL cluster with only the Java client's security options
(``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.type=PEM``, ``kafka.ssl.truststore.location``): a batch write, a batch read
and an availableNow streaming read of the same records; a JKS truststore is refused by name; the
batch job spark/batch_key_stats.py reads with ``--command-config``, a file of those keys in the
shape of an OdradekUser Secret's client.properties (as manifests/spark-job-secured.yaml runs it)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.clusters import running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.spark]

QUERY_TIMEOUT_S = 120
RECORDS = 30


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """One secured broker; (bootstrap servers, the Java security options as ``kafka.*``)."""
    data_dir = tmp_path_factory.mktemp("secured-spark")
    with running_cluster(data_dir, brokers=1, security="sasl_ssl") as state:
        shared, java, after_comment = {}, {}, False
        for line in (data_dir / "client.properties").read_text().splitlines():
            if line.startswith("#"):
                after_comment = True
                continue
            key, _, value = line.partition("=")
            if after_comment:
                java[key] = value
            elif key == "security.protocol":
                shared[key] = value
            elif key in ("sasl.mechanism", "sasl.mechanisms"):
                shared["sasl.mechanism"] = value
        options = {f"kafka.{key}": value for key, value in {**shared, **java}.items()}
        assert "kafka.sasl.jaas.config" in options and "kafka.sasl.username" not in options
        yield state.bootstrap_servers, options


def _with(builder, bootstrap: str, options: dict[str, str]):
    builder = builder.option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def test_batch_write_batch_read_and_stream_with_java_security_options(
    spark, secured, tmp_path: Path
):
    bootstrap, options = secured
    topic = "secured-spark"
    rows = [(f"k{i}", f"v{i}") for i in range(RECORDS)]
    frame = spark.createDataFrame(rows, "key string, value string")
    _with(
        frame.write.format("odradek").mode("append").option("topic", topic), bootstrap, options
    ).save()

    read = _with(spark.read.format("odradek").option("subscribe", topic), bootstrap, options).load()
    got = sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in read.collect())
    assert got == sorted(rows)

    stream = _with(
        spark.readStream.format("odradek")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest"),
        bootstrap,
        options,
    ).load()
    query = (
        stream.selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("secured_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow did not stop"
    finally:
        query.stop()
    streamed = sorted(r.value for r in spark.sql("SELECT value FROM secured_stream").collect())
    assert streamed == sorted(v for _, v in rows)


def test_a_jks_truststore_is_refused_naming_the_option(spark, secured):
    bootstrap, options = secured
    jks = {**options, "kafka.ssl.truststore.type": "JKS"}
    reader = _with(
        spark.read.format("odradek").option("subscribe", "secured-spark"), bootstrap, jks
    )
    with pytest.raises(Exception, match="kafka.ssl.truststore.type") as refused:
        reader.load().collect()
    assert "password=" not in str(refused.value)


def test_the_batch_job_reads_with_a_users_client_properties(spark, secured, tmp_path, capsys):
    """After the write above: the job's --command-config carries the credentials."""
    bootstrap, options = secured
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# OdradekUser-style client.properties: the Java client's keys only\n"
        + "".join(f"{key[len('kafka.') :]}={value}\n" for key, value in options.items())
    )
    path = Path(__file__).resolve().parents[2] / "spark" / "batch_key_stats.py"
    spec = importlib.util.spec_from_file_location("batch_key_stats_secured", path)
    job = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = job
    try:
        spec.loader.exec_module(job)
        argv = ["--bootstrap-servers", bootstrap, "--topic", "secured-spark"]
        argv += ["--output", str(tmp_path / "stats"), "--command-config", str(properties)]
        assert job.main(argv, spark=spark) == 0
    finally:
        del sys.modules[spec.name]
    assert f"{RECORDS} records of topic secured-spark" in capsys.readouterr().out
