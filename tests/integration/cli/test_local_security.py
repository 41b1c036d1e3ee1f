"""``odradek local up --security sasl_ssl``: clients work with what ``client.properties`` says
(SCRAM-SHA-512 over TLS as the superuser ``admin``), the brokers replicate over mutual TLS, and
a client without the credential, or without TLS, is refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

WAIT_S = 30.0


def read_properties(path: Path) -> dict[str, str]:
    """The librdkafka part of ``client.properties`` (the Java client's keys follow a comment)."""
    properties: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            break
        key, _, value = line.partition("=")
        properties[key] = value
    return properties


@pytest.fixture(scope="module")
def secured(local_cluster, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("secured")
    with local_cluster(
        data_dir,
        brokers=2,
        broker_overrides={"default.replication.factor": "2", "min.insync.replicas": "2"},
        security="sasl_ssl",
    ) as state:
        yield state, data_dir


def test_a_client_with_client_properties_produces_and_consumes(secured):
    state, data_dir = secured
    config = read_properties(data_dir / "client.properties")
    assert config["security.protocol"] == "SASL_SSL"
    assert config["bootstrap.servers"] == state.bootstrap_servers
    assert oct((data_dir / "client.properties").stat().st_mode & 0o777) == "0o600"
    admin = AdminClient(config)
    admin.create_topics([NewTopic("secured", 1, 2)])["secured"].result(timeout=WAIT_S)
    producer = Producer({**config, "acks": "all"})
    for i in range(100):
        producer.produce("secured", b"%d" % i)
    assert producer.flush(WAIT_S) == 0  # acks=all with min ISR 2: replicated over INTERNAL
    consumer = Consumer({**config, "group.id": "secured", "auto.offset.reset": "earliest"})
    consumer.subscribe(["secured"])
    values: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(values) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(int(message.value()))
    finally:
        consumer.close()
    assert values == set(range(100))


def test_a_wrong_password_and_a_plaintext_client_are_refused(secured):
    state, data_dir = secured
    config = read_properties(data_dir / "client.properties")
    for bad in (
        {**config, "sasl.password": "guess"},
        {"bootstrap.servers": state.bootstrap_servers},
    ):
        admin = AdminClient({**bad, "socket.timeout.ms": 3000})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)


def test_local_status_says_where_the_client_settings_are(secured):
    _, data_dir = secured
    status = subprocess.run(
        [sys.executable, "-m", "odradek.cli", "local", "status", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert f"client settings in {data_dir / 'client.properties'}" in status.stdout
