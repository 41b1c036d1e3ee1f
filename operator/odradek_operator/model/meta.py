"""What every built object shares: metadata with labels and the owner reference, the pods'
downward-API environment and security context, the config hash, properties-file rendering.

Every object the operator makes is owned by its ``OdradekCluster`` (``controller: true``,
``blockOwnerDeletion: true``), so deleting the cluster deletes them (PVCs follow their
StatefulSet's ``persistentVolumeClaimRetentionPolicy`` instead: kept unless ``deleteClaim``).

Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from odradek_operator.model import names
from odradek_operator.model.spec import ClusterSpec, Resources

# The Odradek image's user (the Dockerfile's); the official ZooKeeper image runs as its own.
ODRADEK_UID = 10001
ZOOKEEPER_UID = 1000  # the "zookeeper" user of the official image, owner of /data and /logs


def owner_reference(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.CLUSTER_KIND,
        "name": cluster.name,
        "uid": cluster.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(
    cluster: ClusterSpec, name: str, component: names.Component | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": cluster.namespace,
        "labels": names.labels(cluster.name, component),
        "ownerReferences": [owner_reference(cluster)],
    }


def pod_env() -> list[dict[str, Any]]:
    """POD_INDEX, POD_IP, POD_NAME, POD_NAMESPACE from the downward API."""

    def field(path: str) -> dict[str, Any]:
        return {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}

    return [
        {
            "name": names.ENV_POD_INDEX,
            "valueFrom": field(f"metadata.labels['{names.POD_INDEX_LABEL}']"),
        },
        {"name": names.ENV_POD_IP, "valueFrom": field("status.podIP")},
        {"name": names.ENV_POD_NAME, "valueFrom": field("metadata.name")},
        {"name": names.ENV_POD_NAMESPACE, "valueFrom": field("metadata.namespace")},
    ]


def pod_security_context(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def http_probe(
    path: str, *, initial_delay_s: int, failure_threshold: int, port: str = "metrics"
) -> dict[str, Any]:
    """An HTTP probe on the admin listener (``/readyz``, ``/healthz``), which binds the pod IP."""
    return {
        "httpGet": {"path": path, "port": port},
        "initialDelaySeconds": initial_delay_s,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": failure_threshold,
    }


def resources(value: Resources) -> dict[str, Any]:
    return value.to_dict()


def spread(cluster: ClusterSpec, component: names.Component) -> list[dict[str, Any]]:
    """Spread a component's pods over nodes when the scheduler can (never blocks scheduling)."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": names.selector_labels(cluster.name, component)},
        }
    ]


def claim_spec(size: str, storage_class: str | None) -> dict[str, Any]:
    """A PersistentVolumeClaim's spec; no ``storageClassName`` means the cluster's default."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return spec


def retention_policy(delete_claim: bool) -> dict[str, str]:
    """``persistentVolumeClaimRetentionPolicy``: keep the claims unless told to delete them."""
    policy = "Delete" if delete_claim else "Retain"
    return {"whenDeleted": policy, "whenScaled": policy}


def config_hash(*parts: object) -> str:
    """sha256 of the parts as canonical JSON: what restarts a pod when it changes."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def render_properties(props: Mapping[str, str], header: str) -> str:
    """A ``.properties`` file, keys sorted, escaped as ``java.util.Properties.load`` reads it."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{_escape(key, key=True)}={_escape(value)}" for key, value in sorted(props.items())]
    return "\n".join(lines) + "\n"


def _escape(text: str, *, key: bool = False) -> str:
    """Backslashes and control characters always; in a key also the separators (``= : space``)
    and a leading comment mark; in a value only a leading blank (Java would drop it)."""
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in _CONTROL:
            out.append(_CONTROL[c])
        elif (key and (c in "=: " or (i == 0 and c in "#!"))) or (i == 0 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


_CONTROL = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
