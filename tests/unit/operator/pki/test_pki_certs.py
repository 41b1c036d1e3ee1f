"""pki.certs makes CAs and leaves a real TLS handshake accepts, and decides renewal exactly."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from odradek_operator.pki import certs
from odradek_operator.pki.certs import CertificateAuthority, CertificateError

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return certs.make_ca("demo-cluster-ca", now=NOW, validity_days=365)


def test_ca_is_a_self_signed_ca_valid_for_its_days(ca: CertificateAuthority) -> None:
    cert = ca.certificate
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "demo-cluster-ca"
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca and constraints.path_length == 0
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=365)
    assert cert.not_valid_before_utc == NOW - certs.CLOCK_SKEW
    assert certs.signed_by(ca.cert_pem, ca.cert_pem)


def test_leaf_has_its_names_usages_and_is_signed_by_the_ca(ca: CertificateAuthority) -> None:
    leaf = certs.issue_leaf(
        ca, "demo-broker", now=NOW, validity_days=30, dns_names=["a.b", "a.b.ns", "a.b"]
    )
    cert = x509.load_pem_x509_certificate(leaf.cert_pem.encode())
    assert cert.subject.rfc4514_string() == "CN=demo-broker,O=odradek.io"
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["a.b", "a.b.ns"]
    ekus = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(ekus) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert certs.not_after(leaf.cert_pem) == NOW + datetime.timedelta(days=30)
    assert certs.signed_by(leaf.cert_pem, ca.cert_pem)
    other = certs.make_ca("other", now=NOW, validity_days=10)
    assert not certs.signed_by(leaf.cert_pem, other.cert_pem)
    assert leaf.keystore_pem.startswith("-----BEGIN PRIVATE KEY-----")


def test_client_only_leaf_and_a_leaf_never_outlives_its_ca(ca: CertificateAuthority) -> None:
    leaf = certs.issue_leaf(
        ca, "alice", now=NOW, validity_days=3650, server_auth=False, organization=None
    )
    cert = x509.load_pem_x509_certificate(leaf.cert_pem.encode())
    assert cert.subject.rfc4514_string() == "CN=alice"
    ekus = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(ekus) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert certs.not_after(leaf.cert_pem) == ca.certificate.not_valid_after_utc
    with pytest.raises(ValueError, match="serverAuth"):
        certs.issue_leaf(ca, "x", now=NOW, validity_days=1, server_auth=False, client_auth=False)
    with pytest.raises(ValueError, match="validity_days"):
        certs.issue_leaf(ca, "x", now=NOW, validity_days=0)


def test_needs_renewal_from_renewal_days_before_expiry(ca: CertificateAuthority) -> None:
    expiry = NOW + datetime.timedelta(days=365)
    before = expiry - datetime.timedelta(days=30, seconds=1)
    assert not certs.needs_renewal(ca.cert_pem, now=before, renewal_days=30)
    at = before + datetime.timedelta(seconds=1)
    assert certs.needs_renewal(ca.cert_pem, now=at, renewal_days=30)
    after = expiry + datetime.timedelta(days=1)
    assert certs.needs_renewal(ca.cert_pem, now=after, renewal_days=30)


def test_load_refuses_what_is_not_a_ca_or_not_its_key(ca: CertificateAuthority) -> None:
    assert CertificateAuthority.load(ca.cert_pem, ca.key_pem) == ca
    other = certs.make_ca("other", now=NOW, validity_days=10)
    with pytest.raises(CertificateError, match="does not belong"):
        CertificateAuthority.load(ca.cert_pem, other.key_pem)
    leaf = certs.issue_leaf(ca, "demo-broker", now=NOW, validity_days=5)
    with pytest.raises(CertificateError, match="not a CA"):
        CertificateAuthority.load(leaf.cert_pem, leaf.key_pem)
    with pytest.raises(CertificateError, match="PEM"):
        CertificateAuthority.load("garbage", ca.key_pem)
    with pytest.raises(CertificateError, match="private key"):
        CertificateAuthority.load(ca.cert_pem, "garbage")


def test_fingerprint_is_stable_and_distinct(ca: CertificateAuthority) -> None:
    assert certs.certificate_fingerprint(ca.cert_pem) == certs.certificate_fingerprint(ca.cert_pem)
    other = certs.make_ca("demo-cluster-ca", now=NOW, validity_days=365)
    assert certs.certificate_fingerprint(ca.cert_pem) != certs.certificate_fingerprint(
        other.cert_pem
    )


def _handshake(server_context: ssl.SSLContext, client_context: ssl.SSLContext) -> str:
    """The client certificate's CN as the server saw it, or "refused"."""
    peer: dict[str, object] = {}
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_context.wrap_socket(conn, server_side=True) as tls:
                    peer["cert"] = tls.getpeercert()
                    tls.sendall(tls.recv(1))
            except (ssl.SSLError, OSError) as exc:
                peer["error"] = exc

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with (
                socket.create_connection(listener.getsockname(), timeout=10) as raw,
                client_context.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                tls.sendall(b"x")
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass
        thread.join(timeout=10)
        assert not thread.is_alive()
    if "error" in peer:
        return "refused"
    subject = dict(item[0] for item in peer["cert"]["subject"])  # type: ignore[index]
    return str(subject["commonName"])


def test_a_real_mutual_tls_handshake_accepts_the_leaves(tmp_path: Path) -> None:
    """Server and client leaves of one CA (valid now) pass Python's ssl with the host name
    checked; a client of another CA is refused."""
    now = datetime.datetime.now(datetime.UTC)
    ca = certs.make_ca("cluster-ca", now=now, validity_days=2)
    server = certs.issue_leaf(ca, "demo-broker", now=now, validity_days=1, dns_names=["localhost"])
    client = certs.issue_leaf(
        ca, "odradek-operator", now=now, validity_days=1, server_auth=False, organization=None
    )
    stranger_ca = certs.make_ca("stranger", now=now, validity_days=2)
    stranger = certs.issue_leaf(stranger_ca, "eve", now=now, validity_days=1, server_auth=False)
    files = {
        "server.pem": server.keystore_pem,
        "client.pem": client.keystore_pem,
        "stranger.pem": stranger.keystore_pem,
        "ca.crt": ca.cert_pem,
    }
    for name, pem in files.items():
        (tmp_path / name).write_text(pem)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "server.pem")
    server_context.load_verify_locations(tmp_path / "ca.crt")
    server_context.verify_mode = ssl.CERT_REQUIRED

    def client(keystore: str) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        context.load_cert_chain(tmp_path / keystore)
        return context

    assert _handshake(server_context, client("client.pem")) == "odradek-operator"
    assert _handshake(server_context, client("stranger.pem")) == "refused"
