"""SASL/OAUTHBEARER with JWTs checked against a JWKS (KIP-768): confluent-kafka (librdkafka's OIDC
client-credentials flow, and ``oauth_cb``), kafka-python and aiokafka authenticate with tokens of
a small identity provider, produce and consume; an expired token (kafka-python's too), one for
another audience and one signed by an unknown key are refused with SASL_AUTHENTICATION_FAILED;
ACLs see ``User:<sub>``; a key the provider rotates in is fetched when a token first names it.

The identity provider is an aiohttp server on 127.0.0.1 in a thread of the test process: its
JWKS at ``/jwks`` and a client-credentials token endpoint at ``/token`` (HTTP Basic client
authentication, as librdkafka sends it), which issues RS256 JWTs with ``sub`` = the client id,
``aud`` = ``kafka``, its ``iss``. One local cluster (ZooKeeper, a controller, one broker) for
the module with an OAUTH listener (SASL_PLAINTEXT, OAUTHBEARER only, Kafka's validator class),
the ACL authorizer with ``allow.everyone.if.no.acl.found`` (the PLAINTEXT listener the harness
uses is ANONYMOUS), and one topic whose ACLs let ``alice`` write and no one else. The CLI's
``--command-config`` with librdkafka's OIDC keys, or the Java client's, lists topics through the
OAUTH listener.
"""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import jwt
import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.net.sasl.oauth import AbstractTokenProvider as KpTokenProvider

from support.client_errors import librdkafka_errors
from support.consuming import poll_messages
from support.listener_ports import listener_ports

pytestmark = pytest.mark.integration

WAIT_S = 30.0
AUDIENCE = "kafka"
CLIENTS = {"alice": "alice-secret", "mallory": "mallory-secret"}
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
GUARDED = "oauth-guarded"  # alice may write it, no one else


