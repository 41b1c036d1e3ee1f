"""Every name, label, annotation, port and path the operator gives a Kubernetes object: one home.

For an ``OdradekCluster`` named ``demo`` in namespace ``data``:

- StatefulSets ``demo-zookeeper``, ``demo-controller``, ``demo-broker``; their pods
  ``demo-broker-0``... and headless Services ``demo-broker-nodes``... (publishNotReadyAddresses);
  client Services ``demo-zookeeper-client`` (2181) and ``demo-bootstrap`` (the client port);
- ConfigMaps ``demo-<component>-config``; PodDisruptionBudgets ``demo-zookeeper``, ``demo-broker``;
  ServiceAccount ``demo-odradek``;
- a broker's id is its pod's ordinal, a controller's id ``1001 + ordinal`` (apart from broker ids,
  which stay below ``CONTROLLER_ID_BASE``), a ZooKeeper server's myid ``ordinal + 1``;
- JBOD volume ``N`` is the volumeClaimTemplate ``data-N`` mounted at ``/var/lib/odradek/data-N``;
  the broker's log dir is its ``log`` subdirectory (a real disk's ``lost+found`` stays out of it).

Labels follow Kubernetes' recommended ``app.kubernetes.io/*`` keys. The selector of a component is
``name``, ``instance`` and ``component`` (StatefulSet selectors are immutable: never add to it).

Below every other package of the operator (model, pki, reconcile and handlers all name things;
pyproject.toml's layers contract keeps it at the bottom): it imports nothing of the operator.
Pure constants and functions, no I/O: any thread may call them.
"""

from __future__ import annotations

import enum

GROUP = "odradek.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_KIND = "OdradekCluster"
CLUSTER_PLURAL = "odradekclusters"
TOPIC_KIND = "OdradekTopic"
TOPIC_PLURAL = "odradektopics"
CONNECT_KIND = "OdradekConnect"
CONNECT_PLURAL = "odradekconnects"
CONNECTOR_KIND = "OdradekConnector"
CONNECTOR_PLURAL = "odradekconnectors"
USER_KIND = "OdradekUser"
USER_PLURAL = "odradekusers"

APP_NAME = "odradek"
MANAGED_BY = "odradek-operator"
NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# On an OdradekTopic or OdradekUser: the cluster it belongs to (Strimzi's strimzi.io/cluster).
CLUSTER_LABEL = f"{GROUP}/cluster"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"  # set by the StatefulSet controller (1.28+)

CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"
RESTART_ANNOTATION = f"{GROUP}/restart"
# On a broker pod: its node's spec.brokers.rack.topologyKey label, written by the operator.
RACK_ANNOTATION = f"{GROUP}/rack"
# On the operator's own pods (the chart's Deployment), as Strimzi's strimzi.io/kind: the label
# the clusters' NetworkPolicies let in on the listeners the operator talks to.
OPERATOR_KIND_LABEL = f"{GROUP}/kind"
OPERATOR_KIND = "cluster-operator"
# Set by Kubernetes (1.22+) on every Namespace: how a policy names the operator's namespace.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# Ports the spec does not choose.
ZOOKEEPER_CLIENT_PORT = 2181
ZOOKEEPER_PEER_PORT = 2888
ZOOKEEPER_ELECTION_PORT = 3888
CONTROLLER_PORT = 9093  # the controller's own listener (AlterPartition from brokers)
INTERNAL_PORT = 9094  # the brokers' INTERNAL listener: replication, apart from the clients

# Listener names, as odradek.config and odradek.local.cluster use them.
CLIENT_LISTENER = "PLAINTEXT"
CONTROL_PLANE_LISTENER = "CONTROL_PLANE"
CONTROLLER_LISTENER = "CONTROLLER"
# Followers fetch over INTERNAL, so no client filling max.connections keeps one out (issue 23).
INTERNAL_LISTENER = "INTERNAL"
LISTENER_SECURITY_PROTOCOL_MAP = (
    f"{CLIENT_LISTENER}:PLAINTEXT,{CONTROL_PLANE_LISTENER}:PLAINTEXT,{INTERNAL_LISTENER}:PLAINTEXT"
)

