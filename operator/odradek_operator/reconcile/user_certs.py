"""A tls OdradekUser's client certificate: ``CN=<user>``, clientAuth, signed by the clients CA.

The certificate in the user's Secret is kept while it is still good: it parses, its key is the
Secret's key, its subject is ``CN=<user>`` exactly (the cluster's principal mapping turns that
into ``User:<user>``), it is signed by the clients CA of now (``C-clients-ca-cert`` /
``C-clients-ca``, pki/), and it is not within ``renewalDays`` of its expiry. Otherwise a new key
and certificate are issued (``validityDays``), which is also how a renewed clients CA reaches
its users (the old CA stays trusted by the brokers until every leaf is re-issued, pki/).
``validityDays`` and ``renewalDays`` are the cluster's ``spec.clientsCa`` (Strimzi's fields,
``CaSpec``).

Time is passed in (``now``), so renewal is exact in tests.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from odradek_operator import names
from odradek_operator.model.spec.cluster import CaSpec
from odradek_operator.model.users import UserSpec
from odradek_operator.pki import certs
from odradek_operator.pki import secrets as pki_secrets
from odradek_operator.reconcile.status import Retry

__all__ = ["IssuedCertificate", "user_certificate"]

WAIT_S = 10.0


@dataclass(frozen=True)
class IssuedCertificate:
    certificate: str  # PEM
    key: str  # PKCS#8 PEM
    not_after: str  # RFC 3339, UTC
    expiry_s: float  # the same, Unix seconds
    renewed: str  # what was done, in words ("" when the Secret's certificate was kept)


def _why_not_kept(
    cert_pem: str | None, key_pem: str | None, user: str, ca_pem: str, now, renewal_days: int
) -> str | None:
    """None when the Secret's certificate may stay; else why it is replaced."""
    if not cert_pem or not key_pem:
        return "issued"
    try:
        certificate = x509.load_pem_x509_certificate(cert_pem.encode())
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except ValueError:
        return "re-issued (the Secret's certificate or key did not load)"
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if key.public_key().public_bytes(encoding, public) != certificate.public_key().public_bytes(
        encoding, public
    ):
        return "re-issued (the Secret's key is not the certificate's)"
    subject = certificate.subject
    if len(subject) != 1 or subject.get_attributes_for_oid(NameOID.COMMON_NAME) != [
        x509.NameAttribute(NameOID.COMMON_NAME, user)
    ]:
        return f"re-issued (its subject was not CN={user})"
    if not certs.signed_by(cert_pem, ca_pem):
        return "re-issued (signed by another CA than the clients CA)"
    if certs.needs_renewal(cert_pem, now=now, renewal_days=renewal_days):
        return "renewed (expiring)"
    return None


async def user_certificate(
    kube, spec: UserSpec, clients_ca: CaSpec, live: Mapping | None, *, now: datetime.datetime
) -> IssuedCertificate:
    cert_secret = await kube.get(
        "Secret", names.clients_ca_cert_secret(spec.cluster), spec.namespace
    )
    key_secret = await kube.get("Secret", names.clients_ca_key_secret(spec.cluster), spec.namespace)
    try:
        ca = pki_secrets.read_ca(pki_secrets.decode(cert_secret), pki_secrets.decode(key_secret))
    except certs.CertificateError as e:
        raise Retry(
            f"the clients CA of cluster {spec.cluster} is not usable yet: {e}",
            WAIT_S,
            "ClientsCaNotReady",
        ) from e
    try:
        data = pki_secrets.decode(live)
    except certs.CertificateError:
        data = {}  # a Secret edited into something unreadable: issued again
    validity_days, renewal_days = clients_ca.validity_days, clients_ca.renewal_days
    cert_pem, key_pem = data.get("user.crt"), data.get("user.key")
    why = _why_not_kept(cert_pem, key_pem, spec.name, ca.cert_pem, now, renewal_days)
    if why is not None:
        leaf = certs.issue_leaf(
            ca,
            spec.name,
            now=now,
            validity_days=validity_days,
            server_auth=False,
            client_auth=True,
            organization=None,
        )
        cert_pem, key_pem = leaf.cert_pem, leaf.key_pem
    assert cert_pem is not None and key_pem is not None
    expiry = certs.not_after(cert_pem)
    renewed = f"client certificate {why}" if why else ""
    return IssuedCertificate(
        cert_pem, key_pem, expiry.strftime("%Y-%m-%dT%H:%M:%SZ"), expiry.timestamp(), renewed
    )
