"""ZooKeeper over mutual TLS in a secured cluster: what the servers run, what their clients send.

A cluster is secured once any of its listeners has TLS or authentication (``ClusterSpec.secured``).
ZooKeeper then takes only the cluster's own principals, by these rules (each enforced here):

- **No plaintext client port.** ``secureClientPort`` is ZooKeeper's usual 2181 (the port the
  Services and NetworkPolicies name) and there is no ``clientPort`` and no client address in the
  ``server.N`` lines: a plaintext client gets no answer at all. The Netty connection factory
  serves it (ZooKeeper's TLS needs Netty), with client certificates required
  (``ssl.clientAuth=need``) and checked against the cluster CA's trust bundle alone: a client
  certificate from the clients CA (an OdradekUser's), or from any other CA, fails the handshake.
- **Sessions have identities.** ``authProvider.x509`` names each session by its certificate's
  subject (``x509:CN=demo-zookeeper-client,O=odradek.io``), which the brokers' ACLs name.
- **The quorum is TLS too** (``sslQuorum``: peer traffic on 2888, elections on 3888), with
  ZooKeeper's default host name verification of both ends kept on: a peer must present a
  cluster-CA certificate naming its own pod (``server_dns_names``), so the brokers' and
  controllers' certificates, from the same CA, cannot join the ensemble.
- **One client identity for brokers and controllers.** With ``zookeeper.set.acl=true`` every
  znode gets CREATOR_ALL for its creator plus world READ (Kafka's ``ZkData.defaultAcls``), and
  the controller rewrites znodes that brokers create (topic assignments), so all of them must be
  one ZooKeeper principal, as Kafka requires of its brokers. Their own leaves differ
  (``CN=demo-broker`` and ``CN=demo-controller``), hence a client certificate of its own,
  ``C-zookeeper-client-certs`` (``CN=C-zookeeper-client,O=odradek.io``, kept with the other
  certificates by reconcile/certificates.py), mounted by both and used for nothing else.
- **Fixed for the cluster's life.** A running ensemble never changes between plaintext and TLS
  (``SecurityChangeRefused``, reconcile/cluster.py; before the brokers exist, from
  ``serves_tls`` of the live StatefulSet): rolled one server at a time it would be split
  between plaintext and TLS peers, which cannot form a quorum, and the znodes the brokers made
  secured carry ACLs that a plaintext client cannot write (nor are the open ones of a plaintext
  cluster ever closed).
- **Clients check the server**: the server's certificate must name the host connected to (the
  client Service's name, also in ``server_dns_names``); Kafka's default, kept.

Debian's and the official image's ZooKeeper (3.8) read PEM key and trust stores (a PKCS#8 key,
then the chain: what the pki writes), so the mounted Secrets are used as they are. Each server's
key store is its own ``<pod>.pem`` and zoo.cfg is one file for the ensemble, so the two
key-store locations are the only ``ssl.*`` settings passed as JVM system properties by the start
script (``keystore_flags``, with the shell's ``$POD_NAME``); ZooKeeper reads the rest from zoo.cfg
into the same system properties.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek.config.zookeeper_tls import CNXN_SOCKET_NETTY
from odradek_operator import names
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.pki.secrets import CA_CERT

__all__ = [
    "add_client_identity",
    "client_mount",
    "client_properties",
    "client_volume",
    "enabled",
    "keystore_flags",
    "server_dns_names",
    "server_lines",
    "server_mount",
    "server_volume",
    "serves_tls",
]

SERVER_CNXN_FACTORY_NETTY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
X509_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
SERVER_CERTS_VOLUME = "zookeeper-certs"
CERTS_MODE = 0o440
CLIENT_CERTS_VOLUME = "zookeeper-client-certs"


def enabled(cluster: ClusterSpec) -> bool:
    """ZooKeeper is TLS-only exactly when the cluster is secured."""
    return cluster.secured


def _trust_store() -> str:
    return f"{names.ZOOKEEPER_CERTS_DIR}/{CA_CERT}"


def server_lines() -> list[str]:
    """zoo.cfg's TLS lines, the same on every server (the key stores: ``keystore_flags``)."""
    trust = _trust_store()
    return [
        f"secureClientPort={names.ZOOKEEPER_CLIENT_PORT}",
        f"serverCnxnFactory={SERVER_CNXN_FACTORY_NETTY}",
        "ssl.clientAuth=need",
        "ssl.keyStore.type=PEM",
        f"ssl.trustStore.location={trust}",
        "ssl.trustStore.type=PEM",
        f"authProvider.x509={X509_AUTH_PROVIDER}",
        "sslQuorum=true",
        "ssl.quorum.clientAuth=need",
        "ssl.quorum.hostnameVerification=true",
        "ssl.quorum.keyStore.type=PEM",
        f"ssl.quorum.trustStore.location={trust}",
        "ssl.quorum.trustStore.type=PEM",
    ]


