"""KIP-368 with real clients: with connections.max.reauth.ms=2000 confluent-kafka (librdkafka
2.16) and kafka-python keep producing and consuming over more than three session lifetimes by
re-authenticating on their connections (counted by the broker); a raw client that does not is
disconnected at its first request after expiry (counted), and a re-authentication as another
user, or with another mechanism, is refused with Kafka's message.

One local cluster (ZooKeeper, a controller, one broker) for the module, with a SASL listener
(SASL_PLAINTEXT: PLAIN with JAAS users, SCRAM-SHA-512 created through the PLAINTEXT listener);
``connections.max.reauth.ms=2000`` broker-wide and 3000 for SCRAM-SHA-512 on that listener
(``listener.name.sasl.scram-sha-512.connections.max.reauth.ms``).
"""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import pytest
import scramp
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer

from odradek.protocol.schemas import request_schema
from support.consuming import poll_messages
from support.listener_ports import admin_host_port, listener_ports
from support.raw_socket import receive, send

pytestmark = pytest.mark.integration

WAIT_S = 30.0
LIFETIME_MS = 2000
SCRAM_LIFETIME_MS = 3000
RUN_S = 3.5 * LIFETIME_MS / 1000  # more than three lifetimes
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_paula="paula-secret" user_bob="bob-secret";'
)


