"""SSL listeners with Kafka's ssl.* keys: real clients produce and consume over TLS (large
fetches too, without sendfile), mTLS names the principal a rule maps, and what is not honoured
(no client certificate, TLS 1.1, a TLS 1.2 client on a TLS 1.3 listener, bad keys) is refused.

One local cluster (ZooKeeper, a controller, one broker) for the module; the broker has four
listeners: PLAINTEXT and CONTROL_PLANE (brokers and the controller talk plaintext), SSL (server
certificate only, from a PEM file) and MTLS (``ssl.client.auth=required``, TLS 1.3 only, an
inline trust store and a principal mapping rule, all as ``listener.name.mtls.*`` overrides).
Certificates are made by the test (trustme).
"""

from __future__ import annotations

import hashlib
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from support.consuming import poll_messages
from support.listener_ports import listener_ports
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
MAPPING_RULES = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L"  # no DEFAULT: other names are refused
LARGE_VALUE_BYTES = 256 * 1024
HANDSHAKE_TIMEOUT_MS = 3_000  # odradek.socket.request.receive.timeout.ms bounds a handshake
LARGE_RECORDS = 24  # 6 MiB over TLS: every fetch answer is written from the segment by pread


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA(organization_name="Odradek tests")
    server = ca.issue_cert("127.0.0.1", "localhost")
    files = {"ca": root / "ca.pem", "keystore": root / "broker.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.private_key_and_cert_chain_pem.write_to_path(str(files["keystore"]))
    for name, unit in (("alice", "ServiceUsers"), ("bob", "Contractors")):
        client = ca.issue_cert(
            f"{name}.example", common_name=name.title(), organization_unit_name=unit
        )
        files[f"{name}_cert"] = root / f"{name}.crt"
        files[f"{name}_key"] = root / f"{name}.key"
        client.cert_chain_pems[0].write_to_path(str(files[f"{name}_cert"]))
        client.private_key_pem.write_to_path(str(files[f"{name}_key"]))
    return ca, files


@pytest.fixture(scope="module")
def cluster(pki, local_cluster, tmp_path_factory):
    """(ports by listener name, the broker's log file)."""
    ca, files = pki
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SSL://127.0.0.1:0,"
        "MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
        "SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files["keystore"]),
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.enabled.protocols": "TLSv1.3",
        "listener.name.mtls.ssl.principal.mapping.rules": MAPPING_RULES,
        "message.max.bytes": str(2 * LARGE_VALUE_BYTES),
        "odradek.socket.request.receive.timeout.ms": str(HANDSHAKE_TIMEOUT_MS),
    }
    data_dir = tmp_path_factory.mktemp("tls-cluster")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        broker = next(m for m in state.members if m.role == "broker")
        ports = listener_ports(broker)
        yield ports, Path(broker.data_dir) / "broker.log"


def _confluent_ssl(ports, files, listener="SSL", **extra) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{ports[listener]}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(files["ca"]),
        **extra,
    }


def _create(config: dict, topic: str) -> None:
    admin = AdminClient(config)
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    futures[topic].result(timeout=WAIT_S)


def _consume_all(config: dict, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            **config,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 4 * 1024 * 1024,
            "max.partition.fetch.bytes": 4 * 1024 * 1024,
        }
    )
    consumer.subscribe([topic])
    try:
        values = [m.value() for m in poll_messages(consumer, count, WAIT_S)]
    finally:
        consumer.close()
    return values


def test_confluent_kafka_produces_and_consumes_large_records_over_tls(cluster, pki):
    ports, _ = cluster
    _, files = pki
    config = _confluent_ssl(ports, files)
    _create(config, "tls-large")
    producer = Producer({**config, "message.max.bytes": 2 * LARGE_VALUE_BYTES})
    sent = [bytes([i]) * LARGE_VALUE_BYTES for i in range(LARGE_RECORDS)]
    for value in sent:
        producer.produce("tls-large", value)
    assert producer.flush(WAIT_S) == 0
    received = _consume_all(config, "tls-large", len(sent))
    digest = [hashlib.sha256(v).hexdigest() for v in received]
    assert digest == [hashlib.sha256(v).hexdigest() for v in sent]


