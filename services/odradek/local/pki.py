"""A certificate authority for a local cluster: its CA and one certificate per process, as PEM
files in one directory (``odradek local up --security``).

``LocalPki.create(directory, hosts)`` makes (or, when its files are there, reuses) a CA
certificate ``ca.pem`` and its key ``ca.key``, then ``issue(name)`` a leaf certificate for the
loopback ``hosts`` with ``CN=<name>``, written with its key and the chain as
``<name>.pem`` (what ``ssl.keystore.location`` takes). Keys are EC P-256, unencrypted, readable
by this user only (0600, the directory 0700): the cluster's processes read them at start. The CA
is valid for ten years, leaves for one; nothing here is meant for a cluster other machines reach.

Built on ``cryptography`` (the project's TLS dependency), not a hand-written ASN.1 encoder.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["LocalPki"]

CA_DAYS = 3650
LEAF_DAYS = 365
ORGANIZATION = "Odradek local cluster"


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by this user only, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class LocalPki:
    directory: Path
    hosts: tuple[str, ...]
    ca_certificate: x509.Certificate
    ca_key: ec.EllipticCurvePrivateKey

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.pem"

    @classmethod
    def create(cls, directory: Path, hosts: Sequence[str]) -> LocalPki:
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        ca_path, key_path = directory / "ca.pem", directory / "ca.key"
        if ca_path.exists() and key_path.exists():
            certificate = x509.load_pem_x509_certificate(ca_path.read_bytes())
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{key_path} is not the EC key this module writes")
            return cls(directory, tuple(hosts), certificate, key)
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(f"{ORGANIZATION} CA"))
            .issuer_name(_name(f"{ORGANIZATION} CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        _write_private(key_path, _key_pem(key))
        ca_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return cls(directory, tuple(hosts), certificate, key)

    def issue(self, name: str) -> Path:
        """``<name>.pem``: a key and its certificate (``CN=<name>``, for ``hosts``, server and
        client use), then the CA's; issued anew each call."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.ca_certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName([_san(h) for h in self.hosts]), critical=False
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()),
                critical=False,
            )
            .sign(self.ca_key, hashes.SHA256())
        )
        path = self.directory / f"{name}.pem"
        _write_private(
            path,
            _key_pem(key)
            + certificate.public_bytes(serialization.Encoding.PEM)
            + self.ca_certificate.public_bytes(serialization.Encoding.PEM),
        )
        return path
