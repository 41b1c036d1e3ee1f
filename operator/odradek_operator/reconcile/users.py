"""OdradekUser -> the user in the cluster and its Secret: credential, ACLs, quotas, kept in sync.

One pass (``sync_user``), as Strimzi's user operator does it, in this order:

1. the spec (``UserSpec``; refused: ``InvalidSpec``) and its cluster (the label
   ``odradek.io/cluster``; missing or not serving yet: Retry). The cluster a user was made in is
   recorded in ``status.cluster``; moving it to another is refused (``ClusterChangeRefused``:
   its credentials would stay behind in the first).
2. the credential. scram-sha-512: the password is the one given
   (``spec.authentication.password.valueFrom.secretKeyRef``), else the one in the user's Secret,
   else a new one (``PASSWORD_LENGTH`` letters and digits). It is set with
   AlterUserScramCredentials when the Secret's ``odradek.io/credential`` fingerprint does not
   match it (new, given password changed, Secret deleted or its password edited) or the brokers
   have no SCRAM-SHA-512 credential for the user; other SCRAM mechanisms of the user are deleted
   (the resource is the user's only credential). tls: a client certificate ``CN=<user>`` from
   the clients CA, kept until it needs renewal (``reconcile/user_certs.py``); SCRAM credentials
   of the user are deleted.
   The credential is set before the Secret is written, so a Secret never names a password the
   brokers do not have (a pass that fails in between makes a new one next time).
3. the Secret named after the user (``model/users.user_secret``): created when missing, and put
   back when any key, label, annotation or the owner differs, keys added by hand removed. A
   Secret of that name that another object owns is refused (``SecretConflict``), never taken.
4. ACLs: exactly the spec's bindings for ``User:<user>`` (``acl_diff``: missing ones created,
   any other ACL of the principal deleted). A cluster without an authorizer can keep none:
   Retry ``AuthorizerDisabled`` when the spec has rules (none: nothing to do).
5. quotas: the user entity's client quotas set to the spec's, keys the spec leaves out removed
   (``quota_diff``).

Status: conditions Ready and Error (as OdradekTopic's), ``observedGeneration``, ``username``,
``secret``, ``cluster`` (and ``certificateNotAfter`` for tls users, also the expiry gauge's
``certificate="user-<name>"``, metrics.py). Ready is False with reason
``NoMatchingListener`` when the cluster has no listener with the user's authentication (the
user exists but cannot connect yet). ``delete_user`` is the finalizer's: the user's SCRAM
credentials, every ACL of its principal and its quotas are deleted (the Secret goes with the
resource, its owner).
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from odradek.security.acl import AclBinding, kafka_name
from odradek_operator import metrics, names
from odradek_operator.kube import KubeError, contains
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.listeners import Listener
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.model.users import (
    AUTH_SCRAM,
    CREDENTIAL_ANNOTATION,
    SCRAM_ITERATIONS,
    SCRAM_MECHANISM,
    UserSpec,
    credential_fingerprint,
    new_password,
    password_problem,
    user_listener,
    user_secret,
)
from odradek_operator.pki import certs
from odradek_operator.pki import secrets as pki_secrets
from odradek_operator.reconcile.admin import (
    AdminRefused,
    AuthorizerDisabled,
    ClusterUnavailable,
    UserAdmin,
)
from odradek_operator.reconcile.status import (
    Refused,
    Retry,
    condition,
    failures_written,
    set_condition,
)
from odradek_operator.reconcile.topics import cluster_admin
from odradek_operator.reconcile.user_certs import user_certificate

__all__ = ["AclDiff", "QuotaDiff", "acl_diff", "delete_user", "quota_diff", "sync_user"]

WAIT_S = 10.0
QUOTA_TOLERANCE = 1e-9  # DOUBLE quotas come back as floats


@dataclass(frozen=True)
class AclDiff:
    create: tuple[AclBinding, ...] = ()
    delete: tuple[AclBinding, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.delete)


def _order(binding: AclBinding) -> tuple:
    p, e = binding.pattern, binding.entry
    return (p.resource_type, p.name, p.pattern_type, e.operation, e.permission_type, e.host)


def acl_diff(desired: Iterable[AclBinding], actual: Iterable[AclBinding]) -> AclDiff:
    """What makes the principal's ACLs ``actual`` exactly ``desired`` (both of one principal)."""
    want, have = frozenset(desired), frozenset(actual)
    return AclDiff(
        create=tuple(sorted(want - have, key=_order)),
        delete=tuple(sorted(have - want, key=_order)),
    )