def test_kafka_python_produces_and_consumes_over_tls(cluster, pki):
    ports, _ = cluster
    _, files = pki
    _create(_confluent_ssl(ports, files), "tls-kafka-python")
    options = {
        "bootstrap_servers": f"127.0.0.1:{ports['SSL']}",
        "security_protocol": "SSL",
        "ssl_cafile": str(files["ca"]),
    }
    producer = KafkaProducer(**options, acks="all")
    sent = [b"kp-%d" % i for i in range(50)]
    for value in sent:
        producer.send("tls-kafka-python", value=value)
    producer.flush(timeout=WAIT_S)
    producer.close(timeout=5)
    consumer = KafkaConsumer(
        "tls-kafka-python", **options, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    try:
        received = [record.value for _, record in zip(sent, consumer, strict=False)]
    finally:
        consumer.close()
    assert received == sent


def test_mtls_names_the_principal_a_rule_maps(cluster, pki):
    ports, broker_log = cluster
    _, files = pki
    config = _confluent_ssl(
        ports,
        files,
        "MTLS",
        **{
            "ssl.certificate.location": str(files["alice_cert"]),
            "ssl.key.location": str(files["alice_key"]),
        },
    )
    _create(config, "mtls")
    producer = Producer(config)
    producer.produce("mtls", b"from alice")
    assert producer.flush(WAIT_S) == 0
    assert _consume_all(config, "mtls", 1) == [b"from alice"]
    wait_until(
        lambda: "on listener MTLS: principal User:alice" in broker_log.read_text(),
        "the broker to log alice's principal",
        WAIT_S,
    )


def _api_versions_over(context: ssl.SSLContext, port: int) -> bytes:
    """An ApiVersions v0 request over TLS; the answer's bytes (raises if refused)."""
    request = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(struct.pack(">i", len(request)) + request)
        size = tls.recv(4)
        if len(size) < 4:
            raise ConnectionError("closed by the broker")
        return size


def _client_context(files, *, cert: str | None = None, versions=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(files["ca"]))
    if cert is not None:
        context.load_cert_chain(files[f"{cert}_cert"], files[f"{cert}_key"])
    if versions is not None:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let OpenSSL offer what the test asks
        context.minimum_version, context.maximum_version = versions
    return context


def test_what_mtls_does_not_accept_is_refused(cluster, pki):
    ports, broker_log = cluster
    _, files = pki
    mtls = ports["MTLS"]
    assert _api_versions_over(_client_context(files, cert="alice"), mtls)
    with pytest.raises((ssl.SSLError, ConnectionError)):  # no certificate
        _api_versions_over(_client_context(files), mtls)
    with pytest.raises((ssl.SSLError, ConnectionError)):  # TLS 1.2 on a TLS 1.3 listener
        tls12 = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
        _api_versions_over(_client_context(files, cert="alice", versions=tls12), mtls)
    with pytest.raises((ssl.SSLError, ConnectionError)):  # a name no rule maps
        _api_versions_over(_client_context(files, cert="bob"), mtls)
    wait_until(
        lambda: (
            "its certificate maps to no principal (No rules apply to CN=Bob,OU=Contractors"
            in broker_log.read_text()
        ),
        "the broker to log why bob was refused",
        WAIT_S,
    )


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_tls_1_1_is_refused_and_tls_1_2_accepted(cluster, pki):
    ports, _ = cluster
    _, files = pki
    tls12 = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    assert _api_versions_over(_client_context(files, versions=tls12), ports["SSL"])
    tls11 = (ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_1)
    with pytest.raises(ssl.SSLError):
        _api_versions_over(_client_context(files, versions=tls11), ports["SSL"])


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (
            ["ssl.keystore.type=PEM", "ssl.keystore.location=/nowhere/broker.pem"],
            "ssl.keystore.location=/nowhere/broker.pem (listener SSL)",
        ),
        (["ssl.keystore.location=/k.jks"], "ssl.keystore.type=JKS for listener SSL (SSL)"),
        (
            ["ssl.keystore.type=PEM", "ssl.keystore.location=/k", "ssl.cipher.suites=X"],
            "ssl.cipher.suites is not supported",
        ),
        (
            [
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
                "SSL:SASL_SSL"
            ],
            "SASL mechanism GSSAPI (Kafka's default) is not implemented",
        ),
    ],
)
def test_a_bad_ssl_configuration_is_refused_at_start(tmp_path, overrides, words):
    args = [
        "broker.id=1",
        "zookeeper.connect=127.0.0.1:1",
        f"log.dirs={tmp_path}",
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SSL://127.0.0.1:0",
        *overrides,
    ]
    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli", "broker", *(f"--override={a}" for a in args)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done
    assert words in done.stdout


def test_a_handshake_that_never_comes_is_closed_in_time(cluster):
    ports, _ = cluster
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=WAIT_S) as silent:
        assert silent.recv(1) == b""  # closed by the broker, not by our timeout
    assert time.monotonic() - started < WAIT_S


def _served_certificate(port: int, ca: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return tls.getpeercert(binary_form=True)


def test_a_renewed_certificate_is_served_without_a_restart(cluster, pki):
    # Last in the module: it replaces the broker's key store file (same CA, same names).
    ports, broker_log = cluster
    ca, files = pki
    before = _served_certificate(ports["SSL"], files["ca"])
    renewed = ca.issue_cert("127.0.0.1", "localhost")
    staged = files["keystore"].with_suffix(".new")
    renewed.private_key_and_cert_chain_pem.write_to_path(str(staged))
    staged.replace(files["keystore"])  # as a certificate manager does: a whole new file
    new_der = ssl.PEM_cert_to_DER_cert(renewed.cert_chain_pems[0].bytes().decode())
    wait_until(
        lambda: _served_certificate(ports["SSL"], files["ca"]) == new_der,
        "the renewed certificate to be served",
        WAIT_S,
    )
    assert before != new_der
    assert "listener SSL: certificates reloaded" in broker_log.read_text()
    # Clients go on working over the renewed certificate.
    config = _confluent_ssl(ports, files)
    _create(config, "tls-renewed")
    producer = Producer(config)
    producer.produce("tls-renewed", b"after the renewal")
    assert producer.flush(WAIT_S) == 0
