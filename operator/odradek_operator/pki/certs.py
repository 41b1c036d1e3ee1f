"""Certificates as values: a certificate authority, the leaves it signs, their expiry.

A ``CertificateAuthority`` is a self-signed CA (EC P-256 key, ``basicConstraints CA:TRUE,
pathlen:0``, keyCertSign and cRLSign) that signs leaves; a ``Leaf`` is one process's key and
certificate (digitalSignature, the serverAuth and/or clientAuth extended key usages, the DNS
names it answers to). Keys are PKCS#8 PEM without a password: they live in Kubernetes Secrets,
whose access control is what protects them (as Strimzi's do).

Validity follows Strimzi's ``validityDays`` / ``renewalDays``: a certificate is valid from
``now`` minus ``CLOCK_SKEW`` (clocks of the pods differ a little) for ``validity_days``, and
``needs_renewal`` is true from ``renewal_days`` before its ``not_after``. Time is always passed
in (``now``), never read here, so the decisions are exact in tests.

Pure but for randomness (keys, serial numbers): any thread.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CLOCK_SKEW",
    "CertificateAuthority",
    "CertificateError",
    "Leaf",
    "certificate_fingerprint",
    "issue_leaf",
    "make_ca",
    "needs_renewal",
    "not_after",
    "parse_certificates",
    "signed_by",
]

CLOCK_SKEW = datetime.timedelta(minutes=5)
VALIDITY_DAYS_MAX = 36500  # a hundred years: anything longer is a typo


class CertificateError(ValueError):
    """A PEM that is not what it should be: unreadable, not a CA, a key that does not match."""


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A CA's certificate and private key, both PEM."""

    cert_pem: str
    key_pem: str

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem.encode())

    @classmethod
    def load(cls, cert_pem: str, key_pem: str) -> CertificateAuthority:
        """A CA read back (a Secret, or one a user brought); ``CertificateError`` when the
        certificate is not a CA or the key is not its key."""
        certificate = _load_certificate(cert_pem)
        key = _load_key(key_pem)
        try:
            constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
        except x509.ExtensionNotFound as exc:
            raise CertificateError("the certificate has no basicConstraints: not a CA") from exc
        if not constraints.value.ca:
            raise CertificateError("the certificate is not a CA (basicConstraints CA:FALSE)")
        if _public_bytes(key.public_key()) != _public_bytes(certificate.public_key()):
            raise CertificateError("the private key does not belong to the CA certificate")
        return cls(cert_pem=cert_pem, key_pem=key_pem)


@dataclass(frozen=True, slots=True)
class Leaf:
    """A leaf's certificate (PEM) and private key (PKCS#8 PEM)."""

    cert_pem: str
    key_pem: str

    @property
    def keystore_pem(self) -> str:
        """Private key then certificate: one file, what ``ssl.keystore.location`` takes."""
        return self.key_pem + self.cert_pem


def make_ca(
    common_name: str,
    *,
    now: datetime.datetime,
    validity_days: int,
    organization: str = "odradek.io",
) -> CertificateAuthority:
    """A new self-signed CA, valid from ``now`` (less the clock skew) for ``validity_days``."""
    _check_validity(validity_days)
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name, organization)
    start = now - CLOCK_SKEW
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + datetime.timedelta(days=validity_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    certificate = builder.sign(key, hashes.SHA256())
    return CertificateAuthority(cert_pem=_cert_pem(certificate), key_pem=_key_pem(key))


def issue_leaf(
    ca: CertificateAuthority,
    common_name: str,
    *,
    now: datetime.datetime,
    validity_days: int,
    dns_names: Sequence[str] = (),
    server_auth: bool = True,
    client_auth: bool = True,
    organization: str | None = "odradek.io",
) -> Leaf:
    """A leaf signed by ``ca``: subject ``CN=common_name[,O=organization]``, the DNS names as
    subjectAltName, the chosen EKUs. Never valid past the CA (a leaf outliving its signer would
    fail verification anyway; this makes its expiry honest)."""
    _check_validity(validity_days)
    if not (server_auth or client_auth):
        raise ValueError("a leaf needs serverAuth, clientAuth or both")
    ca_cert = ca.certificate
    ca_key = _load_key(ca.key_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server_auth + [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ] * client_auth
    end = min(now + datetime.timedelta(days=validity_days), ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if dns_names:
        names = [x509.DNSName(name) for name in dict.fromkeys(dns_names)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    certificate = builder.sign(ca_key, hashes.SHA256())
    return Leaf(cert_pem=_cert_pem(certificate), key_pem=_key_pem(key))


def not_after(cert_pem: str) -> datetime.datetime:
    """The expiry (UTC, aware) of the first certificate in ``cert_pem``."""
    return _load_certificate(cert_pem).not_valid_after_utc


def needs_renewal(cert_pem: str, *, now: datetime.datetime, renewal_days: int) -> bool:
    """True from ``renewal_days`` before the certificate's expiry (and after it)."""
    return now >= not_after(cert_pem) - datetime.timedelta(days=renewal_days)


def signed_by(cert_pem: str, ca_cert_pem: str) -> bool:
    """True when the (first) certificate in ``cert_pem`` carries a valid signature of the CA."""
    certificate = _load_certificate(cert_pem)
    try:
        certificate.verify_directly_issued_by(_load_certificate(ca_cert_pem))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def certificate_fingerprint(cert_pem: str) -> str:
    """SHA-256 of the first certificate's DER, hex: a stable name for a certificate."""
    return _load_certificate(cert_pem).fingerprint(hashes.SHA256()).hex()


def parse_certificates(pem: str) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle (``CertificateError`` if none or unreadable)."""
    try:
        certificates = x509.load_pem_x509_certificates(pem.encode())
    except ValueError as exc:
        raise CertificateError(f"not a PEM certificate bundle: {exc}") from exc
    return certificates


def _load_certificate(pem: str) -> x509.Certificate:
    return parse_certificates(pem)[0]


def _load_key(pem: str) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"not an unencrypted PEM private key: {exc}") from exc
    return key  # type: ignore[return-value]  # RSA keys a user brings sign the same way


def _public_bytes(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _name(common_name: str, organization: str | None) -> x509.Name:
    # O before CN in the certificate, so RFC 2253 (last first, as Java's X500Principal and the
    # broker's principal print it) reads "CN=<cn>,O=<organization>".
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _check_validity(validity_days: int) -> None:
    if not 1 <= validity_days <= VALIDITY_DAYS_MAX:
        raise ValueError(f"validity_days must be 1..{VALIDITY_DAYS_MAX}, not {validity_days}")


def _cert_pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
