"""SASL listeners: confluent-kafka and kafka-python authenticate with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 (SASL_PLAINTEXT, and SCRAM over SASL_SSL), produce and consume; a wrong password, an
unknown user and an unsupported mechanism are refused, a request before authentication closes
the connection, and SCRAM users come and go with AlterUserScramCredentials (KIP-554).

One local cluster (ZooKeeper, a controller, one broker) for the module, with four listeners:
PLAINTEXT and CONTROL_PLANE (brokers and the controller), SASL (SASL_PLAINTEXT: PLAIN with a JAAS
user, SCRAM-SHA-256 and -512) and SASLSSL (SASL_SSL, SCRAM-SHA-512 only, a trustme certificate).
SCRAM users are created through the PLAINTEXT listener with confluent-kafka's admin client.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import scramp
import trustme
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer

from odradek.protocol.schemas import request_schema
from support.client_errors import librdkafka_errors
from support.consuming import poll_messages
from support.listener_ports import admin_host_port, listener_ports
from support.raw_socket import read_exactly, receive, send

pytestmark = pytest.mark.integration

WAIT_S = 30.0
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_paula="paula-secret";'
)
SCRAM = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
USERS = {
    "PLAIN": ("paula", "paula-secret"),
    "SCRAM-SHA-256": ("sam", "sam-secret"),
    "SCRAM-SHA-512": ("sue", "sue-secret"),
}


@pytest.fixture(scope="module")
def cluster(local_cluster, tmp_path_factory):
    """(ports by listener name, the broker's log file, the CA file, its admin host:port)."""
    root = tmp_path_factory.mktemp("sasl-pki")
    ca = trustme.CA(organization_name="Odradek tests")
    keystore, ca_file = root / "broker.pem", root / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(keystore)
    )
    ca.cert_pem.write_to_path(str(ca_file))
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SASL://127.0.0.1:0,"
        "SASLSSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
        "SASL:SASL_PLAINTEXT,SASLSSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.saslssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    data_dir = tmp_path_factory.mktemp("sasl-cluster")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        broker = next(m for m in state.members if m.role == "broker")
        ports = listener_ports(broker)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(SCRAM[mechanism], 4096), password.encode()
            )
            for mechanism, (user, password) in USERS.items()
            if mechanism in SCRAM
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=WAIT_S)
        yield ports, Path(broker.data_dir) / "broker.log", ca_file, admin_host_port(broker)


def _confluent(ports, mechanism, user, password, listener="SASL", **extra) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{ports[listener]}",
        "security.protocol": "SASL_PLAINTEXT" if listener == "SASL" else "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def _round_trip(config: dict, topic: str) -> list[bytes]:
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=WAIT_S
    )
    producer = Producer(config)
    sent = [f"{topic}-{i}".encode() for i in range(3)]
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        received = [m.value() for m in poll_messages(consumer, len(sent), WAIT_S)]
    finally:
        consumer.close()
    assert received == sent
    return received


@pytest.mark.parametrize("mechanism", list(USERS))
def test_confluent_kafka_authenticates_and_round_trips(cluster, mechanism):
    ports, _, _, _ = cluster
    user, password = USERS[mechanism]
    _round_trip(_confluent(ports, mechanism, user, password), f"ck-{mechanism.lower()}")


def test_confluent_kafka_over_sasl_ssl_with_scram_sha_512(cluster):
    ports, _, ca_file, _ = cluster
    user, password = USERS["SCRAM-SHA-512"]
    config = _confluent(
        ports,
        "SCRAM-SHA-512",
        user,
        password,
        listener="SASLSSL",
        **{"ssl.ca.location": str(ca_file)},
    )
    _round_trip(config, "ck-sasl-ssl")


