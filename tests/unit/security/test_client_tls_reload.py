"""A link's client side (``security.tls.ClientTls``) presents a renewed certificate without a
restart: real TLS handshakes on loopback against a server that requires a client certificate
and records the one it was shown."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading

import pytest
import trustme

from odradek.config.ssl import SslSettings
from odradek.security.tls import ClientTls, reload_certificates


def _settings(keystore: str, truststore: str) -> SslSettings:
    return SslSettings(
        "CONTROL_PLANE", "PEM", keystore, None, None, None, "PEM", truststore, None,
        "required", ("TLSv1.2", "TLSv1.3"), "DEFAULT",
    )  # fmt: skip


@pytest.fixture
def pki(tmp_path):
    ca = trustme.CA()
    files = {"ca": tmp_path / "ca.pem", "client": tmp_path / "client.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    ca.issue_cert("broker-1").private_key_and_cert_chain_pem.write_to_path(str(files["client"]))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    ca.configure_trust(server)
    server.verify_mode = ssl.CERT_REQUIRED
    return ca, files, server


def _presented(server: ssl.SSLContext, client: ssl.SSLContext) -> bytes:
    """The certificate ``client`` shows a server that asks for one (DER)."""
    seen: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as listening:
        listening.settimeout(10)

        def serve() -> None:
            raw, _ = listening.accept()
            with server.wrap_socket(raw, server_side=True) as tls:
                seen.append(tls.getpeercert(binary_form=True))
                tls.recv(1)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        port = listening.getsockname()[1]
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            client.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"x")
        thread.join(10)
    assert seen, "the server saw no handshake"
    return seen[0]


def _der(issued: trustme.LeafCert) -> bytes:
    return ssl.PEM_cert_to_DER_cert(issued.cert_chain_pems[0].bytes().decode())


def test_a_renewed_key_store_is_presented_by_the_same_context(pki):
    ca, files, server = pki
    links = ClientTls(_settings(str(files["client"]), str(files["ca"])))
    first = _presented(server, links.context)
    assert links.reload() is False  # nothing changed
    renewed = ca.issue_cert("broker-1")
    staged = files["client"].with_suffix(".new")
    renewed.private_key_and_cert_chain_pem.write_to_path(str(staged))
    staged.replace(files["client"])
    assert links.reload() is True
    assert links.reloads == 1
    assert _presented(server, links.context) == _der(renewed) != first


def test_a_key_store_that_no_longer_loads_keeps_the_certificate_there(pki, caplog):
    ca, files, server = pki
    links = ClientTls(_settings(str(files["client"]), str(files["ca"])))
    first = _presented(server, links.context)
    files["client"].write_text("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
    assert links.reload() is False
    assert "keeping their certificates" in caplog.text
    assert _presented(server, links.context) == first


def test_the_reload_loop_takes_new_files_until_stopped(pki):
    asyncio.run(_reload_loop(pki))


async def _reload_loop(pki) -> None:
    ca, files, _ = pki
    links = ClientTls(_settings(str(files["client"]), str(files["ca"])))
    stopped = asyncio.Event()
    task = asyncio.create_task(reload_certificates(stopped, [links], interval_s=0.01))
    renewed = ca.issue_cert("broker-1")
    staged = files["client"].with_suffix(".new")
    renewed.private_key_and_cert_chain_pem.write_to_path(str(staged))
    staged.replace(files["client"])
    for _ in range(500):  # bounded: 5 s
        if links.reloads:
            break
        await asyncio.sleep(0.01)
    stopped.set()
    await asyncio.wait_for(task, 5)
    assert links.reloads == 1