@dataclass(frozen=True)
class QuotaDiff:
    set_: dict[str, float] = field(default_factory=dict)
    remove: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.set_ or self.remove)


def quota_diff(desired: Mapping[str, float], actual: Mapping[str, float]) -> QuotaDiff:
    changed = {
        k: v
        for k, v in desired.items()
        if k not in actual or abs(actual[k] - v) > QUOTA_TOLERANCE * max(1.0, abs(v))
    }
    return QuotaDiff(changed, tuple(sorted(k for k in actual if k not in desired)))


def certificate_metric(user: str) -> str:
    """A tls user's client certificate, as the certificate expiry gauge names it."""
    return f"user-{user}"


def show_acl(binding: AclBinding) -> str:
    p, e = binding.pattern, binding.entry
    return (
        f"{kafka_name(e.permission_type)} {kafka_name(e.operation)} on "
        f"{kafka_name(p.resource_type)}:{p.pattern_type.name}:{p.name} from {e.host}"
    )


# --- the pass -------------------------------------------------------------------------------------


@dataclass
class _Changes:
    """What one pass changed, for the Ready condition's words."""

    credential: str = ""
    secret: str = ""
    acls: AclDiff = field(default_factory=AclDiff)
    quotas: QuotaDiff = field(default_factory=QuotaDiff)

    def words(self) -> list[str]:
        out = [w for w in (self.credential, self.secret) if w]
        if self.acls.create:
            out.append(f"{len(self.acls.create)} ACLs created")
        if self.acls.delete:
            out.append(f"{len(self.acls.delete)} ACLs deleted")
        if not self.quotas.empty:
            out.append("quotas set")
        return out


async def _given_password(kube, spec: UserSpec) -> str:
    ref = spec.password
    assert ref is not None
    source = await kube.get("Secret", ref.secret, spec.namespace)
    value = secret_data(source).get(ref.key)
    if value is None:
        what = "not found" if source is None else f"has no key {ref.key}"
        raise Retry(
            f"Secret {ref.secret} (spec.authentication.password) {what}",
            WAIT_S,
            "PasswordSecretNotFound",
        )
    problem = password_problem(value)
    if problem is not None:
        raise Refused("InvalidPassword", f"Secret {ref.secret} key {ref.key}: {problem}")
    return value


def _owned_by(secret: Mapping | None, spec: UserSpec) -> bool:
    refs = ((secret or {}).get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == spec.uid and r.get("kind") == names.USER_KIND for r in refs)


async def _scram(
    kube, admin: UserAdmin, spec: UserSpec, live: Mapping | None, rng: random.Random, ch: _Changes
) -> str:
    """The password the Secret must hold, set on the brokers if needed."""
    if spec.password is not None:
        password = await _given_password(kube, spec)
    else:
        password = secret_data(live).get("password", "")
        if password_problem(password) is not None:
            password = new_password(rng)
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    mechanisms = await admin.scram_mechanisms(spec.name)
    current = annotations.get(CREDENTIAL_ANNOTATION) == credential_fingerprint(password)
    if not current or mechanisms.get(SCRAM_MECHANISM) != SCRAM_ITERATIONS:
        await admin.upsert_scram(spec.name, SCRAM_MECHANISM, SCRAM_ITERATIONS, password)
        ch.credential = f"{SCRAM_MECHANISM} credential set"
    for mechanism in sorted(mechanisms):
        if mechanism != SCRAM_MECHANISM:
            await admin.delete_scram(spec.name, mechanism)
    return password


async def _write_secret(kube, desired: dict, live: Mapping | None, ch: _Changes) -> None:
    meta = desired["metadata"]
    if live is None:
        await kube.create(desired)
        ch.secret = f"Secret {meta['name']} created"
        return
    live_meta = live.get("metadata") or {}
    extra = {k: None for k in (live.get("data") or {}) if k not in desired["data"]}
    same = (
        not extra
        and (live.get("data") or {}) == desired["data"]
        and contains(live_meta.get("labels") or {}, meta["labels"])
        and contains(live_meta.get("annotations") or {}, meta["annotations"])
        and (live_meta.get("ownerReferences") or []) == meta["ownerReferences"]
    )
    if same:
        return
    patch = {
        "metadata": {
            "labels": meta["labels"],
            "annotations": meta["annotations"],
            "ownerReferences": meta["ownerReferences"],
        },
        "data": {**desired["data"], **extra},
    }
    await kube.merge_patch("Secret", meta["name"], meta["namespace"], patch)
    ch.secret = f"Secret {meta['name']} put back"


