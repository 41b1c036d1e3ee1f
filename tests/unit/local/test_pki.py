"""The local cluster's certificate authority: leaves a TLS server and client accept from each
other, CN as the principal's source, keys private, the CA reused once made."""

from __future__ import annotations

import socket
import ssl
import stat
import threading

from cryptography import x509

from odradek.local.pki import LocalPki


def test_a_leaf_serves_and_authenticates_over_mutual_tls(tmp_path):
    pki = LocalPki.create(tmp_path / "pki", ["127.0.0.1", "localhost"])
    server_pem, client_pem = pki.issue("broker"), pki.issue("admin")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(server_pem)
    server.load_verify_locations(pki.ca_path)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=str(pki.ca_path))
    client.load_cert_chain(client_pem)
    seen: list[object] = []
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]

        def accept() -> None:
            conn, _ = listening.accept()
            with server.wrap_socket(conn, server_side=True) as tls:
                seen.append(tls.getpeercert()["subject"])
                tls.sendall(b"ok")

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            client.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.recv(2) == b"ok"
        thread.join(10)
    assert (("commonName", "admin"),) in seen[0]


def test_keys_are_private_and_the_ca_is_reused(tmp_path):
    directory = tmp_path / "pki"
    first = LocalPki.create(directory, ["127.0.0.1"])
    leaf = first.issue("controller")
    assert stat.S_IMODE(leaf.stat().st_mode) == 0o600
    assert stat.S_IMODE((directory / "ca.key").stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    again = LocalPki.create(directory, ["127.0.0.1"])
    assert again.ca_certificate == first.ca_certificate
    certificate = x509.load_pem_x509_certificates(leaf.read_bytes())[0]
    assert certificate.issuer == first.ca_certificate.subject
