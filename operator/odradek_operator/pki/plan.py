"""When the operator makes, renews and re-issues certificates: pure decisions on Secrets' contents.

A CA (``plan_ca``): generated (``generateCertificateAuthority``, the default) it is made when
its two Secrets are absent and replaced ``renewalDays`` before it expires by a new CA of the
next generation, the old certificate kept in the certificate Secret as ``ca-<not after>.crt``;
brought by the user it is only read, and absent, unreadable, not a CA, a key that is not its
key, or expired is ``CaRefused`` (the cluster's status says which Secret and why: the operator
never replaces a CA it did not make). A CA's Secrets that are half there are refused too, rather
than replaced: a new CA would lock every client out.

A component's leaves (``plan_leaves``), Strimzi's order for a new CA, so no peer ever meets a
certificate it does not trust:

1. the trust bundle (every certificate of the CA certificate Secret) changed: the Secret gets
   the new bundle, the leaves stay as they are; the pods roll to trust both CAs;
2. leaves signed by an older generation, once every pod of every component runs the current
   Secrets (``all_rolled``): re-issued by the current CA; the pods roll again;
3. then (``drop_retained``) the old CA certificates leave the bundle: a last roll.

Leaves are also re-issued (when ``all_rolled``) ``renewalDays`` before they expire or when they
are not the current CA's (a user's new CA of the same generation). A pod without a leaf (scale
up) gets one at once, signed by the current CA, without touching the others.

``certificates_hash`` (the annotation ``odradek.io/certificates-hash`` on the Secret, copied to
the pod template by the builders) changes only at steps 1-3 and re-issues, not when a pod's leaf
is added: adding a broker rolls no one. Every leaf is valid for the CA's ``validityDays`` (never
past the CA), as Strimzi's.

Pure but for key generation; ``now`` is passed in.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek_operator import names
from odradek_operator.pki import secrets
from odradek_operator.pki.certs import (
    CertificateAuthority,
    CertificateError,
    issue_leaf,
    make_ca,
    needs_renewal,
    not_after,
    signed_by,
)

__all__ = [
    "CaPlan",
    "CaRefused",
    "LeafPlan",
    "drop_retained",
    "plan_ca",
    "plan_leaves",
    "generation_of",
]

GENERATION = names.CA_GENERATION_ANNOTATION
HASH = names.CERTIFICATES_HASH_ANNOTATION


class CaRefused(Exception):
    """A CA the operator cannot use; ``reason`` CamelCase, the message names the Secrets."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class CaPlan:
    ca: CertificateAuthority
    generation: int
    cert_data: dict[str, str]  # what the CA certificate Secret holds (retained ones too)
    key_data: dict[str, str]
    changed: bool  # the operator writes both Secrets (generated CAs only)

    @property
    def trust(self) -> str:
        return secrets.trust_bundle(self.cert_data)

    @property
    def not_after(self) -> datetime.datetime:
        return not_after(self.ca.cert_pem)


@dataclass(frozen=True)
class LeafPlan:
    data: dict[str, str]
    generation: int  # of the CA that signed the leaves
    certificates_hash: str
    changed: bool
    reissued: bool = False
    waiting: str = ""  # a re-issue due but waiting for every pod to run the current Secrets
    not_after: datetime.datetime | None = None  # the earliest leaf's expiry

    @property
    def annotations(self) -> dict[str, str]:
        return {GENERATION: str(self.generation), HASH: self.certificates_hash}


def generation_of(annotations: Mapping[str, str] | None) -> int:
    try:
        return int((annotations or {}).get(GENERATION, "0"))
    except ValueError:
        return 0


def plan_ca(
    *,
    common_name: str,
    cert_data: Mapping[str, str],
    key_data: Mapping[str, str],
    generation: int,
    generate: bool,
    validity_days: int,
    renewal_days: int,
    now: datetime.datetime,
    secret_names: tuple[str, str],
) -> CaPlan:
    """The CA to use now (module docstring); ``CaRefused`` when there is none to use.
    ``secret_names``: (certificate Secret, key Secret), for the messages."""
    cert_secret, key_secret = secret_names
    present = [bool(cert_data), bool(key_data)]
    if not any(present):
        if not generate:
            raise CaRefused(
                "CertificateAuthorityMissing",
                f"generateCertificateAuthority is false but Secrets {cert_secret} (ca.crt) and "
                f"{key_secret} (ca.key) do not exist: create them with your CA",
            )
        ca = _new_ca(common_name, now, validity_days)
        return CaPlan(ca, 0, secrets.ca_cert_data(ca), secrets.ca_key_data(ca), True)
    try:
        ca = secrets.read_ca(cert_data, key_data)
    except CertificateError as e:
        raise CaRefused(
            "CertificateAuthorityInvalid",
            f"the CA in Secrets {cert_secret} and {key_secret} cannot be used: {e}"
            + ("" if generate else " (it is yours: generateCertificateAuthority is false)"),
        ) from e
    retained = _unexpired(secrets.retained_ca_certs(cert_data), now)
    if now >= not_after(ca.cert_pem) and not generate:
        raise CaRefused(
            "CertificateAuthorityExpired",
            f"the CA in Secret {cert_secret} expired at {not_after(ca.cert_pem):%Y-%m-%dT%H:%M:%SZ}"
            ": renew it (generateCertificateAuthority is false)",
        )
    if generate and needs_renewal(ca.cert_pem, now=now, renewal_days=renewal_days):
        old = ca.cert_pem
        ca = _new_ca(common_name, now, validity_days)
        retained = {**retained, secrets.retained_key(old): old}
        new_cert = secrets.ca_cert_data(ca, retained)
        return CaPlan(ca, generation + 1, new_cert, secrets.ca_key_data(ca), True)
    new_cert = secrets.ca_cert_data(ca, retained)
    changed = generate and new_cert != dict(cert_data)  # an expired old CA left the bundle
    return CaPlan(ca, generation, new_cert, dict(key_data), changed)


