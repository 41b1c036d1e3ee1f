"""The controller's listener on loopback: ApiVersions lists only what it serves, AlterPartition
reaches the controller, and whatever it does not serve, or cannot parse, closes only that
connection while the listener keeps serving."""

from __future__ import annotations

import asyncio
import ssl
import struct

import pytest
import trustme
from test_alter_partition import request as alter_partition_request

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.config.ssl import SslSettings
from odradek.controller.handlers import served
from odradek.controller.model import topic_uuid
from odradek.controller.server import ControllerServer
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import encode_request
from odradek.security.tls import ListenerTls, client_context

TIMEOUT_S = 10.0


async def _serving(harness, *, with_topic: bool = True):
    await harness.start()
    topic_id = harness.store.create_topic("t", {0: (1, 2)}) if with_topic else None
    await harness.settle()
    server = ControllerServer(served(harness.controller))
    port = await server.start("127.0.0.1", 0)
    # The controller's events run as they would in ``run``.
    stop = asyncio.Event()
    harness.controller.election = None  # run() must not campaign or resign here
    runner = asyncio.ensure_future(harness.controller.run(stop))
    return server, port, topic_id, stop, runner


async def _stop(server, stop, runner):
    stop.set()
    await asyncio.wait_for(runner, TIMEOUT_S)
    await server.stop()


async def _closed_by_server(port: int, frame: bytes) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame)
    await writer.drain()
    try:
        async with asyncio.timeout(TIMEOUT_S):
            return await reader.read() == b""
    finally:
        writer.close()


def test_api_versions_lists_exactly_what_the_controller_serves(harness):
    async def scenario():
        server, port, _, stop, runner = await _serving(harness, with_topic=False)
        try:
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                versions = await connection.negotiate_versions()
            assert dict(versions) == {
                ApiKey.API_VERSIONS: (0, 4),
                ApiKey.ALTER_PARTITION: (2, 3),
                ApiKey.ELECT_LEADERS: (0, 2),
                ApiKey.CONTROLLED_SHUTDOWN: (3, 3),
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
                ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
            }
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())


def test_alter_partition_over_tcp_changes_the_isr(harness):
    async def scenario():
        server, port, topic_id, stop, runner = await _serving(harness)
        try:
            epoch = harness.store.brokers[1].epoch
            req = alter_partition_request(2, 1, epoch, topic_uuid(topic_id), [(0, 0, (1,), 0)])
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                response = await connection.send(req, timeout_s=TIMEOUT_S)
            p = response.topics[0].partitions[0]
            assert (p.error_code, p.isr, p.partition_epoch) == (ErrorCode.none, (1,), 1)
            assert harness.store.states[("t", 0)][0].isr == (1,)
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())


def _metadata():
    return schemas.request_schema(ApiKey.METADATA, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">i", -5), id="negative size"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="size above the limit"),
        pytest.param(_frame(b"\x00\x38\x00\x02\x00\x00\x00\x01\x00"), id="truncated header"),
        pytest.param(
            _frame(encode_request(_metadata(), 1, "x")),
            id="an API it does not serve",
        ),
        pytest.param(
            _frame(struct.pack(">hhih", ApiKey.ALTER_PARTITION, 9, 1, -1) + b"\x00"),
            id="a version it does not serve",
        ),
        pytest.param(
            _frame(struct.pack(">hhih", ApiKey.ALTER_PARTITION, 2, 1, -1) + b"\x00\xff\xff"),
            id="a body that does not parse",
        ),
    ],
)
def test_bad_input_closes_the_connection_and_the_listener_serves_on(harness, frame):
    async def scenario():
        server, port, _, stop, runner = await _serving(harness, with_topic=False)
        try:
            assert await _closed_by_server(port, frame)
            assert server.closed_connections == 1
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                assert ApiKey.ALTER_PARTITION in await connection.negotiate_versions()
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())