async def _acls(admin: UserAdmin, spec: UserSpec, ch: _Changes) -> None:
    try:
        actual = await admin.acls_of(spec.principal)
    except AuthorizerDisabled as e:
        if spec.acls:
            raise Retry(
                f"cluster {spec.cluster}: {e}; spec.authorization needs "
                "spec.authorization on the cluster",
                WAIT_S,
                "AuthorizerDisabled",
            ) from e
        return
    ch.acls = acl_diff(spec.acl_bindings(), actual)
    if ch.acls.create:
        await admin.create_acls(ch.acls.create)
    if ch.acls.delete:
        await admin.delete_acls(ch.acls.delete)


async def _quotas(admin: UserAdmin, spec: UserSpec, ch: _Changes) -> None:
    ch.quotas = quota_diff(spec.quotas.values, await admin.user_quotas(spec.name))
    if not ch.quotas.empty:
        await admin.alter_user_quotas(spec.name, ch.quotas.set_, ch.quotas.remove)


def secret_data(secret: Mapping | None) -> dict[str, str]:
    """A Secret's text; {} when some key is not base64 text (an edit made it unreadable)."""
    try:
        return pki_secrets.decode(secret)
    except certs.CertificateError:
        return {}


def _cluster_ca(ca_secret: Mapping | None) -> str | None:
    """The cluster CA's trust bundle (the current CA, then any older one still trusted)."""
    try:
        return pki_secrets.trust_bundle(pki_secrets.decode(ca_secret)) if ca_secret else None
    except certs.CertificateError:
        return None


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def sync_user(
    kube,
    admin_for,
    body: Mapping,
    *,
    periodic: bool = False,
    rng: random.Random | None = None,
    now: Callable[[], datetime.datetime] = _utc_now,
) -> dict:
    """Converge one OdradekUser and write its status; Retry / Refused as the other passes.
    ``rng`` makes passwords (SystemRandom), ``now`` dates certificates."""
    rng = rng or random.SystemRandom()
    meta = body["metadata"]
    old = dict(body.get("status") or {})
    status: dict = {"observedGeneration": meta.get("generation", 0)}

    async def write(conditions: list[dict]) -> None:
        status["conditions"] = conditions
        await kube.merge_patch(
            names.USER_KIND, meta["name"], meta.get("namespace"), {"status": status}, "status"
        )

    async with failures_written(write, old.get("conditions")):
        try:
            spec = UserSpec.from_resource(body)
        except SpecError as e:
            raise Refused("InvalidSpec", str(e)) from e
        recorded = old.get("cluster")
        if recorded and recorded != spec.cluster:
            raise Refused(
                "ClusterChangeRefused",
                f"this user was made in cluster {recorded}; label {names.CLUSTER_LABEL} "
                f"{spec.cluster} is refused (delete the user and create it again instead)",
            )
        status.update(username=spec.name, secret=spec.name)
        changes, listener = await _converge(kube, admin_for, spec, rng, now(), status)
    conditions = set_condition(old.get("conditions"), condition("Error", False, "NoError", ""))
    done = changes.words()
    if listener is None:
        message = (
            f"cluster {spec.cluster} has no listener with authentication "
            f"{spec.authentication}: the user exists but cannot connect yet"
        )
        not_ready = condition("Ready", False, "NoMatchingListener", message)
        await write(set_condition(conditions, not_ready))
        raise Retry(message, WAIT_S, "NoMatchingListener")
    if not done:
        ready = condition("Ready", True, "InSync", f"user {spec.name} matches its spec")
    elif periodic:
        ready = condition("Ready", True, "DriftRepaired", "repaired: " + ", ".join(done))
    else:
        ready = condition("Ready", True, "Reconciled", "; ".join(done))
    await write(set_condition(conditions, ready))
    return status


