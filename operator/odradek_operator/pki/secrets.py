"""What the certificate Secrets hold (Strimzi's keys), as plain text in and out.

- CA certificate Secret (``C-cluster-ca-cert``, ``C-clients-ca-cert``): ``ca.crt``, the current
  CA certificate, and while a renewed CA replaces an older one, the older certificates under
  ``ca-<not-after>.crt`` (Strimzi's ``ca-2026-12-03T12-00-00Z.crt``), trusted until every leaf
  is re-issued by the new CA;
- CA key Secret (``C-cluster-ca``, ``C-clients-ca``): ``ca.key``;
- leaf Secret (``C-broker-certs``, ``C-controller-certs``, ``C-zookeeper-certs``): one
  ``<pod>.pem`` per pod, the private key then its certificate (what ``ssl.keystore.location``
  takes), and ``ca.crt``, the trust bundle (every certificate of the CA certificate Secret);
- ``C-operator-certs``: ``operator.pem`` (same layout) and ``ca.crt``.

Each carries ``odradek.io/ca-generation``: on a CA's Secrets the CA's generation (0, then one
more at each renewal), on a leaf Secret the generation of the CA that signed its leaves.

``encode``/``decode`` convert to and from a Secret's base64 ``data``. Pure: any thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any

from odradek_operator.pki.certs import (
    CertificateAuthority,
    CertificateError,
    Leaf,
    not_after,
    parse_certificates,
)

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "OPERATOR_PEM",
    "ca_cert_data",
    "ca_key_data",
    "certificates_hash",
    "decode",
    "encode",
    "leaf_data",
    "leaf_pem_key",
    "read_ca",
    "read_leaf_pems",
    "retained_ca_certs",
    "retained_key",
    "trust_bundle",
]

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
OPERATOR_PEM = "operator.pem"
_RETAINED_PREFIX = "ca-"
_PEM_SUFFIX = ".pem"


def encode(data: Mapping[str, str]) -> dict[str, str]:
    """A Secret's ``data`` from text values."""
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


def decode(secret: Mapping[str, Any] | None) -> dict[str, str]:
    """A Secret's ``data`` (and ``stringData``, as a user may write it) as text; {} for None."""
    if not secret:
        return {}
    out: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise CertificateError(f"key {key!r} is not base64 of text") from exc
    out.update(secret.get("stringData") or {})
    return out


def retained_key(cert_pem: str) -> str:
    """The key an older CA certificate is kept under: ``ca-<not after, UTC>.crt``."""
    return f"{_RETAINED_PREFIX}{not_after(cert_pem):%Y-%m-%dT%H-%M-%SZ}.crt"


def ca_cert_data(
    ca: CertificateAuthority, retained: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The CA certificate Secret: ``ca.crt`` and the retained older certificates."""
    return {CA_CERT: ca.cert_pem, **(retained or {})}


def ca_key_data(ca: CertificateAuthority) -> dict[str, str]:
    return {CA_KEY: ca.key_pem}


def retained_ca_certs(cert_data: Mapping[str, str]) -> dict[str, str]:
    """The older CA certificates a CA certificate Secret still carries."""
    return {
        key: value
        for key, value in cert_data.items()
        if key.startswith(_RETAINED_PREFIX) and key.endswith(".crt")
    }


def trust_bundle(cert_data: Mapping[str, str]) -> str:
    """Every CA certificate of a CA certificate Secret, current first: what peers trust."""
    if CA_CERT not in cert_data:
        raise CertificateError(f"no {CA_CERT}")
    parts = [cert_data[CA_CERT]]
    parts += [pem for _, pem in sorted(retained_ca_certs(cert_data).items())]
    bundle = "".join(part if part.endswith("\n") else part + "\n" for part in parts)
    parse_certificates(bundle)
    return bundle


def read_ca(cert_data: Mapping[str, str], key_data: Mapping[str, str]) -> CertificateAuthority:
    """The CA of its two Secrets' contents; ``CertificateError`` saying what is missing or wrong."""
    if CA_CERT not in cert_data:
        raise CertificateError(f"the CA certificate Secret has no {CA_CERT}")
    if CA_KEY not in key_data:
        raise CertificateError(f"the CA key Secret has no {CA_KEY}")
    return CertificateAuthority.load(cert_data[CA_CERT], key_data[CA_KEY])


def leaf_pem_key(pod: str) -> str:
    return f"{pod}{_PEM_SUFFIX}"


def leaf_data(leaves: Mapping[str, Leaf], trust: str) -> dict[str, str]:
    """A leaf Secret: ``<pod>.pem`` for each pod name in ``leaves`` and the trust bundle."""
    out = {leaf_pem_key(pod): leaf.keystore_pem for pod, leaf in sorted(leaves.items())}
    out[CA_CERT] = trust
    return out


def read_leaf_pems(data: Mapping[str, str]) -> dict[str, str]:
    """Pod name to its key-and-certificate PEM, from a leaf Secret's contents."""
    return {
        key.removesuffix(_PEM_SUFFIX): value
        for key, value in data.items()
        if key.endswith(_PEM_SUFFIX)
    }


def certificates_hash(*datas: Mapping[str, str]) -> str:
    """A short stable hash of Secrets' contents: in the pod template, so a change rolls pods."""
    digest = hashlib.sha256()
    for data in datas:
        for key in sorted(data):
            digest.update(key.encode() + b"\0" + data[key].encode() + b"\0")
        digest.update(b"\1")
    return digest.hexdigest()[:16]
