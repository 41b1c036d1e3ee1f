"""Connect workers configured with the Java client's security keys only (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.*``) move records on a SASL_SSL
cluster: a standalone worker file source -> topic -> file sink, a distributed worker (group
membership and internal topics secured too) a file source; a wrong password stops a worker
with a clear error instead of hanging."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from support.clusters import running_cluster
from support.connect_workers import WorkerProcess, free_port, http, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.connect]

WAIT_S = 60.0
FAIL_WITHIN_S = 45.0  # a refused worker exits within this (its start is bounded)
STOP_S = 30.0
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
SERVICES = Path(__file__).resolve().parents[2] / "services"
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "1000",
}


def java_security(data_dir: Path) -> dict[str, str]:
    """The cluster's credentials as a Java client's settings: ``security.protocol`` and
    ``sasl.mechanism`` (one name in both clients) and the keys after the comment line of
    ``client.properties`` (``sasl.jaas.config``, ``ssl.truststore.*``)."""
    shared, java, after_comment = {}, {}, False
    for line in (data_dir / "client.properties").read_text().splitlines():
        if line.startswith("#"):
            after_comment = True
            continue
        key, _, value = line.partition("=")
        if after_comment:
            java[key] = value
        elif key in ("security.protocol", "sasl.mechanisms", "sasl.mechanism"):
            shared["sasl.mechanism" if key.startswith("sasl.") else key] = value
    assert "sasl.jaas.config" in java and "ssl.truststore.location" in java
    return {**shared, **java}


def librdkafka_settings(data_dir: Path) -> dict[str, str]:
    settings = {}
    for line in (data_dir / "client.properties").read_text().splitlines():
        if line.startswith("#"):
            break
        key, _, value = line.partition("=")
        settings[key] = value
    return settings


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[object, Path]]:
    data_dir = tmp_path_factory.mktemp("secured-connect")
    with running_cluster(
        data_dir, brokers=1, broker_overrides=GROUP_OVERRIDES, security="sasl_ssl"
    ) as state:
        yield state, data_dir


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def worker_settings(state, data_dir: Path, work: Path, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": state.bootstrap_servers,
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        "offset.flush.interval.ms": "200",
        "task.shutdown.graceful.timeout.ms": "3000",
        "listeners": "http://127.0.0.1:0",
        "rest.advertised.host.name": "127.0.0.1",
        **java_security(data_dir),
        **extra,
    }


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SERVICES), os.environ.get("PYTHONPATH", "")]),
    }


def start_standalone(properties: Path, log: Path, *connectors: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", "connect", "standalone", str(properties),
             *map(str, connectors)],
            stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True,
        )  # fmt: skip


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(STOP_S)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def create_topic(data_dir: Path, topic: str) -> None:
    admin = AdminClient(librdkafka_settings(data_dir))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)


def test_a_standalone_worker_moves_records_file_to_topic_to_file(secured, tmp_path):
    state, data_dir = secured
    create_topic(data_dir, "secured-lines")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i}" for i in range(20)]
    source_file.write_text("\n".join(lines) + "\n")
    source = write_properties(
        tmp_path / "source.properties",
        {
            "name": "secured-source",
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": "secured-lines",
        },
    )
    sink = write_properties(
        tmp_path / "sink.properties",
        {
            "name": "secured-sink",
            "connector.class": "FileStreamSink",
            "file": str(sink_file),
            "topics": "secured-lines",
        },
    )
    settings = worker_settings(
        state, data_dir, tmp_path, **{"offset.storage.file.filename": str(tmp_path / "off.json")}
    )
    log = tmp_path / "worker.log"
    process = start_standalone(
        write_properties(tmp_path / "w.properties", settings), log, source, sink
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while lines_of(sink_file) != lines and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()[-4000:]
            time.sleep(0.2)
        assert lines_of(sink_file) == lines, log.read_text()[-4000:]
    finally:
        stop(process)
    assert process.returncode == 0, log.read_text()[-4000:]


def test_a_distributed_worker_joins_and_runs_a_source(secured, tmp_path):
    state, data_dir = secured
    settings = worker_settings(
        state,
        data_dir,
        tmp_path,
        **{
            "group.id": "secured-connect",
            "config.storage.topic": "secured-connect-configs",
            "offset.storage.topic": "secured-connect-offsets",
            "status.storage.topic": "secured-connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "session.timeout.ms": "3000",
            "heartbeat.interval.ms": "500",
        },
    )
    del settings["listeners"]  # WorkerProcess gives its own
    port = free_port()
    worker = WorkerProcess(
        write_properties(tmp_path / "w.properties", settings), port, tmp_path / "worker.log"
    )
    try:
        wait_for(worker.ready, "the distributed worker's REST API", WAIT_S, [worker])
        source_file = tmp_path / "in.txt"
        source_file.write_text("".join(f"record {i}\n" for i in range(10)))
        connector = {
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": "secured-distributed",
        }
        wait_for(
            lambda: (
                http("PUT", f"{worker.url}/connectors/dsource/config", connector)[0] in (200, 201)
            ),
            "the connector to be created",
            WAIT_S,
            [worker],
        )
        consumer = Consumer(
            {
                **librdkafka_settings(data_dir),
                "group.id": "secured-check",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["secured-distributed"])
        seen: list[str] = []
        try:
            deadline = time.monotonic() + WAIT_S
            while len(seen) < 10 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.append(message.value().decode())
        finally:
            consumer.close()
        assert seen == [f"record {i}" for i in range(10)], worker.log.read_text()[-4000:]
    finally:
        worker.stop()


def _wrong_password(settings: dict[str, str]) -> dict[str, str]:
    jaas = settings["sasl.jaas.config"]
    start = jaas.index('password="') + len('password="')
    end = jaas.index('"', start)
    return {**settings, "sasl.jaas.config": jaas[:start] + "not-the-password" + jaas[end:]}


@pytest.mark.parametrize("mode", ["standalone", "distributed"])
def test_a_wrong_password_stops_the_worker_with_a_clear_error(secured, tmp_path, mode):
    state, data_dir = secured
    settings = _wrong_password(
        worker_settings(
            state,
            data_dir,
            tmp_path,
            **(
                {"offset.storage.file.filename": str(tmp_path / "off.json")}
                if mode == "standalone"
                else {
                    "group.id": "wrong-password",
                    "config.storage.topic": "wrong-configs",
                    "offset.storage.topic": "wrong-offsets",
                    "status.storage.topic": "wrong-status",
                }
            ),
        )
    )
    log = tmp_path / "worker.log"
    properties = write_properties(tmp_path / "w.properties", settings)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", "connect", mode, str(properties)],
            stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True,
        )  # fmt: skip
    try:
        process.wait(FAIL_WITHIN_S)
    except subprocess.TimeoutExpired:
        stop(process)
        pytest.fail(f"the worker did not stop on a wrong password:\n{log.read_text()[-4000:]}")
    text = log.read_text()
    assert process.returncode == 1, text[-4000:]
    assert "the Kafka cluster refused the worker's credentials" in text, text[-4000:]
    assert "not-the-password" not in text