@pytest.mark.parametrize("mechanism", list(USERS))
def test_kafka_python_authenticates_and_round_trips(cluster, mechanism):
    ports, _, _, _ = cluster
    user, password = USERS[mechanism]
    topic = f"kp-{mechanism.lower()}"
    common = {
        "bootstrap_servers": f"127.0.0.1:{ports['SASL']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    producer = KafkaProducer(**common)
    try:
        for i in range(3):
            producer.send(topic, f"v{i}".encode()).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common
    )
    try:
        values = [m.value for _, m in zip(range(3), consumer, strict=False)]  # no 4th wait
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "words"),
    [
        ("PLAIN", "paula", "wrong-password-1", "Invalid username or password"),
        ("PLAIN", "nobody", "wrong-password-2", "Invalid username or password"),
        ("SCRAM-SHA-256", "sam", "wrong-password-3", "invalid credentials"),
        ("SCRAM-SHA-512", "nobody", "wrong-password-4", "invalid credentials"),
    ],
)
def test_a_wrong_password_and_an_unknown_user_are_refused(
    cluster, mechanism, user, password, words
):
    ports, log_file, _, _ = cluster
    errors = librdkafka_errors(_confluent(ports, mechanism, user, password))
    assert any(e.code() == KafkaError._AUTHENTICATION and words in e.str() for e in errors), errors
    assert password not in log_file.read_text()


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones(cluster):
    ports, _, _, _ = cluster
    handshake = request_schema(17, 1)(mechanism="GSSAPI")
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        send(sock, handshake, 1)
        answer = receive(sock, 17, 1)
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        assert sock.recv(1) == b""  # then closed


def test_a_request_before_authentication_closes_the_connection(cluster):
    ports, log_file, _, _ = cluster
    api_versions = request_schema(18, 0)()
    metadata = request_schema(3, 1)(topics=None)
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        send(sock, api_versions, 1)
        versions = receive(sock, 18, 0)
        assert {k.api_key for k in versions.api_keys} >= {17, 36, 50, 51}
        send(sock, metadata, 2)
        assert sock.recv(1) == b""
    assert "unexpected Kafka request of type Metadata during SASL handshake" in log_file.read_text()


def test_scram_users_follow_alter_and_describe(cluster):
    ports, _, _, _ = cluster
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    upsert = UserScramCredentialUpsertion(
        "zoe", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"zoe-secret"
    )
    admin.alter_user_scram_credentials([upsert])["zoe"].result(timeout=WAIT_S)
    described = admin.describe_user_scram_credentials(["zoe"])["zoe"].result(timeout=WAIT_S)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = admin.describe_user_scram_credentials().result(timeout=WAIT_S)
    assert {"sam", "sue", "zoe"} <= set(everyone)

    config = _confluent(ports, "SCRAM-SHA-512", "zoe", "zoe-secret")
    assert AdminClient(config).list_topics(timeout=WAIT_S).brokers

    deletion = UserScramCredentialDeletion("zoe", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["zoe"].result(timeout=WAIT_S)
    errors = librdkafka_errors(config)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    with pytest.raises(Exception, match="does not exist"):
        admin.alter_user_scram_credentials([deletion])["zoe"].result(timeout=WAIT_S)
    too_few = UserScramCredentialUpsertion(
        "zoe", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024), b"x"
    )
    with pytest.raises(Exception, match="Too few iterations"):
        admin.alter_user_scram_credentials([too_few])["zoe"].result(timeout=WAIT_S)


def test_a_large_request_before_authentication_is_refused(cluster):
    ports, _, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        sock.sendall(struct.pack(">i", 524288 + 1) + b"\x00" * 1024)  # sasl.server.max.receive.size
        assert sock.recv(1) == b""


def _odradek(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )


def test_odradek_users_sets_lists_and_deletes_a_credential(cluster):
    ports, _, _, _ = cluster
    bootstrap = f"--bootstrap-server=127.0.0.1:{ports['PLAINTEXT']}"
    done = _odradek(
        "users",
        "set-scram",
        "--user=uma",
        "--mechanism=SCRAM-SHA-256",
        "--password=uma-secret",
        "--iterations=4096",
        bootstrap,
    )
    assert done.returncode == 0, done
    assert (
        AdminClient(_confluent(ports, "SCRAM-SHA-256", "uma", "uma-secret"))
        .list_topics(timeout=WAIT_S)
        .brokers
    )
    listed = _odradek("users", "list", "--user=uma", bootstrap)
    assert listed.returncode == 0, listed
    assert listed.stdout.split("\n")[1].split() == ["uma", "SCRAM-SHA-256", "4096"]
    assert (
        _odradek("users", "delete", "--user=uma", "--mechanism=SCRAM-SHA-256", bootstrap).returncode
        == 0
    )
    again = _odradek("users", "delete", "--user=uma", "--mechanism=SCRAM-SHA-256", bootstrap)
    assert again.returncode == 1
    assert "does not exist" in again.stderr
    too_few = _odradek(
        "users",
        "set-scram",
        "--user=uma",
        "--mechanism=SCRAM-SHA-512",
        "--password=x",
        "--iterations=100",
        bootstrap,
    )
    assert too_few.returncode == 1 and "Too few iterations" in too_few.stderr


