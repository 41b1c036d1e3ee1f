"""What the reconcilers read of the world: a cluster's StatefulSets and pods, by component.

Names and labels come from odradek_operator/names.py. ``PodState`` is the part of a pod
the decisions need: ordinal, readiness, the config hash it was created with, the manual restart
annotation, whether it is already terminating.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek_operator import names
from odradek_operator.kube import Kube
from odradek_operator.model.spec.cluster import ClusterSpec

__all__ = [
    "COMPONENTS",
    "admin_bootstrap",
    "bootstrap_of",
    "CONFIG_HASH",
    "RESTART",
    "PodState",
    "component_labels",
    "pod_state",
    "read_pods",
    "sts_name",
    "template_hash",
]

COMPONENTS = tuple(names.Component)
CONFIG_HASH = names.CONFIG_HASH_ANNOTATION
RESTART = names.RESTART_ANNOTATION


def sts_name(cluster: str, component: str) -> str:
    return names.statefulset(cluster, names.Component(component))


def component_labels(cluster: str, component: str) -> dict[str, str]:
    return names.selector_labels(cluster, names.Component(component))


@dataclass(frozen=True)
class PodState:
    name: str
    ordinal: int
    ready: bool
    ip: str | None
    config_hash: str | None
    restart_requested: bool
    terminating: bool

    def stale(self, template_hash: str | None) -> bool:
        return self.restart_requested or (
            template_hash is not None and self.config_hash != template_hash
        )


def pod_state(pod: dict) -> PodState:
    meta = pod.get("metadata", {})
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    name = meta["name"]
    ordinal = labels.get(names.POD_INDEX_LABEL)
    if ordinal is None:
        ordinal = names.ordinal_of(name)
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return PodState(
        name=name,
        ordinal=int(ordinal),
        ready=ready,
        ip=status.get("podIP"),
        config_hash=annotations.get(CONFIG_HASH),
        restart_requested=annotations.get(RESTART) == "true",
        terminating=bool(meta.get("deletionTimestamp")),
    )


def template_hash(sts: dict | None) -> str | None:
    if sts is None:
        return None
    template = sts.get("spec", {}).get("template", {})
    return (template.get("metadata", {}).get("annotations") or {}).get(CONFIG_HASH)


async def read_pods(kube: Kube, namespace: str, cluster: str, component: str) -> list[PodState]:
    pods = await kube.list("Pod", namespace, component_labels(cluster, component))
    return sorted((pod_state(p) for p in pods), key=lambda p: p.ordinal)


def bootstrap_of(pods: list[PodState], port: int) -> str | None:
    """The brokers' pod addresses (the operator reaches pods directly, no cluster DNS needed)."""
    addresses = [f"{p.ip}:{port}" for p in pods if p.ready and p.ip and not p.terminating]
    return ",".join(addresses) or None


def admin_bootstrap(spec: ClusterSpec, pods: list[PodState]) -> str | None:
    """Where the operator reaches the ready brokers: their IPs on the first client listener, or
    on a secured cluster their DNS names (what their certificates name) on INTERNAL."""
    if not spec.secured:
        return bootstrap_of(pods, spec.ports.client)
    broker = names.Component.BROKER
    addresses = [
        f"{names.pod_host(spec.name, broker, p.ordinal, spec.namespace)}:{names.INTERNAL_PORT}"
        for p in pods
        if p.ready and not p.terminating
    ]
    return ",".join(addresses) or None
