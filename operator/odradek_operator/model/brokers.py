"""The brokers: ``broker.properties`` in a ConfigMap, and their StatefulSet with one claim per
JBOD volume.

``broker.properties`` is the operator's defaults with the user's ``spec.brokers.config`` over
them, plus the keys the operator owns that are the same on every pod (``zookeeper.connect``,
``control.plane.listener.name``, ``inter.broker.listener.name``, ``listener.security.protocol.map``,
``log.dirs``). The per-pod keys go in by ``--override`` with Kubernetes' ``$(VAR)`` expansion, no
shell: ``broker.id=$(POD_INDEX)``, the three listeners (clients', control plane's, and
``INTERNAL`` for replication, on ``names.INTERNAL_PORT``: a client flood of the client listener
never keeps a follower out, issue 23) and the
advertised ones on ``$(POD_IP)`` (clients outside the cluster's DNS reach a pod by its IP), the
admin listener on the metrics port.

With ``spec.brokers.rack``, the pod gets a downward API volume ``pod-info`` at
``/etc/odradek-pod`` whose file ``rack`` is the pod's ``odradek.io/rack`` annotation (empty until
the operator copies the node's label there, reconcile/racks.py), and broker.properties gets
``odradek.broker.rack.file`` naming it: the broker waits for the file before it starts.

Volume ``N`` is the volumeClaimTemplate ``data-N`` mounted at ``/var/lib/odradek/data-N``; its
``log`` subdirectory is in ``log.dirs``. Claims are kept when the cluster is deleted or scaled
down unless ``deleteClaim: true`` (``persistentVolumeClaimRetentionPolicy``).

``updateStrategy: OnDelete``: the operator restarts pods itself, one at a time, when a pod's
``odradek.io/config-hash`` differs from the template's. The hash covers broker.properties, the pod
template (image, resources, ports...), the claim templates and the cluster's restart annotation;
not the number of replicas. ``terminationGracePeriodSeconds`` outlasts a controlled shutdown:
``controlled.shutdown.max.retries`` x (``controller.socket.timeout.ms`` +
``controlled.shutdown.retry.backoff.ms``) + ``SHUTDOWN_MARGIN_S`` to close the logs.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from odradek.config.broker import BROKER_KEYS
from odradek_operator import names
from odradek_operator.model import meta, security, zookeeper_tls
from odradek_operator.model.spec.cluster import ClusterSpec

C = names.Component.BROKER
SHUTDOWN_MARGIN_S = 30
# Log recovery after an unclean stop comes before the admin listener answers.
STARTUP_MAX_S = 30 * 60


POD_INFO_VOLUME = "pod-info"


def properties(cluster: ClusterSpec) -> dict[str, str]:
    """broker.properties: everything but the per-pod keys."""
    props = {
        **cluster.brokers.properties(),
        "zookeeper.connect": names.zookeeper_connect(cluster.name, cluster.namespace),
        **zookeeper_tls.client_properties(cluster),
        "control.plane.listener.name": names.CONTROL_PLANE_LISTENER,
        "inter.broker.listener.name": names.INTERNAL_LISTENER,
        **security.broker_properties(cluster),
        "log.dirs": cluster.brokers.log_dirs,
    }
    if cluster.brokers.rack_topology_key is not None:
        props["odradek.broker.rack.file"] = f"{names.POD_INFO_DIR}/{names.RACK_FILE}"
    return props


def pod_info_volume() -> dict[str, Any]:
    """The downward API volume with the rack annotation as a file."""
    field = {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{names.RACK_ANNOTATION}']"}
    return {
        "name": POD_INFO_VOLUME,
        "downwardAPI": {"items": [{"path": names.RACK_FILE, "fieldRef": field}]},
    }


def config_map(cluster: ClusterSpec) -> dict[str, Any]:
    header = "Written by odradek-operator from spec.brokers.config; edits are overwritten."
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta.object_meta(cluster, names.config_map(cluster.name, C), C),
        "data": {names.BROKER_PROPERTIES: meta.render_properties(properties(cluster), header)},
    }


def listeners(cluster: ClusterSpec, host: str = f"$({names.ENV_POD_IP})") -> str:
    """Every listener on ``host``: the client listeners, CONTROL_PLANE, INTERNAL."""
    ports = [
        *((listener.kafka_name, listener.port) for listener in cluster.listeners),
        (names.CONTROL_PLANE_LISTENER, cluster.ports.control_plane),
        (names.INTERNAL_LISTENER, names.INTERNAL_PORT),
    ]
    return ",".join(f"{name}://{host}:{port}" for name, port in ports)


def args(cluster: ClusterSpec) -> list[str]:
    advertised = listeners(cluster, security.advertised_host(cluster, C))
    overrides = [
        f"broker.id=$({names.ENV_POD_INDEX})",
        f"listeners={listeners(cluster)}",
        f"advertised.listeners={advertised}",
        f"odradek.admin.listener=$({names.ENV_POD_IP}):{cluster.ports.metrics}",
        *security.keystore_override(cluster),
    ]
    config = ["--config", f"{names.ODRADEK_CONFIG_DIR}/{names.BROKER_PROPERTIES}"]
    return ["broker", *config, *(arg for o in overrides for arg in ("--override", o))]


def termination_grace_s(cluster: ClusterSpec) -> int:
    props = cluster.brokers.properties()

    def value(key: str) -> Any:
        row = BROKER_KEYS[key]
        return row.parse(props.get(key, row.default))

    if not value("controlled.shutdown.enable"):
        return SHUTDOWN_MARGIN_S
    attempt_ms = value("controller.socket.timeout.ms") + value(
        "controlled.shutdown.retry.backoff.ms"
    )
    return math.ceil(value("controlled.shutdown.max.retries") * attempt_ms / 1000) + (
        SHUTDOWN_MARGIN_S
    )


def claim_templates(cluster: ClusterSpec) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {"name": v.claim_template, "labels": names.labels(cluster.name, C)},
            "spec": meta.claim_spec(v.size, v.storage_class),
        }
        for v in cluster.brokers.volumes
    ]


def statefulset(
    cluster: ClusterSpec, image: str, certificates_hash: str | None = None
) -> dict[str, Any]:
    """``certificates_hash``: of the brokers' certificates Secret (secured clusters), in the
    config hash so that new certificates roll the brokers."""
    brokers = cluster.brokers
    container = {
        "name": "broker",
        "image": image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": ["odradek"],
        "args": args(cluster),
        "env": meta.pod_env(),
        "ports": [
            *(
                {"name": name, "containerPort": port}
                for name, port in security.client_ports(cluster)
            ),
            {"name": "control-plane", "containerPort": cluster.ports.control_plane},
            {"name": "internal", "containerPort": names.INTERNAL_PORT},
            {"name": "metrics", "containerPort": cluster.ports.metrics},
        ],
        **meta.probes(meta.http_get("/readyz"), meta.http_get("/healthz"), STARTUP_MAX_S),
        "resources": meta.resources(brokers.resources),
        "securityContext": meta.container_security_context(),
        "volumeMounts": [
            {"name": meta.CONFIG_VOLUME, "mountPath": names.ODRADEK_CONFIG_DIR, "readOnly": True},
            meta.tmp_mount(),
            *({"name": v.claim_template, "mountPath": v.mount_path} for v in brokers.volumes),
        ],
    }
    pod = meta.pod_spec(
        cluster, C, container, uid=meta.ODRADEK_UID, grace_s=termination_grace_s(cluster)
    )
    zookeeper_tls.add_client_identity(cluster, pod)
    if brokers.rack_topology_key is not None:
        container["volumeMounts"].append(
            {"name": POD_INFO_VOLUME, "mountPath": names.POD_INFO_DIR, "readOnly": True}
        )
        pod["volumes"].append(pod_info_volume())
    cert_volumes, cert_mounts = security.certificate_volumes(cluster, C)
    container["volumeMounts"].extend(cert_mounts)
    pod["volumes"].extend(cert_volumes)
    claims = claim_templates(cluster)
    digest = meta.config_hash(
        properties(cluster),
        meta.hashed_pod(pod),
        [c["spec"] for c in claims],
        cluster.restart,
        *meta.optional(certificates_hash),
    )
    return meta.statefulset(
        cluster,
        C,
        brokers.replicas,
        pod,
        digest,
        persistentVolumeClaimRetentionPolicy=meta.retention_policy(brokers.delete_claim),
        volumeClaimTemplates=claims,
        certificates_hash=certificates_hash,
    )
