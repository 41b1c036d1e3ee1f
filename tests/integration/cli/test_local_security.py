"""``odradek local up --security sasl_ssl``: clients work with what ``client.properties`` says
(SCRAM-SHA-512 over TLS as the superuser ``admin``), the brokers replicate over mutual TLS, and
a client without the credential, or without TLS, is refused; renewed certificates are taken
without a restart, by the controller's listener and by the brokers' and the controller's links."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.pki import LocalPki
from odradek.local.security import HOSTS
from support.waiting import wait_until

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


def _served_certificate(address: str, ca: Path, client_pem: Path) -> bytes:
    """The certificate a mutual-TLS listener serves (DER), shown a certificate of the CA's."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(client_pem))
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        return tls.getpeercert(binary_form=True)


def test_renewed_certificates_serve_the_controller_and_the_brokers_links(secured):
    # Last in the module: it replaces the cluster's certificates (same CA, same names), as a
    # certificate manager renews them, and the cluster goes on without a restart.
    state, data_dir = secured
    pki = LocalPki.create(data_dir / "pki", HOSTS)
    visitor = pki.issue("visitor")  # any certificate of the CA completes the handshake
    controller = next(m for m in state.members if m.role == "controller")
    before = _served_certificate(controller.address, pki.ca_path, visitor)
    pki.issue("controller")
    pki.issue("broker")
    wait_until(
        lambda: _served_certificate(controller.address, pki.ca_path, visitor) != before,
        "the controller's listener to serve its renewed certificate",
        WAIT_S,
    )
    broker_logs = [Path(m.log) for m in state.members if m.role == "broker"]
    wait_until(
        lambda: all(
            "links of listener INTERNAL: certificates reloaded" in log.read_text()
            for log in broker_logs
        ),
        "every broker's inter-broker links to take the renewed certificate",
        WAIT_S,
    )
    assert "links of listener CONTROLLER: certificates reloaded" in Path(controller.log).read_text()
    config = read_properties(data_dir / "client.properties")
    admin = AdminClient(config)
    # The controller's LeaderAndIsr goes over its renewed links.
    admin.create_topics([NewTopic("renewed", 1, 2)])["renewed"].result(timeout=WAIT_S)
    producer = Producer({**config, "acks": "all"})
    producer.produce("renewed", b"after the renewal")
    assert producer.flush(WAIT_S) == 0  # replicated over INTERNAL