def test_a_newer_api_versions_gets_the_kip_511_answer(harness):
    async def scenario():
        server, port, _, stop, runner = await _serving(harness, with_topic=False)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            body = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 7, -1) + b"\x00"
            writer.write(_frame(body))
            async with asyncio.timeout(TIMEOUT_S):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answer = await reader.readexactly(size)
            writer.close()
            correlation_id, error_code = struct.unpack(">ih", answer[:6])
            assert (correlation_id, error_code) == (7, ErrorCode.unsupported_version)
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())


def test_a_client_error_is_raised_not_hung_when_the_controller_closes(harness):
    async def scenario():
        server, port, _, stop, runner = await _serving(harness, with_topic=False)
        try:
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                req = _metadata()
                with pytest.raises(ClientError):
                    await connection.send(req, timeout_s=TIMEOUT_S)
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())


# -- who may ask: mutual TLS and CLUSTER_ACTION (issue 22) ------------------------------------


def _tls_settings(keystore: str, truststore: str) -> SslSettings:
    return SslSettings(
        "CONTROLLER", "PEM", keystore, None, None, None, "PEM", truststore, None,
        "required", ("TLSv1.2", "TLSv1.3"), "RULE:^CN=([^,]*).*$/$1/,DEFAULT",
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the controller's certificate, and client certificates for a broker and a user."""
    ca = trustme.CA()
    root = tmp_path_factory.mktemp("pki")
    trust = root / "ca.pem"
    ca.cert_pem.write_to_path(str(trust))
    paths = {"ca": str(trust)}
    for name, identity in (("controller", "127.0.0.1"), ("broker", "broker-1"), ("user", "mal")):
        cert = ca.issue_cert(identity, common_name=identity)
        path = root / f"{name}.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        paths[name] = str(path)
    return paths


def test_only_a_peer_allowed_cluster_action_is_heard_and_no_epoch_is_compared_first(harness, pki):
    allowed = {"User:broker-1"}
    asked: list[tuple[str, str]] = []

    def authorize(principal, host):
        asked.append((str(principal), host))
        return str(principal) in allowed

    async def scenario():
        await harness.start()
        topic_id = harness.store.create_topic("t", {0: (1, 2)})
        await harness.settle()
        tls = ListenerTls.of(_tls_settings(pki["controller"], pki["ca"]))
        server = ControllerServer(served(harness.controller), tls=tls, authorize=authorize)
        port = await server.start("127.0.0.1", 0)
        stop = asyncio.Event()
        harness.controller.election = None
        runner = asyncio.ensure_future(harness.controller.run(stop))
        wrong_epoch = harness.store.brokers[1].epoch + 1000
        forged = alter_partition_request(2, 1, wrong_epoch, topic_uuid(topic_id), [(0, 0, (1,), 0)])
        try:
            # A user's certificate: refused before the broker epoch is looked at.
            user = client_context(_tls_settings(pki["user"], pki["ca"]))
            async with await BrokerConnection.open("127.0.0.1", port, tls=user) as connection:
                response = await connection.send(forged, timeout_s=TIMEOUT_S)
            assert response.error_code == ErrorCode.cluster_authorization_failed
            assert harness.store.states[("t", 0)][0].isr == (1, 2)
            # The broker's certificate: heard, and the wrong epoch is what refuses it.
            broker = client_context(_tls_settings(pki["broker"], pki["ca"]))
            async with await BrokerConnection.open("127.0.0.1", port, tls=broker) as connection:
                response = await connection.send(forged, timeout_s=TIMEOUT_S)
            assert response.error_code == ErrorCode.stale_broker_epoch
            # Without a certificate the handshake fails (ssl.client.auth=required).
            anonymous = ssl.create_default_context(cafile=pki["ca"])
            with pytest.raises(ClientError):
                async with await BrokerConnection.open("127.0.0.1", port, tls=anonymous) as c:
                    await c.send(forged, timeout_s=TIMEOUT_S)
            assert asked[:2] == [("User:mal", "127.0.0.1"), ("User:broker-1", "127.0.0.1")]
            assert server.refused_requests == 1
        finally:
            await _stop(server, stop, runner)

    asyncio.run(scenario())