@pytest.fixture(scope="module")
def cluster(local_cluster, tmp_path_factory):
    """(the SASL and PLAINTEXT ports, the admin host:port, the broker's log file)."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SASL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
        "SASL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": str(LIFETIME_MS),
        "listener.name.sasl.scram-sha-512.connections.max.reauth.ms": str(SCRAM_LIFETIME_MS),
    }
    data_dir = tmp_path_factory.mktemp("reauth-cluster")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        broker = next(m for m in state.members if m.role == "broker")
        ports = listener_ports(broker)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        upsert = UserScramCredentialUpsertion(
            "sue", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"sue-secret"
        )
        admin.alter_user_scram_credentials([upsert])["sue"].result(timeout=WAIT_S)
        yield ports, admin_host_port(broker), Path(broker.data_dir) / "broker.log"


def _metric(admin_address: str, name: str, labels: str) -> float:
    with urllib.request.urlopen(f"http://{admin_address}/metrics", timeout=WAIT_S) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(f"{name}{{{labels}}} "):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _reauthentications(admin_address: str, mechanism: str) -> float:
    labels = f'listener="SASL",mechanism="{mechanism}",result="reauthentication_succeeded"'
    return _metric(admin_address, "odradek_sasl_authentications_total", labels)


def _expired(admin_address: str) -> float:
    return _metric(admin_address, "odradek_connections_closed_total", 'reason="session_expired"')


def _settle() -> None:
    """Let clients that were just closed finish: a client shutting down may send its last
    request after its session ended without re-authenticating (it stopped doing so), and that
    connection is closed as expired: it must not count in the next test."""
    time.sleep(LIFETIME_MS / 1000)


def _confluent(ports, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{ports['SASL']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "paula", "paula-secret"), ("SCRAM-SHA-512", "sue", "sue-secret")],
)
def test_confluent_kafka_keeps_producing_and_consuming_over_three_lifetimes(
    cluster, mechanism, user, password
):
    ports, admin_address, _ = cluster
    config = _confluent(ports, mechanism, user, password)
    topic = f"reauth-ck-{mechanism.lower()}"
    admin = AdminClient(config)  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=WAIT_S)
    reauthenticated, expired = _reauthentications(admin_address, mechanism), _expired(admin_address)
    producer = Producer({**config, "linger.ms": 0})
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    sent: list[bytes] = []
    received: list[bytes] = []
    try:
        started = time.monotonic()
        while time.monotonic() - started < RUN_S:
            value = f"{topic}-{len(sent)}".encode()
            producer.produce(topic, value)
            assert producer.flush(WAIT_S) == 0
            sent.append(value)
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.append(message.value())
        left = len(sent) - len(received)
        received += [m.value() for m in poll_messages(consumer, left, WAIT_S, poll_s=0.2)]
        expired_while_running = _expired(admin_address) - expired
    finally:
        consumer.close()
        del producer, admin
        _settle()
    assert received == sent and len(sent) > 10
    # Each client re-authenticates every connection it keeps open (bootstrap, broker,
    # coordinator), about once a lifetime: at least three over the run.
    assert _reauthentications(admin_address, mechanism) - reauthenticated >= 3
    assert expired_while_running == 0  # none of the live clients' connections expired


def test_kafka_python_keeps_producing_over_three_lifetimes(cluster):
    ports, admin_address, _ = cluster
    reauthenticated, expired = _reauthentications(admin_address, "PLAIN"), _expired(admin_address)
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{ports['SASL']}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="paula",
        sasl_plain_password="paula-secret",
    )
    sent = 0
    try:
        started = time.monotonic()
        while time.monotonic() - started < RUN_S:
            producer.send("reauth-kp", f"v{sent}".encode()).get(timeout=WAIT_S)
            sent += 1
            time.sleep(0.1)
        expired_while_running = _expired(admin_address) - expired
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        "reauth-kp",
        bootstrap_servers=f"127.0.0.1:{ports['SASL']}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="paula",
        sasl_plain_password="paula-secret",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    try:
        values = [m.value for _, m in zip(range(sent), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(sent)]
    assert _reauthentications(admin_address, "PLAIN") - reauthenticated >= 3
    assert expired_while_running == 0
    _settle()


# -- a raw client: the project's codec over a socket ------------------------------------------


def _authenticate(sock: socket.socket, user: str, password: str, mechanism: str = "PLAIN"):
    """SaslHandshake v1 and one PLAIN SaslAuthenticate v2: its answer."""
    send(sock, request_schema(17, 1)(mechanism=mechanism), 1)
    assert receive(sock, 17, 1).error_code == 0
    token = f"\0{user}\0{password}".encode()
    send(sock, request_schema(36, 2)(auth_bytes=token), 2)
    return receive(sock, 36, 2)


def _metadata(sock: socket.socket) -> bool:
    """A Metadata request: True if answered, False if the connection was closed instead."""
    send(sock, request_schema(3, 1)(topics=None), 3)
    try:
        return bool(receive(sock, 3, 1).brokers)
    except ConnectionError:
        return False


def _lifetime_ms(answer) -> float:
    return answer.session_lifetime.total_seconds() * 1000


def test_a_client_that_does_not_re_authenticate_is_closed_at_its_next_request(cluster):
    ports, admin_address, log_file = cluster
    expired = _expired(admin_address)
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        answer = _authenticate(sock, "paula", "paula-secret")
        assert answer.error_code == 0 and _lifetime_ms(answer) == LIFETIME_MS
        assert _metadata(sock)
        time.sleep(LIFETIME_MS / 1000 + 0.3)
        assert not _metadata(sock)  # closed, not answered
    assert _expired(admin_address) == expired + 1
    assert "expired without re-authentication" in log_file.read_text()


def test_a_raw_client_re_authenticates_and_outlives_its_first_session(cluster):
    ports, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _authenticate(sock, "paula", "paula-secret")
        time.sleep(LIFETIME_MS * 0.6 / 1000)
        answer = _authenticate(sock, "paula", "paula-secret")  # on the same connection
        assert answer.error_code == 0 and _lifetime_ms(answer) == LIFETIME_MS
        time.sleep(LIFETIME_MS * 0.6 / 1000)  # past the first session's end
        assert _metadata(sock)


def test_the_listeners_mechanism_override_sets_the_lifetime(cluster):
    ports, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        send(sock, request_schema(17, 1)(mechanism="SCRAM-SHA-512"), 1)
        assert receive(sock, 17, 1).error_code == 0
        client = scramp.ScramClient(["SCRAM-SHA-512"], "sue", "sue-secret")
        send(sock, request_schema(36, 2)(auth_bytes=client.get_client_first().encode()), 2)
        client.set_server_first(receive(sock, 36, 2).auth_bytes.decode())
        send(sock, request_schema(36, 2)(auth_bytes=client.get_client_final().encode()), 3)
        answer = receive(sock, 36, 2)
        client.set_server_final(answer.auth_bytes.decode())
        assert _lifetime_ms(answer) == SCRAM_LIFETIME_MS


def test_a_re_authentication_as_another_user_is_refused(cluster):
    ports, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _authenticate(sock, "paula", "paula-secret")
        time.sleep(1.1)  # Kafka begins a re-authentication at most once a second
        answer = _authenticate(sock, "bob", "bob-secret")
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == (
            "Cannot change principals during re-authentication from User.paula: User.bob"
        )
        assert sock.recv(1) == b""  # then closed


def test_a_re_authentication_with_another_mechanism_is_refused(cluster):
    ports, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _authenticate(sock, "paula", "paula-secret")
        time.sleep(1.1)
        send(sock, request_schema(17, 1)(mechanism="SCRAM-SHA-512"), 4)
        assert receive(sock, 17, 1).error_code == 0  # as Kafka: the next token fails
        send(sock, request_schema(36, 2)(auth_bytes=b"n,,n=paula,r=abc"), 5)
        answer = receive(sock, 36, 2)
        assert answer.error_code == 58
        assert answer.error_message == (
            "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
            "re-authentication of mechanism 'PLAIN'"
        )
        assert sock.recv(1) == b""


def test_a_handshake_within_a_second_of_authenticating_is_an_illegal_state(cluster):
    ports, _, _ = cluster
    with socket.create_connection(("127.0.0.1", ports["SASL"]), timeout=WAIT_S) as sock:
        _authenticate(sock, "paula", "paula-secret")
        time.sleep(1.1)
        assert _authenticate(sock, "paula", "paula-secret").error_code == 0
        send(sock, request_schema(17, 1)(mechanism="PLAIN"), 6)  # at once: not begun
        assert receive(sock, 17, 1).error_code == 34  # ILLEGAL_SASL_STATE, as KafkaApis
        assert _metadata(sock)