ZOOKEEPER_CHROOT = "/odradek"
CONTROLLER_ID_BASE = 1001
CLUSTER_DOMAIN = "cluster.local"

# Paths inside the containers.
ODRADEK_CONFIG_DIR = "/etc/odradek"
BROKER_PROPERTIES = "broker.properties"
ZOOKEEPER_CONFIG_DIR = "/conf"
ZOOKEEPER_CONFIG_FILE = "zoo.cfg"
ZOOKEEPER_DATA_DIR = "/data"
LOG_DIR_ROOT = "/var/lib/odradek"
# The brokers' downward API volume (not under ODRADEK_CONFIG_DIR: that is a read-only ConfigMap).
POD_INFO_DIR = "/etc/odradek-pod"
RACK_FILE = "rack"  # in POD_INFO_DIR: the RACK_ANNOTATION's value

# Every container's root filesystem is read-only; this emptyDir volume is its /tmp.
TMP_VOLUME = "tmp"
TMP_DIR = "/tmp"
# The official ZooKeeper image's other writable directories (its ZOO_LOG_DIR, ZOO_DATA_LOG_DIR).
ZOOKEEPER_LOG_VOLUME = "logs"
ZOOKEEPER_LOG_DIR = "/logs"
ZOOKEEPER_DATA_LOG_VOLUME = "datalog"
ZOOKEEPER_DATA_LOG_DIR = "/datalog"

# Downward-API environment variables every Odradek and ZooKeeper container gets.
ENV_POD_INDEX = "POD_INDEX"
ENV_POD_IP = "POD_IP"
ENV_POD_NAME = "POD_NAME"
ENV_POD_NAMESPACE = "POD_NAMESPACE"


class Component(enum.StrEnum):
    ZOOKEEPER = "zookeeper"
    CONTROLLER = "controller"
    BROKER = "broker"


# --- object names -------------------------------------------------------------------------------


def statefulset(cluster: str, component: Component) -> str:
    return f"{cluster}-{component}"


def pod(cluster: str, component: Component, ordinal: int) -> str:
    return f"{statefulset(cluster, component)}-{ordinal}"


def headless_service(cluster: str, component: Component) -> str:
    return f"{cluster}-{component}-nodes"


def zookeeper_client_service(cluster: str) -> str:
    return f"{cluster}-zookeeper-client"


def bootstrap_service(cluster: str) -> str:
    return f"{cluster}-bootstrap"


def config_map(cluster: str, component: Component) -> str:
    return f"{cluster}-{component}-config"


def pod_disruption_budget(cluster: str, component: Component) -> str:
    return f"{cluster}-{component}"


def network_policy(cluster: str, component: Component) -> str:
    return f"{cluster}-{component}-network-policy"


def service_account(cluster: str) -> str:
    return f"{cluster}-odradek"


def volume_claim_template(volume_id: int) -> str:
    """The volumeClaimTemplate (and pod volume) of JBOD volume ``volume_id``."""
    return f"data-{volume_id}"


def broker_pvc(cluster: str, volume_id: int, ordinal: int) -> str:
    """The PersistentVolumeClaim the StatefulSet controller makes: ``<template>-<pod>``."""
    return f"{volume_claim_template(volume_id)}-{pod(cluster, Component.BROKER, ordinal)}"


ZOOKEEPER_DATA_VOLUME = "data"


def zookeeper_pvc(cluster: str, ordinal: int) -> str:
    return f"{ZOOKEEPER_DATA_VOLUME}-{pod(cluster, Component.ZOOKEEPER, ordinal)}"


# --- certificates (Strimzi's Secret names and keys; the contents are odradek_operator.pki's) ------
# The cluster CA signs the brokers', controllers', ZooKeeper's and the operator's certificates,
# the clients CA the OdradekUsers' (tls authentication). Each CA is two Secrets: the certificate
# (readable by anyone who must trust the cluster) apart from the key (the operator's alone).
CA_GENERATION_ANNOTATION = f"{GROUP}/ca-generation"
# In every pod's template: a hash of the certificates it mounts, so a new leaf rolls the pods.
CERTIFICATES_HASH_ANNOTATION = f"{GROUP}/certificates-hash"
CERTS_DIR = "/etc/odradek/certs"  # the leaf Secret's mount: <pod>.pem and ca.crt
OPERATOR_PRINCIPAL_NAME = "odradek-operator"  # CN of C-operator-certs: User:odradek-operator


