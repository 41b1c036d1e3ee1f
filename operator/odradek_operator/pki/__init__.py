"""The operator's certificates: its CAs, the leaves they sign, and the Secrets that hold them.

``certs`` makes and reads certificates (pure values, time passed in); ``secrets`` says what each
Secret holds (Strimzi's names and keys: model/names.py has the Secret names). No Kubernetes
client and no I/O here: reconcile/ decides when to create or renew, and applies.
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
