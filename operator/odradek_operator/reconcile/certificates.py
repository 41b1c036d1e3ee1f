"""A secured cluster's certificates, kept: its CAs, every component's leaves, the operator's own.

Each pass of a secured cluster (``ClusterSpec.secured``) runs ``reconcile_certificates`` before
the desired objects are built: it reads the Secrets, lets ``pki.plan`` decide (create, renew,
re-issue in Strimzi's order, wait) and writes what changed, and returns

- ``hashes``: each component's ``odradek.io/certificates-hash``, which the builders put in the
  pod template and the config hash, so the existing rolling restart (restarts.py: one broker at
  a time, never below min.insync.replicas) rolls the pods onto new certificates;
- ``admin_tls``: the operator's own key, certificate and trust (``<C>-operator-certs``), with
  which it reaches the brokers' INTERNAL listener (reconcile/admin.py);
- ``status``: ``status.certificates`` (each CA and each component's earliest expiry), also set
  as the gauge ``odradek_operator_certificate_expiry_timestamp_seconds``.

The brokers' and controllers' one ZooKeeper identity, ``<C>-zookeeper-client-certs``
(model/zookeeper_tls.py), is kept like the operator's; both mount it, so their pods' hash covers
their own Secret and it (``pod_hash``).

A pod runs the current certificates when its ``odradek.io/certificates-hash`` annotation (from
the template it was made from) is ``pod_hash`` of its Secrets'; "every pod rolled" is that for
every pod of every component whose StatefulSet carries the annotation (ZooKeeper's only once it
mounts its certificates). A CA the operator cannot use is ``Refused`` (the status names the Secret).

The Secrets are owned by the OdradekCluster (deleted with it), but for a brought CA's, which are
the user's and never written. Every Secret write is a create or a JSON merge patch whose
removed keys are null. One pass at a time per cluster (kopf's per-object serialisation).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek_operator import metrics, names
from odradek_operator.kube import Kube
from odradek_operator.model import meta, zookeeper_tls
from odradek_operator.model.security import CLIENTS_CA_FILE
from odradek_operator.model.spec.cluster import CaSpec, ClusterSpec
from odradek_operator.pki import plan, secrets
from odradek_operator.pki.plan import CaPlan, CaRefused, LeafPlan
from odradek_operator.reconcile.admin import AdminTls
from odradek_operator.reconcile.status import Refused
from odradek_operator.reconcile.world import read_pods

__all__ = ["Certificates", "read_admin_tls", "reconcile_certificates", "secret_object"]

Component = names.Component
OPERATOR_POD = "operator"  # the operator's "pod" in pki.plan's terms: its key is operator.pem
# The ZooKeeper client identity's "pod": its key is names.ZOOKEEPER_CLIENT_PEM.
ZOOKEEPER_CLIENT_POD = names.ZOOKEEPER_CLIENT_PEM.removesuffix(".pem")
LEAF_COMPONENTS = (Component.BROKER, Component.CONTROLLER, Component.ZOOKEEPER)


@dataclass(frozen=True)
class Certificates:
    hashes: dict[Component, str]
    admin_tls: AdminTls
    status: list[dict[str, Any]]


def secret_object(
    cluster: ClusterSpec,
    name: str,
    data: Mapping[str, str],
    annotations: Mapping[str, str],
    component: Component | None = None,
) -> dict[str, Any]:
    metadata = meta.object_meta(cluster, name, component)
    metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "data": secrets.encode(data),
    }


async def _write(kube: Kube, live: dict | None, desired: dict[str, Any]) -> None:
    meta_ = desired["metadata"]
    if live is None:
        await kube.create(desired)
        return
    old = live.get("data") or {}
    data = {**dict.fromkeys(k for k in old if k not in desired["data"]), **desired["data"]}
    patch = {"metadata": {"annotations": meta_["annotations"]}, "data": data}
    await kube.merge_patch("Secret", meta_["name"], meta_["namespace"], patch)


def _read(secret: dict | None, what: str) -> dict[str, str]:
    try:
        return secrets.decode(secret)
    except ValueError as e:
        raise Refused("CertificateSecretInvalid", f"Secret {what}: {e}") from e


async def _ca(
    kube: Kube, cluster: ClusterSpec, which: str, ca_spec: CaSpec, now: datetime.datetime
) -> tuple[CaPlan, dict | None, dict | None]:
    if which == "cluster":
        cert_name = names.cluster_ca_cert_secret(cluster.name)
        key_name = names.cluster_ca_key_secret(cluster.name)
    else:
        cert_name = names.clients_ca_cert_secret(cluster.name)
        key_name = names.clients_ca_key_secret(cluster.name)
    cert_secret = await kube.get("Secret", cert_name, cluster.namespace)
    key_secret = await kube.get("Secret", key_name, cluster.namespace)
    try:
        decided = plan.plan_ca(
            common_name=f"{cluster.name}-{which}-ca",
            cert_data=_read(cert_secret, cert_name),
            key_data=_read(key_secret, key_name),
            generation=plan.generation_of(
                (cert_secret or {}).get("metadata", {}).get("annotations")
            ),
            generate=ca_spec.generate,
            validity_days=ca_spec.validity_days,
            renewal_days=ca_spec.renewal_days,
            now=now,
            secret_names=(cert_name, key_name),
        )
    except CaRefused as e:
        field = "spec.clusterCa" if which == "cluster" else "spec.clientsCa"
        raise Refused(e.reason, f"{field}: {e}") from e
    return decided, cert_secret, key_secret


async def _write_ca(
    kube: Kube, cluster: ClusterSpec, which: str, decided: CaPlan, live: tuple
) -> None:
    if not decided.changed:
        return
    annotations = {names.CA_GENERATION_ANNOTATION: str(decided.generation)}
    cert_name, key_name = (
        (names.cluster_ca_cert_secret(cluster.name), names.cluster_ca_key_secret(cluster.name))
        if which == "cluster"
        else (names.clients_ca_cert_secret(cluster.name), names.clients_ca_key_secret(cluster.name))
    )
    # The key first: a certificate Secret never names a CA whose key is not stored.
    await _write(kube, live[1], secret_object(cluster, key_name, decided.key_data, annotations))
    await _write(kube, live[0], secret_object(cluster, cert_name, decided.cert_data, annotations))


def _pod_names(cluster: ClusterSpec, component: Component, live_ordinals: list[int]) -> list[int]:
    want = {
        Component.BROKER: cluster.brokers.replicas,
        Component.CONTROLLER: cluster.controllers.replicas,
        Component.ZOOKEEPER: cluster.zookeeper.replicas,
    }[component]
    return sorted(set(range(want)) | set(live_ordinals))


def dns_names(cluster: ClusterSpec, component: Component, ordinal: int) -> list[str]:
    """A pod's subjectAltNames: its headless-Service names, and the client Service's (the
    bootstrap Service for brokers, ZooKeeper's client Service)."""
    if component is Component.ZOOKEEPER:
        return zookeeper_tls.server_dns_names(cluster, ordinal)
    out = names.pod_dns_names(cluster.name, component, ordinal, cluster.namespace)
    if component is Component.BROKER:
        out += names.service_dns_names(names.bootstrap_service(cluster.name), cluster.namespace)
    return out


def _secret_hash(secret: dict | None) -> str | None:
    return ((secret or {}).get("metadata", {}).get("annotations") or {}).get(
        names.CERTIFICATES_HASH_ANNOTATION
    )


def pod_hash(component: Component, own: str | None, zookeeper_client: str | None) -> str | None:
    """A component's pods' ``odradek.io/certificates-hash``: its Secret's, and for brokers and
    controllers also the ZooKeeper client identity's (both mounted: either renewed rolls them)."""
    if own is None or component is Component.ZOOKEEPER:
        return own
    return secrets.certificates_hash({"own": own, ZOOKEEPER_CLIENT_POD: zookeeper_client or ""})


async def _rolled(kube: Kube, cluster: ClusterSpec, component: Component, want: str | None):
    """Every pod of ``component`` runs the certificates hashed ``want`` (``pod_hash``; vacuous
    for a component whose pods do not mount them)."""
    sts = await kube.get(
        "StatefulSet", names.statefulset(cluster.name, component), cluster.namespace
    )
    template = (sts or {}).get("spec", {}).get("template", {}).get("metadata") or {}
    if names.CERTIFICATES_HASH_ANNOTATION not in (template.get("annotations") or {}):
        return True
    pods = await kube.list("Pod", cluster.namespace, names.selector_labels(cluster.name, component))
    for pod in pods:
        pod_meta = pod.get("metadata", {})
        have = (pod_meta.get("annotations") or {}).get(names.CERTIFICATES_HASH_ANNOTATION)
        if pod_meta.get("deletionTimestamp") or have != want:
            return False
    return True


def _timestamp(when: datetime.datetime | None) -> str | None:
    return None if when is None else when.strftime("%Y-%m-%dT%H:%M:%SZ")


async def reconcile_certificates(
    kube: Kube, cluster: ClusterSpec, now: datetime.datetime | None = None
) -> Certificates:
    """One pass over the certificates (module docstring); ``Refused`` for an unusable CA."""
    now = now or datetime.datetime.now(datetime.UTC)
    ns = cluster.namespace
    cluster_ca, *cluster_live = await _ca(kube, cluster, "cluster", cluster.cluster_ca, now)
    clients_ca, *clients_live = await _ca(kube, cluster, "clients", cluster.clients_ca, now)

    leaf_secrets = {
        c: await kube.get("Secret", names.certs_secret(cluster.name, c), ns)
        for c in LEAF_COMPONENTS
    }
    operator_name = names.operator_certs_secret(cluster.name)
    operator_secret = await kube.get("Secret", operator_name, ns)
    zk_client_name = names.zookeeper_client_certs_secret(cluster.name)
    zk_client_secret = await kube.get("Secret", zk_client_name, ns)
    zk_client_hash = _secret_hash(zk_client_secret)
    rolled = [
        await _rolled(kube, cluster, c, pod_hash(c, _secret_hash(s), zk_client_hash))
        for c, s in leaf_secrets.items()
    ]
    all_rolled = all(rolled)
    # Step 3: every leaf is the current CA's and every pod runs it: the old CAs may go.
    issued = (*leaf_secrets.values(), operator_secret, zk_client_secret)
    signers = [plan.generation_of((s or {}).get("metadata", {}).get("annotations")) for s in issued]
    if (
        cluster.cluster_ca.generate
        and all_rolled
        and all(s is not None for s in issued)
        and all(g == cluster_ca.generation for g in signers)
    ):
        cluster_ca = plan.drop_retained(cluster_ca)
    await _write_ca(kube, cluster, "cluster", cluster_ca, tuple(cluster_live))
    await _write_ca(kube, cluster, "clients", clients_ca, tuple(clients_live))

    validity, renewal = cluster.cluster_ca.validity_days, cluster.cluster_ca.renewal_days
    hashes: dict[Component, str] = {}
    leaf_plans: dict[str, LeafPlan] = {}

    async def keep(
        name: str,
        secret: dict | None,
        common_name: str,
        pods: dict[str, list[str]],
        component: Component | None = None,
        **options,
    ) -> LeafPlan:
        """A leaf Secret planned (``plan.plan_leaves``) and written when it changed."""
        decided = plan.plan_leaves(
            ca=cluster_ca,
            common_name=common_name,
            pods=pods,
            data=_read(secret, name),
            annotations=(secret or {}).get("metadata", {}).get("annotations"),
            all_rolled=all_rolled,
            now=now,
            validity_days=validity,
            renewal_days=renewal,
            **options,
        )
        if decided.changed:
            await _write(
                kube,
                secret,
                secret_object(cluster, name, decided.data, decided.annotations, component),
            )
        return decided

    for component, secret in leaf_secrets.items():
        pods = await read_pods(kube, ns, cluster.name, component)
        ordinals = _pod_names(cluster, component, [p.ordinal for p in pods])
        extra = None
        if component is Component.BROKER and cluster.tls_authentication:
            extra = {CLIENTS_CA_FILE: clients_ca.trust}
        decided = await keep(
            names.certs_secret(cluster.name, component),
            secret,
            names.component_principal_name(cluster.name, component),
            {
                names.pod(cluster.name, component, i): dns_names(cluster, component, i)
                for i in ordinals
            },
            component,
            extra=extra,
        )
        hashes[component] = decided.certificates_hash
        leaf_plans[str(component)] = decided

    # The brokers' and controllers' one ZooKeeper identity (model/zookeeper_tls.py): a client
    # certificate kept like the leaf of a pod of its own, ZOOKEEPER_CLIENT_POD.
    zk_client_plan = await keep(
        zk_client_name,
        zk_client_secret,
        names.zookeeper_client_principal_name(cluster.name),
        {ZOOKEEPER_CLIENT_POD: []},
        server_auth=False,
    )
    for component, own in hashes.items():
        hashes[component] = pod_hash(component, own, zk_client_plan.certificates_hash) or own

    operator_plan = await keep(
        operator_name,
        operator_secret,
        names.OPERATOR_PRINCIPAL_NAME,
        {OPERATOR_POD: []},
        server_auth=False,
        organization=None,
    )
    keystore = operator_plan.data[secrets.leaf_pem_key(OPERATOR_POD)]
    admin_tls = AdminTls.of(keystore, operator_plan.data[secrets.CA_CERT])

    status = [
        {
            "certificate": "cluster-ca",
            "secret": names.cluster_ca_cert_secret(cluster.name),
            "notAfter": _timestamp(cluster_ca.not_after),
            "generation": cluster_ca.generation,
        },
        {
            "certificate": "clients-ca",
            "secret": names.clients_ca_cert_secret(cluster.name),
            "notAfter": _timestamp(clients_ca.not_after),
            "generation": clients_ca.generation,
        },
        *(
            {
                "certificate": component,
                "secret": names.certs_secret(cluster.name, Component(component)),
                "notAfter": _timestamp(p.not_after),
            }
            for component, p in leaf_plans.items()
        ),
        {
            "certificate": OPERATOR_POD,
            "secret": operator_name,
            "notAfter": _timestamp(operator_plan.not_after),
        },
        {
            "certificate": ZOOKEEPER_CLIENT_POD,
            "secret": zk_client_name,
            "notAfter": _timestamp(zk_client_plan.not_after),
        },
    ]
    metrics.record_certificates(
        ns,
        cluster.name,
        {e["certificate"]: _epoch(e["notAfter"]) for e in status if e["notAfter"]},
    )
    return Certificates(hashes, admin_tls, status)


async def read_admin_tls(kube: Kube, cluster: ClusterSpec) -> AdminTls | None:
    """The operator's certificate as the cluster pass last wrote it (None: not yet), for the
    other reconcilers (topics, users), which never make certificates themselves."""
    name = names.operator_certs_secret(cluster.name)
    data = _read(await kube.get("Secret", name, cluster.namespace), name)
    keystore = data.get(secrets.leaf_pem_key(OPERATOR_POD))
    if not keystore or secrets.CA_CERT not in data:
        return None
    return AdminTls.of(keystore, data[secrets.CA_CERT])


def _epoch(text: str) -> float:
    parsed = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()