class IdentityProvider:
    """A JWKS and a client-credentials token endpoint on 127.0.0.1, in a thread."""

    def __init__(self):
        self.signing = {"idp-1": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
        self.published = ["idp-1"]  # the kids /jwks lists
        self.jwks_fetches = 0
        self.issued = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def start(self) -> None:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(WAIT_S)
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(WAIT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT_S)

    async def _serve(self) -> int:
        app = web.Application()
        app.router.add_get("/jwks", self._jwks)
        app.router.add_post("/token", self._token)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return self._runner.addresses[0][1]

    async def _jwks(self, _request: web.Request) -> web.Response:
        self.jwks_fetches += 1
        keys = [
            {
                **RSAAlgorithm.to_jwk(self.signing[kid].public_key(), as_dict=True),
                "kid": kid,
                "use": "sig",
                "alg": "RS256",
            }
            for kid in self.published
        ]
        return web.json_response({"keys": keys})

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        if form.get("grant_type") != "client_credentials" or CLIENTS.get(str(client_id)) != secret:
            return web.json_response({"error": "invalid_client"}, status=401)
        self.issued += 1
        return web.json_response(
            {
                "access_token": self.token(str(client_id)),
                "token_type": "bearer",
                "expires_in": 300,
            }
        )

    def token(self, sub: str, kid: str = "idp-1", **claims) -> str:
        now = int(time.time())
        body = {"sub": sub, "aud": AUDIENCE, "iss": self.url, "iat": now, "exp": now + 300}
        key = self.signing[kid]
        return jwt.encode({**body, **claims}, key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def idp():
    provider = IdentityProvider()
    provider.start()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def cluster(idp, local_cluster, tmp_path_factory):
    """(ports by listener name, the broker's log file)."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,OAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
        "OAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
        ),
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/jwks",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": idp.url,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    data_dir = tmp_path_factory.mktemp("oauth-cluster")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        broker = next(m for m in state.members if m.role == "broker")
        ports = listener_ports(broker)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        admin.create_topics([NewTopic(GUARDED, num_partitions=1, replication_factor=1)])[
            GUARDED
        ].result(timeout=WAIT_S)
        bindings = [
            AclBinding(
                ResourceType.TOPIC,
                GUARDED,
                ResourcePatternType.LITERAL,
                "User:alice",
                "*",
                operation,
                AclPermissionType.ALLOW,
            )
            for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
        for future in admin.create_acls(bindings).values():
            future.result(timeout=WAIT_S)
        yield ports, Path(broker.data_dir) / "broker.log"


def _oidc(ports, idp, client_id: str, secret: str) -> dict:
    """librdkafka's own OIDC client-credentials flow against the test's token endpoint."""
    return {
        "bootstrap.servers": f"127.0.0.1:{ports['OAUTH']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret,
        "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token",
        "sasl.oauthbearer.scope": "kafka",
    }


def _with_token(ports, token: str) -> dict:
    """confluent-kafka with a token of the test's choosing (``oauth_cb``)."""
    return {
        "bootstrap.servers": f"127.0.0.1:{ports['OAUTH']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        # the lifetime librdkafka is told: the broker reads the token's own exp
        "oauth_cb": lambda _config: (token, time.time() + 300),
    }


def _round_trip_confluent(config: dict, topic: str) -> None:
    sent = [f"{topic}-{i}".encode() for i in range(3)]
    producer = Producer(config)
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        read = poll_messages(consumer, len(sent), WAIT_S, raise_errors=True)
    finally:
        consumer.close()
    assert [m.value() for m in read] == sent


def test_librdkafka_oidc_client_credentials_produce_and_consume(cluster, idp):
    ports, log_file = cluster
    issued = idp.issued
    _round_trip_confluent(_oidc(ports, idp, "alice", CLIENTS["alice"]), "oauth-oidc")
    assert idp.issued > issued  # the token came from the token endpoint
    assert "principal User:alice (OAUTHBEARER)" in log_file.read_text()


def test_confluent_kafka_oauth_cb_produces_and_consumes(cluster, idp):
    ports, _ = cluster
    _round_trip_confluent(_with_token(ports, idp.token("alice")), "oauth-cb")


class _KafkaPythonTokens(KpTokenProvider):
    def __init__(self, idp: IdentityProvider, sub: str, **claims):
        super().__init__()
        self.idp, self.sub, self.claims = idp, sub, claims

    def token(self) -> str:
        return self.idp.token(self.sub, **self.claims)


def test_kafka_python_produces_and_consumes(cluster, idp):
    ports, _ = cluster
    common = {
        "bootstrap_servers": f"127.0.0.1:{ports['OAUTH']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": _KafkaPythonTokens(idp, "alice"),
    }
    producer = KafkaProducer(**common)
    try:
        for i in range(3):
            producer.send("oauth-kp", f"v{i}".encode()).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        "oauth-kp", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common
    )
    try:
        values = [m.value for _, m in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


class _AioTokens(AioTokenProvider):
    def __init__(self, idp: IdentityProvider, sub: str):
        self.idp, self.sub = idp, sub

    async def token(self) -> str:
        return self.idp.token(self.sub)


def test_aiokafka_produces_and_consumes(cluster, idp):
    ports, _ = cluster
    config = {
        "bootstrap_servers": f"127.0.0.1:{ports['OAUTH']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": _AioTokens(idp, "alice"),
    }

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait("oauth-aio", f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("oauth-aio", auto_offset_reset="earliest", **config)
        await consumer.start()
        try:
            return [(await consumer.getone()).value for _ in range(3)]
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), WAIT_S)) == [b"a0", b"a1", b"a2"]


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("expired", "the token expired"),
        ("wrong audience", "Audience doesn't match"),
        ("unknown key", "no suitable verification key .* kid 'rogue'"),
    ],
)
def test_bad_tokens_are_refused_with_sasl_authentication_failed(cluster, idp, case, reason):
    ports, log_file = cluster
    if case == "expired":
        now = int(time.time())
        bad = idp.token("alice", iat=now - 600, exp=now - 120)  # beyond the 30 s of skew
    elif case == "wrong audience":
        bad = idp.token("alice", aud="someone-else")
    else:
        idp.signing["rogue"] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        bad = idp.token("alice", kid="rogue")  # never published
    errors = librdkafka_errors(_with_token(ports, bad))
    assert any(
        e.code() == KafkaError._AUTHENTICATION and "invalid_token" in e.str() for e in errors
    ), errors
    text = log_file.read_text()
    assert re.search(f"OAUTHBEARER token refused: .*{reason}", text), reason
    assert bad not in text  # a token is a credential: never logged