def serves_tls(zookeeper_sts: dict[str, Any]) -> bool:
    """Whether a live ZooKeeper StatefulSet runs TLS: its pods mount the server certificates."""
    pod = zookeeper_sts.get("spec", {}).get("template", {}).get("spec", {})
    return any(volume.get("name") == SERVER_CERTS_VOLUME for volume in pod.get("volumes") or [])


def keystore_flags() -> str:
    """JVM flags naming this server's own key store, for the start script's shell to expand."""
    pem = f"{names.ZOOKEEPER_CERTS_DIR}/${names.ENV_POD_NAME}.pem"
    return f"-Dzookeeper.ssl.keyStore.location={pem} -Dzookeeper.ssl.quorum.keyStore.location={pem}"


def server_volume(cluster: ClusterSpec) -> dict[str, Any]:
    secret = names.certs_secret(cluster.name, names.Component.ZOOKEEPER)
    return {
        "name": SERVER_CERTS_VOLUME,
        # readable by the pod's group (fsGroup) alone: private keys, as model/security.py's
        "secret": {"secretName": secret, "defaultMode": CERTS_MODE},
    }


def server_mount() -> dict[str, Any]:
    return {"name": SERVER_CERTS_VOLUME, "mountPath": names.ZOOKEEPER_CERTS_DIR, "readOnly": True}


def server_dns_names(cluster: ClusterSpec, ordinal: int) -> list[str]:
    """What a ZooKeeper server's certificate must name: its pod through the headless Service
    (its quorum peers' host name check) and the client Service (its clients' check)."""
    return [
        *names.pod_dns_names(cluster.name, names.Component.ZOOKEEPER, ordinal, cluster.namespace),
        *names.service_dns_names(names.zookeeper_client_service(cluster.name), cluster.namespace),
    ]


def client_properties(cluster: ClusterSpec) -> dict[str, str]:
    """The ZooKeeper client keys of broker.properties and the controllers' files ({} when the
    cluster is not secured: plaintext, as before)."""
    if not enabled(cluster):
        return {}
    directory = names.ZOOKEEPER_CLIENT_CERTS_DIR
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": CNXN_SOCKET_NETTY,
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.keystore.location": f"{directory}/{names.ZOOKEEPER_CLIENT_PEM}",
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.ssl.truststore.location": f"{directory}/{CA_CERT}",
        "zookeeper.set.acl": "true",
    }


def client_volume(cluster: ClusterSpec) -> dict[str, Any]:
    secret = names.zookeeper_client_certs_secret(cluster.name)
    return {
        "name": CLIENT_CERTS_VOLUME,
        # readable by the pod's group (fsGroup) alone: private keys, as model/security.py's
        "secret": {"secretName": secret, "defaultMode": CERTS_MODE},
    }


def client_mount() -> dict[str, Any]:
    return {
        "name": CLIENT_CERTS_VOLUME,
        "mountPath": names.ZOOKEEPER_CLIENT_CERTS_DIR,
        "readOnly": True,
    }


def add_client_identity(cluster: ClusterSpec, pod: dict[str, Any]) -> None:
    """Mount the ZooKeeper client identity into a broker's or controller's pod (secured only)."""
    if not enabled(cluster):
        return
    pod["volumes"].append(client_volume(cluster))
    for container in pod["containers"]:
        container["volumeMounts"].append(client_mount())
