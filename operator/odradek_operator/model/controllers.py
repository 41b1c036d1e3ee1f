"""The controllers: one properties file per ordinal in a ConfigMap, and their StatefulSet.

``controller.id`` is ``1001 + ordinal``, and Kubernetes' ``$(VAR)`` expansion cannot add, so the
ConfigMap holds one file per ordinal, ``controller-<ordinal>.properties`` (identical but for
``controller.id``), and the container picks its own with
``--config /etc/odradek/controller-$(POD_INDEX).properties``: no shell, no new Odradek option.
The pod's address goes in by ``--override`` (``listeners=CONTROLLER://$(POD_IP):9093``, the admin
listener on the metrics port). Scaling the controllers adds files to the ConfigMap, which is
applied before the StatefulSet (``desired.desired_objects`` returns objects in apply order).

The config hash covers the files without ``controller.id`` (so the number of controllers does not
restart them), the pod template and the cluster's restart annotation.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator import names
from odradek_operator.model import meta, security, zookeeper_tls
from odradek_operator.model.spec.cluster import ClusterSpec

C = names.Component.CONTROLLER
TERMINATION_GRACE_S = 30
STARTUP_MAX_S = 5 * 60  # connecting to ZooKeeper, reading the cluster's state
CONFIG_FILE = "controller-{ordinal}.properties"


def config_file(ordinal: int | str) -> str:
    return CONFIG_FILE.format(ordinal=ordinal)


def shared_properties(cluster: ClusterSpec) -> dict[str, str]:
    """What every controller's file holds besides its id."""
    return {
        **cluster.brokers.controller_properties(),
        "zookeeper.connect": names.zookeeper_connect(cluster.name, cluster.namespace),
        **zookeeper_tls.client_properties(cluster),
        "control.plane.listener.name": names.CONTROL_PLANE_LISTENER,
        **security.controller_properties(cluster),
    }


def properties(cluster: ClusterSpec, ordinal: int) -> dict[str, str]:
    return {**shared_properties(cluster), "controller.id": str(names.controller_id(ordinal))}


def config_map(cluster: ClusterSpec) -> dict[str, Any]:
    header = "Written by odradek-operator; edits are overwritten."
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta.object_meta(cluster, names.config_map(cluster.name, C), C),
        "data": {
            config_file(n): meta.render_properties(properties(cluster, n), header)
            for n in range(cluster.controllers.replicas)
        },
    }


def args(cluster: ClusterSpec) -> list[str]:
    # Secured, the listener is on the pod's DNS name (what brokers check its certificate for);
    # the controller binds that name's address, the pod's own.
    host = security.advertised_host(cluster, C)
    overrides = [
        f"listeners={names.CONTROLLER_LISTENER}://{host}:{names.CONTROLLER_PORT}",
        f"odradek.admin.listener=$({names.ENV_POD_IP}):{cluster.ports.metrics}",
        *security.keystore_override(cluster),
    ]
    config = f"{names.ODRADEK_CONFIG_DIR}/{config_file(f'$({names.ENV_POD_INDEX})')}"
    return ["controller", "--config", config, *(a for o in overrides for a in ("--override", o))]


def statefulset(
    cluster: ClusterSpec, image: str, certificates_hash: str | None = None
) -> dict[str, Any]:
    container = {
        "name": "controller",
        "image": image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": ["odradek"],
        "args": args(cluster),
        "env": meta.pod_env(),
        "ports": [
            {"name": "controller", "containerPort": names.CONTROLLER_PORT},
            {"name": "metrics", "containerPort": cluster.ports.metrics},
        ],
        **meta.probes(meta.http_get("/readyz"), meta.http_get("/healthz"), STARTUP_MAX_S),
        "resources": meta.resources(cluster.controllers.resources),
        "securityContext": meta.container_security_context(),
        "volumeMounts": [
            {"name": meta.CONFIG_VOLUME, "mountPath": names.ODRADEK_CONFIG_DIR, "readOnly": True},
            meta.tmp_mount(),
        ],
    }
    pod = meta.pod_spec(cluster, C, container, uid=meta.ODRADEK_UID, grace_s=TERMINATION_GRACE_S)
    zookeeper_tls.add_client_identity(cluster, pod)
    cert_volumes, cert_mounts = security.certificate_volumes(cluster, C)
    container["volumeMounts"].extend(cert_mounts)
    pod["volumes"].extend(cert_volumes)
    digest = meta.config_hash(
        shared_properties(cluster),
        meta.hashed_pod(pod),
        cluster.restart,
        *meta.optional(certificates_hash),
    )
    return meta.statefulset(
        cluster, C, cluster.controllers.replicas, pod, digest, certificates_hash=certificates_hash
    )
