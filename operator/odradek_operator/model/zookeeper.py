"""The ZooKeeper ensemble: ``zoo.cfg`` in a ConfigMap and a StatefulSet of the official image.

``zoo.cfg`` lists every server as ``server.N=<pod>.<cluster>-zookeeper-nodes.<ns>.svc.cluster.local
:2888:3888;<same host>:2181``: the client address comes from the server's own line (there is no
``clientPort`` line), so each server binds its own pod's address and not 0.0.0.0, which lets the
test harness run several servers on one host. ``standaloneEnabled=false`` makes a single server a
one-member ensemble, so one, three and five servers read the same file. Dynamic reconfiguration
stays off (ZooKeeper's default), so ZooKeeper never rewrites the read-only ``/conf/zoo.cfg``.
The root filesystem is read-only: ``/data`` is the claim, ``/tmp``, ``/logs`` and ``/datalog``
emptyDirs.

``myid`` (ordinal + 1) is written into the data directory at each start by a one-line ``sh -c``
in front of ``zkServer.sh start-foreground``: Kubernetes' ``$(VAR)`` expansion cannot add one,
and the image's own ``ZOO_MY_ID`` takes the number ready-made. ``expr`` is used, not ``$((...))``,
so that no ``$(`` reaches Kubernetes' expansion.

In a secured cluster (model/zookeeper_tls.py) the server lines have no client part: clients
reach only ``secureClientPort`` (2181, TLS with client certificates), the quorum is TLS too, the
pod mounts ``C-zookeeper-certs`` at /etc/zookeeper/certs, and the start script adds this server's
own key store (``$POD_NAME.pem``) to ``SERVER_JVMFLAGS``, which zkServer.sh passes to the JVM.

The ensemble's size is part of the config hash (zoo.cfg lists it); changing it is refused by
the reconciler (``ZooKeeperResizeRefused`` in reconcile/cluster.py): a static ensemble cannot
grow safely, as new empty servers could form a majority of their own.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator import names
from odradek_operator.model import meta, zookeeper_tls
from odradek_operator.model.spec.cluster import ClusterSpec

C = names.Component.ZOOKEEPER
TICK_TIME_MS = 2000
INIT_LIMIT_TICKS = 10
SYNC_LIMIT_TICKS = 5
TERMINATION_GRACE_S = 30
STARTUP_MAX_S = 5 * 60  # loading a snapshot and the transaction log
HEAP_MIN_MIB = 64
CLIENT_PORT_OPEN = {"tcpSocket": {"port": "client"}}
FOUR_LETTER_WORDS = "srvr,ruok,mntr"
# The image's ZOO_LOG_DIR and ZOO_DATA_LOG_DIR, writable under its read-only root: zkServer.sh
# makes the log directory, and a zoo.cfg naming dataLogDir would write there.
SCRATCH_DIRS = (
    (names.ZOOKEEPER_LOG_VOLUME, names.ZOOKEEPER_LOG_DIR),
    (names.ZOOKEEPER_DATA_LOG_VOLUME, names.ZOOKEEPER_DATA_LOG_DIR),
)


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
    tls = zookeeper_tls.enabled(cluster)
    for ordinal in range(cluster.zookeeper.replicas):
        host = names.pod_host(cluster.name, C, ordinal, cluster.namespace)
        # TLS: no client address here, or ZooKeeper would open a plaintext client port on it.
        client = "" if tls else f";{host}:{names.ZOOKEEPER_CLIENT_PORT}"
        lines.append(
            f"server.{names.zookeeper_myid(ordinal)}={host}:{names.ZOOKEEPER_PEER_PORT}:"
            f"{names.ZOOKEEPER_ELECTION_PORT}{client}"
        )
    if tls:
        lines += zookeeper_tls.server_lines()
    return "\n".join(lines) + "\n"


def config_map(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta.object_meta(cluster, names.config_map(cluster.name, C), C),
        "data": {names.ZOOKEEPER_CONFIG_FILE: zoo_cfg(cluster)},
    }


def start_command(cluster: ClusterSpec) -> list[str]:
    myid = f"{names.ZOOKEEPER_DATA_DIR}/myid"
    steps = [f'expr "${names.ENV_POD_INDEX}" + 1 > {myid}']
    if zookeeper_tls.enabled(cluster):
        steps.append(f'export SERVER_JVMFLAGS="$SERVER_JVMFLAGS {zookeeper_tls.keystore_flags()}"')
    steps.append("exec zkServer.sh start-foreground")
    return ["sh", "-c", " && ".join(steps)]


def heap_env(cluster: ClusterSpec) -> list[dict[str, str]]:
    """``ZK_SERVER_HEAP`` (MiB, read by zkEnv.sh; 1000 by default) at half the memory limit, so
    the JVM's heap and the rest of it fit under a limit; nothing without a limit."""
    limit = dict(cluster.zookeeper.resources.limits).get("memory")
    if limit is None:
        return []
    heap_mib = max(HEAP_MIN_MIB, meta.quantity_bytes(limit) // 2 // 2**20)
    return [{"name": "ZK_SERVER_HEAP", "value": str(heap_mib)}]


def statefulset(cluster: ClusterSpec, certificates_hash: str | None = None) -> dict[str, Any]:
    """``certificates_hash``: of ``C-zookeeper-certs`` (secured clusters), in the config hash so
    that new certificates roll the servers."""
    zk = cluster.zookeeper
    container = {
        "name": "zookeeper",
        "image": zk.image,
        "imagePullPolicy": cluster.image_pull_policy,
        "command": start_command(cluster),
        "env": [
            *meta.pod_env(),
            {"name": "ZOOCFGDIR", "value": names.ZOOKEEPER_CONFIG_DIR},
            *heap_env(cluster),
        ],
        "ports": [
            {"name": "client", "containerPort": names.ZOOKEEPER_CLIENT_PORT},
            {"name": "peer", "containerPort": names.ZOOKEEPER_PEER_PORT},
            {"name": "election", "containerPort": names.ZOOKEEPER_ELECTION_PORT},
        ],
        **meta.probes(CLIENT_PORT_OPEN, CLIENT_PORT_OPEN, STARTUP_MAX_S),
        "resources": meta.resources(zk.resources),
        "securityContext": meta.container_security_context(),
        "volumeMounts": [
            {"name": meta.CONFIG_VOLUME, "mountPath": names.ZOOKEEPER_CONFIG_DIR, "readOnly": True},
            {"name": names.ZOOKEEPER_DATA_VOLUME, "mountPath": names.ZOOKEEPER_DATA_DIR},
            meta.tmp_mount(),
            *({"name": volume, "mountPath": path} for volume, path in SCRATCH_DIRS),
        ],
    }
    pod = meta.pod_spec(cluster, C, container, uid=meta.ZOOKEEPER_UID, grace_s=TERMINATION_GRACE_S)
    pod["volumes"].extend({"name": volume, "emptyDir": {}} for volume, _ in SCRATCH_DIRS)
    if zookeeper_tls.enabled(cluster):
        pod["volumes"].append(zookeeper_tls.server_volume(cluster))
        container["volumeMounts"].append(zookeeper_tls.server_mount())
    claim = {
        "metadata": {"name": names.ZOOKEEPER_DATA_VOLUME, "labels": names.labels(cluster.name, C)},
        "spec": meta.claim_spec(zk.storage.size, zk.storage.storage_class),
    }
    digest = meta.config_hash(
        zoo_cfg(cluster),
        meta.hashed_pod(pod),
        claim["spec"],
        cluster.restart,
        *meta.optional(certificates_hash),
    )
    return meta.statefulset(
        cluster,
        C,
        zk.replicas,
        pod,
        digest,
        persistentVolumeClaimRetentionPolicy={
            # ZooKeeper's data describes the brokers' logs: it goes when they go.
            "whenDeleted": "Delete" if cluster.brokers.delete_claim else "Retain",
            "whenScaled": "Retain",
        },
        volumeClaimTemplates=[claim],
        certificates_hash=certificates_hash,
    )
