"""What every built object shares: metadata with labels and the owner reference, the pods'
downward-API environment and security context, the config hash, properties-file rendering.

Pod security, as the Kubernetes "restricted" Pod Security Standard asks: every pod runs as a
non-root user with the runtime's default seccomp profile; every container drops all
capabilities, cannot gain privileges and has a read-only root filesystem. What a container must
write goes to its volumes: the data claims, and an emptyDir at ``/tmp`` (``tmp_volume``,
``TMP_SIZE_LIMIT``) that every container mounts, as Strimzi's ``strimzi-tmp``.

Every object the operator makes is owned by its ``OdradekCluster`` (``controller: true``,
``blockOwnerDeletion: true``), so deleting the cluster deletes them (PVCs follow their
StatefulSet's ``persistentVolumeClaimRetentionPolicy`` instead: kept unless ``deleteClaim``).

Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from odradek_operator import names
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.resources import Resources

# The Odradek image's user (the Dockerfile's); the official ZooKeeper image runs as its own.
ODRADEK_UID = 10001
ZOOKEEPER_UID = 1000  # the "zookeeper" user of the official image, owner of /data and /logs
CONFIG_VOLUME = "config"  # every pod's ConfigMap volume
# /tmp of each container: scratch only (the JVM's perf data, Python's tempfile), kept small so
# a runaway writer is evicted rather than filling the node's disk (Strimzi's default is 5Mi;
# the JVM's hsperfdata alone takes 32 KiB, a Python tempfile may take more).
TMP_SIZE_LIMIT = "64Mi"


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
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def tmp_volume() -> dict[str, Any]:
    """The emptyDir every pod mounts at /tmp (its root filesystem is read-only)."""
    return {"name": names.TMP_VOLUME, "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}}


def tmp_mount() -> dict[str, Any]:
    return {"name": names.TMP_VOLUME, "mountPath": names.TMP_DIR}


PROBE_PERIOD_S = 5
PROBE_TIMEOUT_S = 5
READY_FAILURES = 3  # 15 s unanswered: out of the Services, the operator waits
LIVENESS_PERIOD_S = 10
LIVENESS_FAILURES = 6  # a minute without an answer: the kubelet restarts the container


def probes(ready: dict[str, Any], live: dict[str, Any], startup_max_s: int) -> dict[str, Any]:
    """Readiness, liveness, and a startup probe that holds liveness off for ``startup_max_s``:
    a broker answers only once its logs are loaded, which after an unclean stop may take long.
    ``ready`` and ``live`` are probe handlers (``{"httpGet": ...}``, ``{"tcpSocket": ...}``)."""

    def probe(handler: dict[str, Any], period_s: int, failures: int) -> dict[str, Any]:
        return {
            **handler,
            "periodSeconds": period_s,
            "timeoutSeconds": PROBE_TIMEOUT_S,
            "failureThreshold": failures,
        }

    return {
        "startupProbe": probe(live, PROBE_PERIOD_S, math.ceil(startup_max_s / PROBE_PERIOD_S)),
        "readinessProbe": probe(ready, PROBE_PERIOD_S, READY_FAILURES),
        "livenessProbe": probe(live, LIVENESS_PERIOD_S, LIVENESS_FAILURES),
    }


def http_get(path: str, port: str = "metrics") -> dict[str, Any]:
    """A probe handler on the admin listener (``/readyz``, ``/healthz``); the kubelet probes
    the pod IP, which is where that listener binds."""
    return {"httpGet": {"path": path, "port": port}}


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def quantity_bytes(quantity: str) -> int:
    """A Quantity (``512Mi``, ``1G``, ``1e9``) as a whole number of bytes, rounded down."""
    number = quantity.lstrip("+")
    for suffix, scale in (*_BINARY.items(), *_DECIMAL.items()):
        if suffix and number.endswith(suffix):
            return int(float(number[: -len(suffix)]) * scale)
    return int(float(number))  # plain or with an exponent (checked by spec)


def resources(value: Resources) -> dict[str, Any]:
    return value.to_dict()


def pod_spec(
    cluster: ClusterSpec,
    component: names.Component,
    container: dict[str, Any],
    *,
    uid: int,
    grace_s: int,
) -> dict[str, Any]:
    """A pod of ``component``: one container, its ConfigMap mounted as volume ``config``, an
    emptyDir at /tmp (``tmp_volume``; the container must list ``tmp_mount()``).

    Pods never call the Kubernetes API (no token) and get no Service environment variables
    (``enableServiceLinks``: they would be one per Service of the namespace, and some images read
    variables of their own under the same prefixes)."""
    return {
        "serviceAccountName": names.service_account(cluster.name),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": grace_s,
        "securityContext": pod_security_context(uid),
        "topologySpreadConstraints": spread(cluster, component),
        "containers": [container],
        "volumes": [
            {
                "name": CONFIG_VOLUME,
                "configMap": {"name": names.config_map(cluster.name, component)},
            },
            tmp_volume(),
        ],
    }


def statefulset(
    cluster: ClusterSpec,
    component: names.Component,
    replicas: int,
    pod: dict[str, Any],
    config_hash: str,
    certificates_hash: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A StatefulSet the operator restarts itself (``OnDelete``), pods started all at once.
    ``certificates_hash`` (secured clusters) is also an annotation of the pods: the operator
    knows from it which pods run with the certificates of its Secret (reconcile/certificates)."""
    annotations = {names.CONFIG_HASH_ANNOTATION: config_hash}
    if certificates_hash is not None:
        annotations[names.CERTIFICATES_HASH_ANNOTATION] = certificates_hash
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_meta(cluster, names.statefulset(cluster.name, component), component),
        "spec": {
            "serviceName": names.headless_service(cluster.name, component),
            "replicas": replicas,
            "selector": {"matchLabels": names.selector_labels(cluster.name, component)},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {
                    "labels": names.labels(cluster.name, component),
                    "annotations": annotations,
                },
                "spec": pod,
            },
            **extra,
        },
    }


HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"


def spread(cluster: ClusterSpec, component: names.Component) -> list[dict[str, Any]]:
    """Spread a component's pods over nodes, and with ``spec.brokers.rack`` over the values of
    its topology key too (zones, as Strimzi's rack awareness does) for every component: the
    ZooKeeper majority and a standby controller then outlive a zone like the brokers' replicas.
    ``ScheduleAnyway``: a skew the scheduler cannot avoid never keeps a pod Pending."""
    keys = [HOSTNAME_TOPOLOGY_KEY]
    rack = cluster.brokers.rack_topology_key
    if rack is not None and rack != HOSTNAME_TOPOLOGY_KEY:
        keys.append(rack)
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": names.selector_labels(cluster.name, component)},
        }
        for key in keys
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


def hashed_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The part of a pod template whose change restarts the pod: all but the scheduling hints
    (``topologySpreadConstraints``), which only a pod yet to be scheduled can follow, so the
    operator's ``OnDelete`` roll would move nothing by restarting for them."""
    return {k: v for k, v in pod.items() if k != "topologySpreadConstraints"}


def config_hash(*parts: object) -> str:
    """sha256 of the parts as canonical JSON: what restarts a pod when it changes."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def optional(part: object | None) -> tuple[object, ...]:
    """A config hash part that only counts when set: an unsecured cluster's hashes stay what
    they were before certificates existed (an operator upgrade restarts nothing)."""
    return () if part is None else (part,)


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