def drop_retained(plan: CaPlan) -> CaPlan:
    """Step 3: the old CA certificates leave the bundle (every leaf is the current CA's)."""
    if not secrets.retained_ca_certs(plan.cert_data):
        return plan
    return CaPlan(plan.ca, plan.generation, secrets.ca_cert_data(plan.ca), plan.key_data, True)


def plan_leaves(
    *,
    ca: CaPlan,
    common_name: str,
    pods: Mapping[str, Sequence[str]],
    data: Mapping[str, str],
    annotations: Mapping[str, str] | None,
    all_rolled: bool,
    now: datetime.datetime,
    validity_days: int,
    renewal_days: int,
    extra: Mapping[str, str] | None = None,
    server_auth: bool = True,
    organization: str | None = names.GROUP,
) -> LeafPlan:
    """A leaf Secret's contents now. ``pods``: pod name -> its DNS names (SANs); ``data`` and
    ``annotations``: the Secret as it is ({} and None when absent); ``extra``: more keys that
    count as trust (the brokers' clients CA bundle); ``all_rolled``: every pod of every
    component runs the current Secrets."""
    extra = dict(extra or {})
    trust = ca.trust
    existing = secrets.read_leaf_pems(data)
    generation = generation_of(annotations)
    old_hash = (annotations or {}).get(HASH, "")

    def issue(pod: str) -> str:
        leaf = issue_leaf(
            ca.ca,
            common_name,
            now=now,
            validity_days=validity_days,
            dns_names=pods[pod],
            server_auth=server_auth,
            organization=organization,
        )
        return leaf.keystore_pem

    def result(pems: dict[str, str], gen: int, rolling: bool, **kw) -> LeafPlan:
        out = {secrets.leaf_pem_key(p): pem for p, pem in sorted(pems.items())}
        out.update({secrets.CA_CERT: trust, **extra})
        digest = secrets.certificates_hash(out) if rolling or not old_hash else old_hash
        expiry = min((not_after(_cert_part(pem)) for pem in pems.values()), default=None)
        changed = out != dict(data) or digest != old_hash or str(gen) != _gen_text(annotations)
        return LeafPlan(out, gen, digest, changed, not_after=expiry, **kw)

    if not data:
        return result({p: issue(p) for p in pods}, ca.generation, True, reissued=True)
    trusted = {
        secrets.CA_CERT: data.get(secrets.CA_CERT, ""),
        **{k: data.get(k, "") for k in extra},
    }
    if trusted != {secrets.CA_CERT: trust, **extra}:
        # Step 1 (or 3): the new trust first, the leaves untouched; the pods roll.
        kept = {**existing, **{p: issue(p) for p in pods if p not in existing}}
        return result(kept, generation, True)
    due = _reissue_due(existing, ca, generation, now, renewal_days)
    if due:
        if all_rolled:
            return result({p: issue(p) for p in pods}, ca.generation, True, reissued=True)
        waiting = f"{due}; waiting for every pod to run the current certificates"
        kept = {**existing, **{p: issue(p) for p in pods if p not in existing}}
        return result(kept, generation, False, waiting=waiting)
    missing = {p: issue(p) for p in pods if p not in existing}
    return result({**existing, **missing}, generation, False)


def _reissue_due(
    existing: Mapping[str, str],
    ca: CaPlan,
    generation: int,
    now: datetime.datetime,
    renewal_days: int,
) -> str:
    """Why the leaves must be re-issued ("" when they need not)."""
    if generation < ca.generation:
        return f"signed by CA generation {generation}, the current is {ca.generation}"
    for pod, pem in sorted(existing.items()):
        cert = _cert_part(pem)
        if not signed_by(cert, ca.ca.cert_pem):
            return f"{pod}'s certificate is not signed by the current CA"
        # A leaf already ending with its CA cannot be made longer: renewing it again would roll
        # the pods at every pass (a brought CA near its end; a generated one is renewed first).
        expiring = needs_renewal(cert, now=now, renewal_days=renewal_days)
        if expiring and not_after(cert) < ca.not_after:
            return f"{pod}'s certificate expires at {not_after(cert):%Y-%m-%dT%H:%M:%SZ}"
    return ""


def _cert_part(keystore_pem: str) -> str:
    start = keystore_pem.find("-----BEGIN CERTIFICATE-----")
    if start < 0:
        raise CertificateError("a leaf PEM without a certificate")
    return keystore_pem[start:]


def _gen_text(annotations: Mapping[str, str] | None) -> str:
    return (annotations or {}).get(GENERATION, "")


def _unexpired(retained: Mapping[str, str], now: datetime.datetime) -> dict[str, str]:
    return {k: v for k, v in retained.items() if not_after(v) > now}


def _new_ca(common_name: str, now: datetime.datetime, validity_days: int) -> CertificateAuthority:
    return make_ca(common_name, now=now, validity_days=validity_days)