def test_kafka_python_answers_the_challenge_and_is_refused(cluster, idp, caplog):
    ports, _ = cluster
    now = int(time.time())
    expired = _KafkaPythonTokens(idp, "alice", iat=now - 600, exp=now - 120)
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{ports['OAUTH']}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=expired,
            # kafka-python 3.0 drops an answer that arrives with the broker's close in one read
            # ("socket disconnected"), so not every attempt shows the refusal: several are made.
            bootstrap_timeout_ms=12000,
        )
    assert 'SaslAuthenticationFailedError: {"status":"invalid_token"}' in caplog.text


def test_librdkafka_oidc_with_a_wrong_client_secret_gets_no_token(cluster, idp):
    ports, _ = cluster
    errors = librdkafka_errors(_oidc(ports, idp, "alice", "wrong-secret"))
    assert errors, "librdkafka reports the failed token request"


def test_acls_see_the_principal_from_sub(cluster, idp):
    ports, _ = cluster
    _round_trip_write = Producer(_with_token(ports, idp.token("alice")))
    _round_trip_write.produce(GUARDED, b"from alice")
    assert _round_trip_write.flush(WAIT_S) == 0

    failures: list[KafkaError] = []
    producer = Producer({**_with_token(ports, idp.token("mallory")), "message.timeout.ms": 10_000})
    producer.produce(GUARDED, b"from mallory", on_delivery=lambda err, _m: failures.append(err))
    producer.flush(WAIT_S)
    assert failures and failures[0] is not None
    assert failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, failures


def test_a_rotated_in_key_is_fetched_when_a_token_first_names_it(cluster, idp):
    ports, _ = cluster
    idp.signing["idp-2"] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    idp.published.append("idp-2")
    fetches = idp.jwks_fetches
    _round_trip_confluent(_with_token(ports, idp.token("alice", kid="idp-2")), "oauth-rotated")
    assert idp.jwks_fetches > fetches


def _odradek(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("keys", ["librdkafka", "java"])
def test_command_config_gives_the_commands_an_oidc_login(cluster, idp, tmp_path, keys):
    ports, _ = cluster
    properties = tmp_path / "oauth.properties"
    login = (
        "sasl.oauthbearer.method=oidc\nsasl.oauthbearer.client.id=alice\n"
        f"sasl.oauthbearer.client.secret={CLIENTS['alice']}\n"
        if keys == "librdkafka"
        else "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        f'required clientId="alice" clientSecret="{CLIENTS["alice"]}";\n'
    )
    properties.write_text(
        f"bootstrap.servers=127.0.0.1:{ports['OAUTH']}\n"
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f"{login}sasl.oauthbearer.token.endpoint.url={idp.url}/token\n"
    )
    issued = idp.issued
    listed = _odradek(tmp_path, "topics", "list", "--command-config", str(properties))
    assert listed.returncode == 0, listed.stderr
    assert GUARDED in listed.stdout.split() and idp.issued > issued
    # The commands on Odradek's own client do not speak OAUTHBEARER: one line saying so.
    refused = _odradek(tmp_path, "groups", "list", "--command-config", str(properties))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "OAUTHBEARER is not supported by this command" in refused.stderr
    assert CLIENTS["alice"] not in refused.stderr
