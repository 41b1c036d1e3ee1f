"""pki.secrets writes Strimzi's keys and reads them back, with older CAs kept in the bundle."""

from __future__ import annotations

import datetime

import pytest
from cryptography.hazmat.primitives import hashes

from odradek_operator.pki import certs, secrets
from odradek_operator.pki.certs import CertificateError

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)


def test_encode_decode_round_trip_and_string_data() -> None:
    data = {"ca.crt": "pem\n", "x": "é"}
    assert secrets.decode({"data": secrets.encode(data)}) == data
    assert secrets.decode({"stringData": {"ca.key": "k"}}) == {"ca.key": "k"}
    assert secrets.decode(None) == {}
    with pytest.raises(CertificateError, match="base64"):
        secrets.decode({"data": {"ca.crt": "%%%"}})


def test_ca_secrets_round_trip_and_missing_keys_are_named() -> None:
    ca = certs.make_ca("demo-cluster-ca", now=NOW, validity_days=10)
    cert_data, key_data = secrets.ca_cert_data(ca), secrets.ca_key_data(ca)
    assert set(cert_data) == {"ca.crt"} and set(key_data) == {"ca.key"}
    assert secrets.read_ca(cert_data, key_data) == ca
    with pytest.raises(CertificateError, match="certificate Secret has no ca.crt"):
        secrets.read_ca({}, key_data)
    with pytest.raises(CertificateError, match="key Secret has no ca.key"):
        secrets.read_ca(cert_data, {})


def test_trust_bundle_holds_the_current_then_the_retained_cas() -> None:
    old = certs.make_ca("demo-cluster-ca", now=NOW, validity_days=10)
    new = certs.make_ca("demo-cluster-ca", now=NOW, validity_days=20)
    key = secrets.retained_key(old.cert_pem)
    assert key == "ca-2026-12-13T12-00-00Z.crt"
    data = secrets.ca_cert_data(new, {key: old.cert_pem})
    assert secrets.retained_ca_certs(data) == {key: old.cert_pem}
    bundle = secrets.trust_bundle(data)
    fingerprints = [c.fingerprint(hashes.SHA256()).hex() for c in certs.parse_certificates(bundle)]
    assert fingerprints == [
        certs.certificate_fingerprint(new.cert_pem),
        certs.certificate_fingerprint(old.cert_pem),
    ]
    with pytest.raises(CertificateError):
        secrets.trust_bundle({})


def test_leaf_secret_holds_key_then_chain_per_pod_and_the_trust() -> None:
    ca = certs.make_ca("demo-cluster-ca", now=NOW, validity_days=10)
    leaves = {
        p: certs.issue_leaf(ca, "demo-broker", now=NOW, validity_days=5)
        for p in ("demo-broker-1", "demo-broker-0")
    }
    data = secrets.leaf_data(leaves, ca.cert_pem)
    assert list(data) == ["demo-broker-0.pem", "demo-broker-1.pem", "ca.crt"]
    assert data["demo-broker-0.pem"].index("PRIVATE KEY") < data["demo-broker-0.pem"].index(
        "CERTIFICATE"
    )
    assert secrets.read_leaf_pems(data) == {p: leaf.keystore_pem for p, leaf in leaves.items()}
    assert secrets.certificates_hash(data) == secrets.certificates_hash(dict(data))
    assert secrets.certificates_hash(data) != secrets.certificates_hash({**data, "ca.crt": "x"})