def cluster_ca_cert_secret(cluster: str) -> str:
    return f"{cluster}-cluster-ca-cert"


def cluster_ca_key_secret(cluster: str) -> str:
    return f"{cluster}-cluster-ca"


def clients_ca_cert_secret(cluster: str) -> str:
    return f"{cluster}-clients-ca-cert"


def clients_ca_key_secret(cluster: str) -> str:
    return f"{cluster}-clients-ca"


def certs_secret(cluster: str, component: Component) -> str:
    """A component's leaf Secret: ``<pod>.pem`` (key then chain) per pod and ``ca.crt``; the
    brokers' also ``clients-ca.crt``, the clients CA bundle their tls listeners trust."""
    return f"{cluster}-{component}-certs"


def operator_certs_secret(cluster: str) -> str:
    """The operator's own client identity for this cluster: ``operator.pem`` and ``ca.crt``."""
    return f"{cluster}-operator-certs"


def component_principal_name(cluster: str, component: Component) -> str:
    """The CN of a component's certificates (``demo-broker``); its principal is the whole
    subject, ``User:CN=demo-broker,O=odradek.io``, which no clients-CA certificate (CN only)
    can map to."""
    return f"{cluster}-{component}"


# --- DNS and addresses --------------------------------------------------------------------------


def service_host(service: str, namespace: str) -> str:
    return f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}"


def pod_host(cluster: str, component: Component, ordinal: int, namespace: str) -> str:
    """A StatefulSet pod's stable name through its headless Service."""
    nodes = headless_service(cluster, component)
    return f"{pod(cluster, component, ordinal)}.{service_host(nodes, namespace)}"


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a Service answers to inside the cluster, short to fully qualified."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        service_host(service, namespace),
    ]


def pod_dns_names(cluster: str, component: Component, ordinal: int, namespace: str) -> list[str]:
    """A StatefulSet pod's names through its headless Service (``pod.svc`` ... FQDN): the
    subjectAltNames of its certificate."""
    pod_name = pod(cluster, component, ordinal)
    nodes = headless_service(cluster, component)
    return [f"{pod_name}.{name}" for name in service_dns_names(nodes, namespace)]


def zookeeper_connect(cluster: str, namespace: str) -> str:
    """``zookeeper.connect`` of brokers and controllers: the client Service, chroot /odradek."""
    host = service_host(zookeeper_client_service(cluster), namespace)
    return f"{host}:{ZOOKEEPER_CLIENT_PORT}{ZOOKEEPER_CHROOT}"


def bootstrap_address(cluster: str, namespace: str, client_port: int) -> str:
    """What ``status.bootstrap`` shows: ``demo-bootstrap.data.svc:9092``."""
    return f"{bootstrap_service(cluster)}.{namespace}.svc:{client_port}"


# --- Connect -----------------------------------------------------------------------------------
# An OdradekConnect ``sync`` has the ConfigMap ``sync-connect-config``
# (connect-distributed.properties), the Deployment ``sync-connect`` and the Service
# ``sync-connect-api`` (REST, port 8083). Its objects carry ``app.kubernetes.io/name:
# odradek-connect``, so an OdradekCluster of the same name (``name: odradek``) never selects them.

CONNECT_APP_NAME = "odradek-connect"
CONNECT_COMPONENT = "connect"
CONNECT_REST_PORT = 8083
CONNECT_CONFIG_DIR = "/etc/odradek/connect"
CONNECT_PROPERTIES = "connect-distributed.properties"
CONNECTOR_CONNECT_LABEL = f"{GROUP}/connect"  # on an OdradekConnector: its OdradekConnect


def connect_deployment(connect: str) -> str:
    return f"{connect}-connect"


def connect_config_map(connect: str) -> str:
    return f"{connect}-connect-config"


def connect_service(connect: str) -> str:
    return f"{connect}-connect-api"


def connect_trusted_secret(connect: str) -> str:
    """The CA bundle the workers trust, made from ``spec.tls.trustedCertificates``."""
    return f"{connect}-connect-trusted-certs"