async def _converge(
    kube, admin_for, spec: UserSpec, rng, now: datetime.datetime, status: dict
) -> tuple[_Changes, Listener | None]:
    cluster = await kube.get(names.CLUSTER_KIND, spec.cluster, spec.namespace)
    if cluster is None:
        raise Retry(
            f"OdradekCluster {spec.cluster} not found in {spec.namespace}",
            WAIT_S,
            "ClusterNotFound",
        )
    try:
        cluster_spec = ClusterSpec.from_resource(cluster)
    except SpecError as e:
        raise Retry(
            f"OdradekCluster {spec.cluster} has an invalid spec: {e}", WAIT_S, "ClusterNotReady"
        ) from e
    listener = user_listener(cluster_spec, spec.authentication)
    ca_secret = await kube.get("Secret", names.cluster_ca_cert_secret(spec.cluster), spec.namespace)
    ca_crt = _cluster_ca(ca_secret)
    if ca_crt is None and cluster_spec.secured:
        raise Retry(
            f"the CA certificate of cluster {spec.cluster} is not there yet",
            WAIT_S,
            "ClusterCaNotReady",
        )
    admin = await cluster_admin(kube, admin_for, spec.cluster, spec.namespace)
    # From here on the cluster may hold something of this user: it is recorded (a label naming
    # a cluster that was never reached, a typo, may still be corrected).
    status["cluster"] = spec.cluster
    live = await kube.get("Secret", spec.name, spec.namespace)
    if live is not None and not _owned_by(live, spec):
        raise Refused(
            "SecretConflict",
            f"Secret {spec.name} exists and is not this user's (no ownerReference to it): "
            "the operator will not take it over; delete or rename it",
        )
    changes = _Changes()
    try:
        if spec.authentication == AUTH_SCRAM:
            password = await _scram(kube, admin, spec, live, rng, changes)
            desired = user_secret(spec, ca_crt=ca_crt or "", listener=listener, password=password)
        else:
            for mechanism in sorted(await admin.scram_mechanisms(spec.name)):
                await admin.delete_scram(spec.name, mechanism)
            issued = await user_certificate(kube, spec, cluster_spec.clients_ca, live, now=now)
            if issued.renewed:
                changes.credential = issued.renewed
            status["certificateNotAfter"] = issued.not_after
            metrics.record_certificates(
                spec.namespace, spec.cluster, {certificate_metric(spec.name): issued.expiry_s}
            )
            desired = user_secret(
                spec,
                ca_crt=ca_crt or "",
                listener=listener,
                certificate=issued.certificate,
                key=issued.key,
            )
        await _write_secret(kube, desired, live, changes)
        await _acls(admin, spec, changes)
        await _quotas(admin, spec, changes)
    except ClusterUnavailable as e:
        raise Retry(str(e), WAIT_S, "ClusterUnreachable") from e
    except AuthorizerDisabled:
        raise
    except AdminRefused as e:
        raise Refused("UserRefused", f"the cluster refused user {spec.name}: {e}") from e
    except KubeError as e:
        raise Retry(f"Secret {spec.name}: {e}", WAIT_S, "SecretNotWritten") from e
    return changes, listener


async def delete_user(kube, admin_for, body: Mapping) -> str:
    """The finalizer's job: the user's SCRAM credentials, the ACLs of its principal and its
    quotas go; nothing to do when its cluster is gone or going (then there is nothing left to
    delete them from, and the resource must not hang on its finalizer)."""
    meta = body["metadata"]
    namespace = str(meta.get("namespace") or "default")
    user = str(meta["name"])
    cluster_name = (body.get("status") or {}).get("cluster") or (meta.get("labels") or {}).get(
        names.CLUSTER_LABEL
    )
    if not isinstance(cluster_name, str):
        return "no cluster named: nothing to delete"
    cluster = await kube.get(names.CLUSTER_KIND, cluster_name, namespace)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        return f"cluster {cluster_name} is gone: nothing to delete"
    admin = await cluster_admin(kube, admin_for, cluster_name, namespace)
    try:
        mechanisms = await admin.scram_mechanisms(user)
        for mechanism in sorted(mechanisms):
            await admin.delete_scram(user, mechanism)
        try:
            acls = await admin.acls_of(f"User:{user}")
        except AuthorizerDisabled:
            acls = frozenset()
        await admin.delete_acls(sorted(acls, key=_order))
        quotas = await admin.user_quotas(user)
        await admin.alter_user_quotas(user, {}, sorted(quotas))
    except AdminRefused as e:
        raise Retry(f"deleting user {user}: {e}", WAIT_S, "UserNotDeleted") from e
    metrics.forget_certificate(namespace, cluster_name, certificate_metric(user))
    return (
        f"user {user} deleted from cluster {cluster_name}: {len(mechanisms)} SCRAM credentials, "
        f"{len(acls)} ACLs, {len(quotas)} quotas"
    )
