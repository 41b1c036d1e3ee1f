"""The operator's certificates: its CAs, the leaves they sign, and the Secrets that hold them.

``certs`` makes and reads certificates (pure values, time passed in); ``secrets`` says what each
Secret holds (Strimzi's names and keys: odradek_operator/names.py has the Secret names);
``plan`` decides when a CA or a leaf is made, renewed or re-issued, in Strimzi's order. No
Kubernetes client and no I/O here: reconcile/certificates.py reads the Secrets, asks ``plan``
and writes. Below the model (which puts these keys into Secrets and mounts), above
odradek_operator.names only (pyproject.toml's layers contract).
"""

from odradek_operator.pki.certs import (
    CertificateAuthority,
    CertificateError,
    Leaf,
    certificate_fingerprint,
    issue_leaf,
    make_ca,
    needs_renewal,
    not_after,
    signed_by,
)

__all__ = [
    "CertificateAuthority",
    "CertificateError",
    "Leaf",
    "certificate_fingerprint",
    "issue_leaf",
    "make_ca",
    "needs_renewal",
    "not_after",
    "signed_by",
]