def test_authentications_are_counted_by_listener_mechanism_and_result(cluster):
    _, _, _, admin_address = cluster
    assert admin_address is not None
    with urllib.request.urlopen(f"http://{admin_address}/metrics", timeout=WAIT_S) as answer:
        text = answer.read().decode()
    for labels in (
        'listener="SASL",mechanism="PLAIN",result="failed"',
        'listener="SASL",mechanism="PLAIN",result="succeeded"',
        'listener="SASL",mechanism="SCRAM-SHA-512",result="failed"',
        'listener="SASLSSL",mechanism="SCRAM-SHA-512",result="succeeded"',
        'listener="SASL",mechanism="unsupported",result="failed"',
    ):
        assert f"odradek_sasl_authentications_total{{{labels}}}" in text, labels
    assert 'odradek_connections_closed_total{reason="unauthenticated"}' in text


def _raw_token(sock: socket.socket, token: bytes) -> bytes:
    """A raw SASL frame (after SaslHandshake v0) and the server's raw answer."""
    sock.sendall(struct.pack(">i", len(token)) + token)
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    return read_exactly(sock, size)


def _v0_handshake(sock: socket.socket, mechanism: str) -> None:
    send(sock, request_schema(18, 0)(), 1)
    versions = {k.api_key: (k.min_version, k.max_version) for k in receive(sock, 18, 0).api_keys}
    assert versions[17] == (0, 1)  # SaslHandshake v0 is advertised (librdkafka 2.0.2 needs it)
    send(sock, request_schema(17, 0)(mechanism=mechanism), 2)
    assert receive(sock, 17, 0).error_code == 0


@pytest.mark.parametrize("mechanism", list(USERS))
def test_sasl_handshake_v0_takes_raw_tokens_then_kafka_requests(cluster, mechanism):
    ports, _, _, _ = cluster
    user, password = USERS[mechanism]
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _v0_handshake(sock, mechanism)
        if mechanism == "PLAIN":
            assert _raw_token(sock, f"\0{user}\0{password}".encode()) == b""  # as Kafka's
        else:
            client = scramp.ScramClient([mechanism], user, password)
            server_first = _raw_token(sock, client.get_client_first().encode())
            client.set_server_first(server_first.decode())
            server_final = _raw_token(sock, client.get_client_final().encode())
            client.set_server_final(server_final.decode())  # verifies the server's signature
        send(sock, request_schema(3, 1)(topics=None), 3)
        assert receive(sock, 3, 1).brokers  # authenticated: Kafka requests again


def test_a_refused_raw_token_closes_the_connection_without_an_answer(cluster):
    ports, log_file, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _v0_handshake(sock, "PLAIN")
        sock.sendall(struct.pack(">i", 6) + b"\xffjunk!")
        assert sock.recv(1) == b""  # no answer: closed after the failure delay
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _v0_handshake(sock, "SCRAM-SHA-512")
        sock.sendall(struct.pack(">i", 0))  # an empty client-first message
        assert sock.recv(1) == b""
    assert "Invalid SASL/PLAIN response: not UTF-8" in log_file.read_text()


def test_a_raw_token_larger_than_the_bound_closes_the_connection(cluster):
    ports, _, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _v0_handshake(sock, "PLAIN")
        sock.sendall(struct.pack(">i", 524288 + 1) + b"\x00" * 1024)  # sasl.server.max.receive.size
        assert sock.recv(1) == b""
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _v0_handshake(sock, "PLAIN")
        sock.sendall(struct.pack(">i", -1))  # a negative size
        assert sock.recv(1) == b""


def test_kafka_python_with_sasl_handshake_v0_round_trips(cluster):
    """kafka-python told the broker is Kafka 0.11 sends SaslHandshake v0 and raw tokens."""
    ports, _, _, _ = cluster
    user, password = USERS["SCRAM-SHA-256"]
    common = {
        "bootstrap_servers": f"127.0.0.1:{ports['SASL']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "api_version": (0, 11),  # its SaslHandshake is v0 (KIP-152 came in 1.0)
    }
    producer = KafkaProducer(**common)
    try:
        for i in range(3):
            producer.send("kp-v0", f"v{i}".encode()).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        "kp-v0", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common
    )
    try:
        values = [m.value for _, m in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]