def connect_network_policy(connect: str) -> str:
    return f"{connect}-connect-network-policy"


def connect_selector_labels(connect: str) -> dict[str, str]:
    """The workers' selector (immutable once the Deployment exists)."""
    return {
        NAME_LABEL: CONNECT_APP_NAME,
        INSTANCE_LABEL: connect,
        COMPONENT_LABEL: CONNECT_COMPONENT,
    }


def connect_labels(connect: str) -> dict[str, str]:
    return {**connect_selector_labels(connect), MANAGED_BY_LABEL: MANAGED_BY}


def connect_url(connect: str, namespace: str) -> str:
    """What ``status.url`` shows: the REST API through the Service."""
    return f"http://{connect_service(connect)}.{namespace}.svc:{CONNECT_REST_PORT}"


# --- ids ----------------------------------------------------------------------------------------


def broker_id(ordinal: int) -> int:
    return ordinal


def broker_ordinal(broker_id: int) -> int:
    return broker_id


def controller_id(ordinal: int) -> int:
    return CONTROLLER_ID_BASE + ordinal


def controller_ordinal(controller_id: int) -> int:
    return controller_id - CONTROLLER_ID_BASE


def zookeeper_myid(ordinal: int) -> int:
    return ordinal + 1


def ordinal_of(pod_name: str) -> int:
    """The ordinal at the end of a StatefulSet pod's name."""
    head, _, tail = pod_name.rpartition("-")
    if not head or not tail.isdigit():
        raise ValueError(f"{pod_name!r} is not a StatefulSet pod name")
    return int(tail)


# --- JBOD paths ---------------------------------------------------------------------------------


def log_dir_mount(volume_id: int) -> str:
    return f"{LOG_DIR_ROOT}/data-{volume_id}"


def log_dir(volume_id: int) -> str:
    return f"{log_dir_mount(volume_id)}/log"


# --- labels and selectors -----------------------------------------------------------------------


def selector_labels(cluster: str, component: Component) -> dict[str, str]:
    """The labels a component's selector matches (immutable once a StatefulSet exists)."""
    return {NAME_LABEL: APP_NAME, INSTANCE_LABEL: cluster, COMPONENT_LABEL: str(component)}


def labels(cluster: str, component: Component | None = None) -> dict[str, str]:
    """Labels on every object of the cluster; ``component`` is left out for shared objects."""
    out = {NAME_LABEL: APP_NAME, INSTANCE_LABEL: cluster, MANAGED_BY_LABEL: MANAGED_BY}
    if component is not None:
        out[COMPONENT_LABEL] = str(component)
    return out


def label_selector(selector: dict[str, str]) -> str:
    """``k=v,k=v`` as the API's ``labelSelector`` query parameter and the scale subresource take."""
    return ",".join(f"{k}={v}" for k, v in selector.items())


def selector(cluster: str, component: Component) -> str:
    """A component's pods as a label selector string (``status.brokers.selector``)."""
    return label_selector(selector_labels(cluster, component))


def cluster_selector(cluster: str) -> str:
    """Every object the operator made for ``cluster``."""
    return label_selector(labels(cluster))


# --- ZooKeeper over TLS (secured clusters; model/zookeeper_tls.py has the rules) ----------------
# ZooKeeper's pods mount C-zookeeper-certs (certs_secret) here: <pod>.pem and ca.crt.
ZOOKEEPER_CERTS_DIR = "/etc/zookeeper/certs"
# Brokers and controllers mount C-zookeeper-client-certs here: their one ZooKeeper identity.
ZOOKEEPER_CLIENT_CERTS_DIR = "/etc/odradek/zookeeper-client"
ZOOKEEPER_CLIENT_PEM = "zookeeper-client.pem"


def zookeeper_client_certs_secret(cluster: str) -> str:
    """The brokers' and controllers' ZooKeeper client identity: ``zookeeper-client.pem`` (key
    then certificate) and ``ca.crt``."""
    return f"{cluster}-zookeeper-client-certs"


def zookeeper_client_principal_name(cluster: str) -> str:
    """The CN of that identity: ZooKeeper knows its sessions as ``x509:CN=<it>,O=odradek.io``."""
    return f"{cluster}-zookeeper-client"
