"""The ZooKeeper ensemble: ``zoo.cfg`` in a ConfigMap and a StatefulSet of the official image.

``zoo.cfg`` lists every server as ``server.N=<pod>.<cluster>-zookeeper-nodes.<ns>.svc.cluster.local
:2888:3888;<same host>:2181``: the client address comes from the server's own line (there is no
``clientPort`` line), so each server binds its own pod's address and not 0.0.0.0, which lets the
test harness run several servers on one host. ``standaloneEnabled=false`` makes a single server a
one-member ensemble, so one, three and five servers read the same file. Dynamic reconfiguration
stays off (ZooKeeper's default), so ZooKeeper never rewrites the read-only ``/conf/zoo.cfg``.

``myid`` (ordinal + 1) is written into the data directory at each start by a one-line ``sh -c``
in front of ``zkServer.sh start-foreground``: Kubernetes' ``$(VAR)`` expansion cannot add one,
and the image's own ``ZOO_MY_ID`` takes the number ready-made. ``expr`` is used, not ``$((...))``,
so that no ``$(`` reaches Kubernetes' expansion.

The ensemble's size is part of the config hash (zoo.cfg lists it); changing it is refused by
``spec.check_transition`` (a static ensemble cannot grow safely: new empty servers could form a
majority of their own).

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator.model import meta, names
from odradek_operator.model.spec import ClusterSpec

C = names.Component.ZOOKEEPER
TICK_TIME_MS = 2000
INIT_LIMIT_TICKS = 10
SYNC_LIMIT_TICKS = 5
TERMINATION_GRACE_S = 30
FOUR_LETTER_WORDS = "srvr,ruok,mntr"


def zoo_cfg(cluster: ClusterSpec) -> str:
    lines = [
        "# Written by odradek-operator; edits are overwritten.",
        f"dataDir={names.ZOOKEEPER_DATA_DIR}",
        f"tickTime={TICK_TIME_MS}",
        f"initLimit={INIT_LIMIT_TICKS}",
        f"syncLimit={SYNC_LIMIT_TICKS}",
        "standaloneEnabled=false",
        "reconfigEnabled=false",
        "autopurge.snapRetainCount=3",
        "autopurge.purgeInterval=1",
        f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
        "admin.enableServer=false",
    ]
    for ordinal in range(cluster.zookeeper.replicas):
        host = names.pod_host(cluster.name, C, ordinal, cluster.namespace)
        lines.append(
            f"server.{names.zookeeper_myid(ordinal)}={host}:{names.ZOOKEEPER_PEER_PORT}:"
            f"{names.ZOOKEEPER_ELECTION_PORT};{host}:{names.ZOOKEEPER_CLIENT_PORT}"
        )
    return "\n".join(lines) + "\n"


def config_map(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta.object_meta(cluster, names.config_map(cluster.name, C), C),
        "data": {names.ZOOKEEPER_CONFIG_FILE: zoo_cfg(cluster)},
    }


def start_command() -> list[str]:
    myid = f"{names.ZOOKEEPER_DATA_DIR}/myid"
    script = f'expr "${names.ENV_POD_INDEX}" + 1 > {myid} && exec zkServer.sh start-foreground'
    return ["sh", "-c", script]


def _probe(initial_delay_s: int, failure_threshold: int) -> dict[str, Any]:
    return {
        "tcpSocket": {"port": "client"},
        "initialDelaySeconds": initial_delay_s,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": failure_threshold,
    }


def statefulset(cluster: ClusterSpec) -> dict[str, Any]:
    zk = cluster.zookeeper
    config_volume = "config"
    container = {
        "name": "zookeeper",
        "image": zk.image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": start_command(),
        "env": [*meta.pod_env(), {"name": "ZOOCFGDIR", "value": names.ZOOKEEPER_CONFIG_DIR}],
        "ports": [
            {"name": "client", "containerPort": names.ZOOKEEPER_CLIENT_PORT},
            {"name": "peer", "containerPort": names.ZOOKEEPER_PEER_PORT},
            {"name": "election", "containerPort": names.ZOOKEEPER_ELECTION_PORT},
        ],
        "readinessProbe": _probe(5, 3),
        "livenessProbe": _probe(30, 6),
        "resources": meta.resources(zk.resources),
        "securityContext": meta.container_security_context(),
        "volumeMounts": [
            {"name": config_volume, "mountPath": names.ZOOKEEPER_CONFIG_DIR, "readOnly": True},
            {"name": names.ZOOKEEPER_DATA_VOLUME, "mountPath": names.ZOOKEEPER_DATA_DIR},
        ],
    }
    pod_spec = {
        "serviceAccountName": names.service_account(cluster.name),
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "securityContext": meta.pod_security_context(meta.ZOOKEEPER_UID),
        "topologySpreadConstraints": meta.spread(cluster, C),
        "containers": [container],
        "volumes": [
            {
                "name": config_volume,
                "configMap": {"name": names.config_map(cluster.name, C)},
            }
        ],
    }
    claim = {
        "metadata": {"name": names.ZOOKEEPER_DATA_VOLUME, "labels": names.labels(cluster.name, C)},
        "spec": meta.claim_spec(zk.storage.size, zk.storage.storage_class),
    }
    digest = meta.config_hash(zoo_cfg(cluster), pod_spec, claim["spec"], cluster.restart)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta.object_meta(cluster, names.statefulset(cluster.name, C), C),
        "spec": {
            "serviceName": names.headless_service(cluster.name, C),
            "replicas": zk.replicas,
            "selector": {"matchLabels": names.selector_labels(cluster.name, C)},
            "podManagementPolicy": "Parallel",  # an ensemble needs its peers to start
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {
                # ZooKeeper's data describes the brokers' logs: it goes when they go.
                "whenDeleted": "Delete" if cluster.brokers.delete_claim else "Retain",
                "whenScaled": "Retain",
            },
            "template": {
                "metadata": {
                    "labels": names.labels(cluster.name, C),
                    "annotations": {names.CONFIG_HASH_ANNOTATION: digest},
                },
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [claim],
        },
    }
