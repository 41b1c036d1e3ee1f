"""The custom resources' ``spec`` as frozen, validated values: read a resource once, here.

``ClusterSpec.from_resource(body)`` reads an ``OdradekCluster`` (the API's JSON as a dict) and
``TopicSpec.from_resource(body)`` (also ``topic_state``) an ``OdradekTopic``. Defaults are the
issue's contract (docs/kubernetes.md); anything wrong raises ``SpecError(field, message)``, where
``field`` is the path a user would look at (``spec.brokers.config[min.insync.replicas]``): the
operator turns it into an ``Error`` status condition and does not retry until the spec changes.

Rule: never accept what is not honoured. So:

- ``spec.brokers.config`` holds Odradek's broker keys (``odradek.config.broker``), each value
  parsed as ``odradek broker --override key=value`` parses it, and the whole file is checked as a
  broker checks it at start (rules between keys), with the keys the operator owns put in. The
  keys the operator owns (ids, listeners, log dirs, ZooKeeper, the admin listener, the rack) are
  refused. Kafka's brokers read the controller's keys too (``auto.leader.rebalance.enable``...);
  Odradek's controllers are processes of their own, so those keys go to the controllers' files
  (``BrokerSpec.controller_config``), and the keys both read (ZooKeeper timeouts,
  ``unclean.leader.election.enable``) to both. The operator's defaults
  (``BROKER_CONFIG_DEFAULTS``) are Kafka's production choice: 3 replicas, at least 2 in sync;
  a replication factor larger than ``spec.brokers.replicas`` is refused, since such topics could
  never be created (set it in ``config`` for smaller clusters).
- ``spec.brokers.rack.topologyKey`` names a node label (``topology.kubernetes.io/zone``) whose
  value becomes each broker's ``broker.rack``. Kubernetes has no downward API for node labels, so
  the operator copies the label of a broker pod's node onto the pod (annotation
  ``odradek.io/rack``, reconcile/racks.py), the pod sees it as a downward API file, and the broker
  waits for that file at start (``odradek.broker.rack.file``, model/brokers.py). Both keys are the
  operator's; ``odradek.broker.rack.file.timeout.ms`` stays the user's.
- Resources: every container gets requests (``DEFAULT_REQUESTS``, per component) for each of
  cpu and memory the user sets neither a request nor a limit for: Kubernetes takes a limit
  without a request as the request, so a default never exceeds the user's limit.
- ``spec.networkPolicies`` (default true): the operator's NetworkPolicies
  (model/network_policies.py). ``spec.listeners[].networkPolicyPeers`` (Strimzi's name and
  shape: a list of networking.k8s.io/v1 NetworkPolicyPeer, ``podSelector``,
  ``namespaceSelector``, ``ipBlock``) narrows who reaches the client listener; absent: anyone.
  Each peer is checked as the API server checks it (label selectors, CIDRs), so a policy the
  operator writes is never refused.
- The brokers' and controllers' ZooKeeper client keys (``zookeeper.ssl.*``,
  ``zookeeper.clientCnxnSocket``, ``zookeeper.set.acl``) are the operator's: a secured cluster
  reaches ZooKeeper over mutual TLS with secure ACLs (model/zookeeper_tls.py), any other over
  plaintext.
- ``OdradekTopic`` config keys are ``odradek.config.topic``'s, validated the same way; a
  ``min.insync.replicas`` above the topic's ``replicationFactor`` is refused (no acks=all write
  could ever succeed).

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.config.authorizer import super_user_principals
from odradek.config.broker import BROKER_KEYS, BrokerConfig
from odradek.config.controller import CONTROLLER_KEYS, ControllerConfig
from odradek.config.topic import CONFIG_KEYS as TOPIC_CONFIG_KEYS
from odradek.config.topic import TopicConfig
from odradek.config.zookeeper_tls import ZK_CLIENT_KEYS
from odradek.errors import InvalidConfigError
from odradek_operator.model import crds, names

__all__ = [
    "BROKER_CONFIG_DEFAULTS",
    "Authorization",
    "CaSpec",
    "Listener",
    "OPERATOR_OWNED_BROKER_KEYS",
    "BrokerSpec",
    "ClusterSpec",
    "ControllersSpec",
    "Resources",
    "SpecError",
    "TopicSpec",
    "Volume",
    "ZooKeeperSpec",
    "topic_state",
]


class SpecError(ValueError):
    """A custom resource's spec the operator refuses; ``field`` names where, ``message`` why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# Limits: read from the CRDs' schemas (model/crds.py), the one place they are stated, so what
# the API server refuses and what the operator refuses cannot drift apart.
def _range(kind: str, path: str) -> tuple[int, int]:
    node = crds.spec_field(kind, path)
    return node["minimum"], node["maximum"]


_CLUSTER, _TOPIC = names.CLUSTER_KIND, names.TOPIC_KIND
CLUSTER_NAME_MAX = crds.spec_field(_CLUSTER, "metadata.name")["maxLength"]
ZOOKEEPER_REPLICAS = tuple(crds.spec_field(_CLUSTER, "spec.zookeeper.replicas")["enum"])
CONTROLLER_REPLICAS = _range(_CLUSTER, "spec.controllers.replicas")
BROKER_REPLICAS = _range(_CLUSTER, "spec.brokers.replicas")
VOLUMES_MAX = crds.spec_field(_CLUSTER, "spec.brokers.storage.volumes")["maxItems"]
VOLUME_IDS = _range(_CLUSTER, "spec.brokers.storage.volumes[].id")
PORTS = _range(_CLUSTER, "spec.controlPlane.port")
LISTENERS_MAX = crds.spec_field(_CLUSTER, "spec.listeners")["maxItems"]
LISTENER_NAME = re.compile(crds.spec_field(_CLUSTER, "spec.listeners[].name")["pattern"])
AUTHENTICATION_TYPES = tuple(
    crds.spec_field(_CLUSTER, "spec.listeners[].authentication.type")["enum"]
)
SUPER_USERS_MAX = crds.spec_field(_CLUSTER, "spec.authorization.superUsers")["maxItems"]
CA_DAYS = _range(_CLUSTER, "spec.clusterCa.validityDays")
TOPIC_NAME_MAX = crds.spec_field(_TOPIC, "spec.topicName")["maxLength"]  # Kafka's 249
TOPIC_PARTITIONS = _range(_TOPIC, "spec.partitions")
TOPIC_REPLICATION_FACTORS = _range(_TOPIC, "spec.replicationFactor")
if BROKER_REPLICAS[1] > names.CONTROLLER_ID_BASE:
    raise RuntimeError("broker ids 0..replicas-1 must stay below the controllers' ids")

DEFAULT_ZOOKEEPER_IMAGE = "zookeeper:3.8"
DEFAULT_IMAGE_PULL_POLICY = "IfNotPresent"
DEFAULT_ZOOKEEPER_SIZE = "1Gi"
DEFAULT_VOLUME_SIZE = "10Gi"
DEFAULT_CLIENT_PORT = 9092
DEFAULT_CONTROL_PLANE_PORT = 9091
DEFAULT_METRICS_PORT = 9645
DEFAULT_LISTENER_NAME = "plaintext"  # Kafka name PLAINTEXT: the listener before spec.listeners
# Listener names the operator gives its own listeners (their Kafka names upper case).
RESERVED_LISTENER_NAMES = ("internal", "controller", "client", "metrics")  # and container ports
DEFAULT_CA_VALIDITY_DAYS = 365  # Strimzi's
DEFAULT_CA_RENEWAL_DAYS = 30
# Requests of each container when the spec sets neither a request nor a limit for a resource
# (docs/kubernetes.md, "Hardening"): what a small production pod needs to be scheduled fairly.
DEFAULT_REQUESTS: Mapping[str, Mapping[str, str]] = {
    "zookeeper": {"cpu": "100m", "memory": "512Mi"},
    "controller": {"cpu": "100m", "memory": "256Mi"},
    "broker": {"cpu": "250m", "memory": "1Gi"},
    "connect": {"cpu": "250m", "memory": "512Mi"},
}
NETWORK_POLICY_PEERS_MAX = 64

# ZooKeeper over TLS follows the listeners (model/zookeeper_tls.py): these are the operator's.
_ZK_CLIENT_KEY_NAMES = frozenset(key.name for key in ZK_CLIENT_KEYS)
OPERATOR_OWNED_BROKER_KEYS = (
    frozenset(
        {
            "broker.id",
            "listeners",
            "advertised.listeners",
            "log.dirs",
            "log.dir",
            "zookeeper.connect",
            "control.plane.listener.name",
            "inter.broker.listener.name",
            "listener.security.protocol.map",
            "odradek.admin.listener",
            "broker.rack",
            "odradek.broker.rack.file",
        }
    )
    | _ZK_CLIENT_KEY_NAMES
)
# With spec.listeners and spec.authorization the operator writes every TLS, SASL and authorizer
# key (model/security.py); a user's key among them would fight the operator's.
OPERATOR_OWNED_BROKER_PREFIXES = ("ssl.", "sasl.", "listener.name.")
OPERATOR_OWNED_BROKER_KEYS = OPERATOR_OWNED_BROKER_KEYS | {"authorizer.class.name", "super.users"}
# Keys Kafka's brokers read as the controller; Odradek's controllers read them from their file.
_CONTROLLER_ONLY_KEYS = {
    k: row for k, row in CONTROLLER_KEYS.items() if k not in BROKER_KEYS and k != "controller.id"
}
BROKER_CONFIG_DEFAULTS: Mapping[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}
# Replication factors of topics brokers create; each needs that many brokers.
_REPLICATION_FACTOR_KEYS = (
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
)
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUANTITY = re.compile(
    r"\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
# A label key: an optional DNS-subdomain prefix and "/", then a name (Kubernetes' qualified name).
_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_ABSENT = object()


# --- small readers: each names the field it reads ----------------------------------------------


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(where, f"expected an object, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    kinds = {
        type(None): "null",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }
    return kinds.get(type(value), type(value).__name__)


def _only(section: Mapping[str, Any], where: str, known: tuple[str, ...]) -> None:
    for key in section:
        if key not in known:
            raise SpecError(f"{where}.{key}", f"unknown field (known: {', '.join(known)})")


def _int(
    section: Mapping[str, Any], key: str, where: str, default: object, low: int, high: int
) -> int:
    value = section.get(key, default)
    path = f"{where}.{key}"
    if value is _ABSENT:
        raise SpecError(path, "required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"expected an integer, got {_kind(value)}")
    if not low <= value <= high:
        raise SpecError(path, f"{value} is out of range: must be from {low} to {high}")
    return value


def _str(section: Mapping[str, Any], key: str, where: str, default: str | None) -> str | None:
    value = section.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value.strip()


def _bool(section: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"{where}.{key}", f"expected true or false, got {value!r}")
    return value


def _quantity(section: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = section.get(key, default)
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _QUANTITY.fullmatch(text):
        raise SpecError(f"{where}.{key}", f"{value!r} is not a quantity such as 10Gi")
    return text


def _port(section: Mapping[str, Any], where: str, default: int) -> int:
    return _int(section, "port", where, default, *PORTS)


# --- values -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resources:
    """core/v1 ResourceRequirements (limits and requests), quantities checked."""

    limits: tuple[tuple[str, str], ...] = ()
    requests: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(
        cls, value: object, where: str, default_requests: Mapping[str, str] | None = None
    ) -> Resources:
        """``default_requests`` fill in the resources named neither in requests nor limits."""
        section = _mapping(value, where)
        _only(section, where, ("limits", "requests"))
        parts = {}
        for part in ("limits", "requests"):
            entries = _mapping(section.get(part), f"{where}.{part}")
            for name in entries:
                if not isinstance(name, str) or not name:
                    raise SpecError(f"{where}.{part}", f"{name!r} is not a resource name")
            parts[part] = tuple(
                sorted((name, _quantity(entries, name, f"{where}.{part}", "")) for name in entries)
            )
        named = {name for part in parts.values() for name, _ in part}
        extra = [(k, v) for k, v in (default_requests or {}).items() if k not in named]
        parts["requests"] = tuple(sorted((*parts["requests"], *extra)))
        return cls(**parts)

    @classmethod
    def defaults(cls, component: str) -> Resources:
        return cls(requests=tuple(sorted(DEFAULT_REQUESTS[component].items())))

    def to_dict(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.limits:
            out["limits"] = dict(self.limits)
        if self.requests:
            out["requests"] = dict(self.requests)
        return out


@dataclass(frozen=True, slots=True)
class Storage:
    size: str
    storage_class: str | None

    @classmethod
    def parse(cls, value: object, where: str, default_size: str) -> Storage:
        section = _mapping(value, where)
        _only(section, where, ("size", "storageClass"))
        storage_class = section.get("storageClass")
        if storage_class is not None and not isinstance(storage_class, str):
            raise SpecError(f"{where}.storageClass", "expected a string or null")
        return cls(_quantity(section, "size", where, default_size), storage_class)


@dataclass(frozen=True, slots=True)
class Volume:
    """One JBOD volume: a volumeClaimTemplate ``data-<id>``, one directory of ``log.dirs``."""

    id: int
    size: str
    storage_class: str | None

    @property
    def claim_template(self) -> str:
        return names.volume_claim_template(self.id)

    @property
    def mount_path(self) -> str:
        return names.log_dir_mount(self.id)

    @property
    def log_dir(self) -> str:
        return names.log_dir(self.id)


@dataclass(frozen=True, slots=True)
class ZooKeeperSpec:
    replicas: int = 3
    image: str = DEFAULT_ZOOKEEPER_IMAGE
    storage: Storage = Storage(DEFAULT_ZOOKEEPER_SIZE, None)
    resources: Resources = Resources.defaults("zookeeper")

    @classmethod
    def parse(cls, value: object) -> ZooKeeperSpec:
        where = "spec.zookeeper"
        section = _mapping(value, where)
        _only(section, where, ("replicas", "image", "storage", "resources"))
        replicas = _int(section, "replicas", where, 3, 1, max(ZOOKEEPER_REPLICAS))
        if replicas not in ZOOKEEPER_REPLICAS:
            raise SpecError(
                f"{where}.replicas",
                f"{replicas}: an ensemble has 1, 3 or 5 servers (an odd number keeps a majority)",
            )
        return cls(
            replicas=replicas,
            image=_str(section, "image", where, None) or DEFAULT_ZOOKEEPER_IMAGE,
            storage=Storage.parse(
                section.get("storage"), f"{where}.storage", DEFAULT_ZOOKEEPER_SIZE
            ),
            resources=Resources.parse(
                section.get("resources"), f"{where}.resources", DEFAULT_REQUESTS["zookeeper"]
            ),
        )


@dataclass(frozen=True, slots=True)
class ControllersSpec:
    replicas: int = 2
    resources: Resources = Resources.defaults("controller")

    @classmethod
    def parse(cls, value: object) -> ControllersSpec:
        where = "spec.controllers"
        section = _mapping(value, where)
        _only(section, where, ("replicas", "resources"))
        return cls(
            replicas=_int(section, "replicas", where, 2, *CONTROLLER_REPLICAS),
            resources=Resources.parse(
                section.get("resources"), f"{where}.resources", DEFAULT_REQUESTS["controller"]
            ),
        )


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    replicas: int = 3
    volumes: tuple[Volume, ...] = (Volume(0, DEFAULT_VOLUME_SIZE, None),)
    delete_claim: bool = False
    resources: Resources = Resources.defaults("broker")
    # The user's keys only, each as Kafka prints its value (what goes in broker.properties).
    config: Mapping[str, str] = field(default_factory=dict)
    # The user's keys that only controllers read (auto.leader.rebalance.enable...): in Kafka the
    # controller is a broker and reads them from server.properties; here they go to controllers.
    controller_config: Mapping[str, str] = field(default_factory=dict)
    # spec.brokers.rack.topologyKey: the node label copied to broker.rack; None: no rack.
    rack_topology_key: str | None = None

    @property
    def log_dirs(self) -> str:
        return ",".join(v.log_dir for v in self.volumes)

    def properties(self) -> dict[str, str]:
        """The shared part of broker.properties: the operator's defaults, the user's keys over."""
        return {**BROKER_CONFIG_DEFAULTS, **self.config}

    def controller_properties(self) -> dict[str, str]:
        """The user's keys a controller reads too (ZooKeeper timeouts, unclean election...)."""
        shared = {k: v for k, v in self.properties().items() if k in CONTROLLER_KEYS}
        return {**shared, **self.controller_config}


@dataclass(frozen=True, slots=True)
class Listener:
    """One client listener of ``spec.listeners``: its Kafka name is ``name`` upper case."""

    name: str
    port: int
    tls: bool = False
    authentication: str = "none"  # none | scram-sha-512 | tls
    # spec.listeners[].networkPolicyPeers as given (checked); None: from anywhere.
    network_policy_peers: tuple[Mapping[str, Any], ...] | None = None

    @property
    def kafka_name(self) -> str:
        return self.name.upper()

    @property
    def security_protocol(self) -> str:
        sasl = self.authentication == "scram-sha-512"
        if self.tls:
            return "SASL_SSL" if sasl else "SSL"
        return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"

    @property
    def secured(self) -> bool:
        return self.tls or self.authentication != "none"


DEFAULT_LISTENERS = (Listener(DEFAULT_LISTENER_NAME, DEFAULT_CLIENT_PORT),)


@dataclass(frozen=True, slots=True)
class Authorization:
    """``spec.authorization``: Kafka's ACL authorizer and the user's extra super users (the
    brokers', controllers' and operator's principals are always added)."""

    type: str = "simple"
    super_users: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CaSpec:
    """``spec.clusterCa`` / ``spec.clientsCa`` (Strimzi's fields)."""

    generate: bool = True
    validity_days: int = DEFAULT_CA_VALIDITY_DAYS
    renewal_days: int = DEFAULT_CA_RENEWAL_DAYS

    @classmethod
    def parse(cls, value: object, where: str) -> CaSpec:
        section = _mapping(value, where)
        _only(section, where, ("generateCertificateAuthority", "validityDays", "renewalDays"))
        validity = _int(section, "validityDays", where, DEFAULT_CA_VALIDITY_DAYS, *CA_DAYS)
        renewal = _int(section, "renewalDays", where, DEFAULT_CA_RENEWAL_DAYS, *CA_DAYS)
        if renewal >= validity:
            raise SpecError(
                f"{where}.renewalDays",
                f"{renewal} must be less than validityDays ({validity}): certificates would be "
                "renewed as soon as they are made",
            )
        generate = _bool(section, "generateCertificateAuthority", where, True)
        return cls(generate, validity, renewal)


@dataclass(frozen=True, slots=True)
class Ports:
    client: int = DEFAULT_CLIENT_PORT
    control_plane: int = DEFAULT_CONTROL_PLANE_PORT
    metrics: int = DEFAULT_METRICS_PORT


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """An ``OdradekCluster``: its identity (for owner references) and its validated spec."""

    name: str
    namespace: str
    uid: str
    image: str | None  # None: the operator's default image (env ODRADEK_IMAGE)
    image_pull_policy: str
    zookeeper: ZooKeeperSpec
    controllers: ControllersSpec
    brokers: BrokerSpec
    ports: Ports
    restart: str  # the cluster's odradek.io/restart annotation: changing it restarts every pod
    listeners: tuple[Listener, ...] = DEFAULT_LISTENERS
    authorization: Authorization | None = None  # set (type simple) whenever secured
    cluster_ca: CaSpec = CaSpec()
    clients_ca: CaSpec = CaSpec()
    network_policies: bool = True  # spec.networkPolicies

    @property
    def secured(self) -> bool:
        """A listener has tls or authentication: every internal listener is then mutual TLS
        with the cluster CA, the ACL authorizer is on, and the operator keeps certificates."""
        return any(listener.secured for listener in self.listeners)

    @property
    def tls_authentication(self) -> bool:
        """Some listener authenticates clients by certificate (the clients CA is mounted)."""
        return any(listener.authentication == "tls" for listener in self.listeners)

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> ClusterSpec:
        metadata = _mapping(body.get("metadata"), "metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not _DNS_1035.fullmatch(name):
            raise SpecError(
                "metadata.name",
                f"{name!r}: a cluster's name must be a DNS label (lowercase letters, digits, "
                "'-', starting with a letter)",
            )
        if len(name) > CLUSTER_NAME_MAX:
            raise SpecError(
                "metadata.name",
                f"{name!r} is {len(name)} characters; at most {CLUSTER_NAME_MAX}, so the "
                "names derived from it stay valid DNS labels",
            )
        annotations = _mapping(metadata.get("annotations"), "metadata.annotations")
        spec = _mapping(body.get("spec"), "spec")
        _only(
            spec,
            "spec",
            (
                "image",
                "imagePullPolicy",
                "zookeeper",
                "controllers",
                "brokers",
                "listeners",
                "controlPlane",
                "authorization",
                "clusterCa",
                "clientsCa",
                "metrics",
                "networkPolicies",
            ),
        )
        pull_policy = spec.get("imagePullPolicy", DEFAULT_IMAGE_PULL_POLICY)
        if pull_policy not in _PULL_POLICIES:
            raise SpecError(
                "spec.imagePullPolicy", f"{pull_policy!r}: one of {', '.join(_PULL_POLICIES)}"
            )
        listeners = _listeners(spec.get("listeners"))
        ports = _ports(spec, listeners)
        secured = any(listener.secured for listener in listeners)
        return cls(
            name=name,
            namespace=str(metadata.get("namespace") or "default"),
            uid=str(metadata.get("uid") or ""),
            image=_str(spec, "image", "spec", None),
            image_pull_policy=pull_policy,
            zookeeper=ZooKeeperSpec.parse(spec.get("zookeeper")),
            controllers=ControllersSpec.parse(spec.get("controllers")),
            brokers=_brokers(spec.get("brokers"), ports),
            ports=ports,
            restart=str(annotations.get(names.RESTART_ANNOTATION, "")),
            listeners=listeners,
            authorization=_authorization(spec.get("authorization"), secured),
            cluster_ca=CaSpec.parse(spec.get("clusterCa"), "spec.clusterCa"),
            clients_ca=CaSpec.parse(spec.get("clientsCa"), "spec.clientsCa"),
            network_policies=_bool(spec, "networkPolicies", "spec", True),
        )


def _listeners(value: object) -> tuple[Listener, ...]:
    where = "spec.listeners"
    if value is None:
        return DEFAULT_LISTENERS
    if isinstance(value, Mapping):
        # Before issue 24 (and what the API server's defaults wrote into every cluster then):
        # {client: {port}, controlPlane: {port}}, one PLAINTEXT listener. Still read, the same.
        _only(value, where, ("client", "controlPlane"))
        client = _mapping(value.get("client"), f"{where}.client")
        _only(client, f"{where}.client", ("port", "networkPolicyPeers"))
        port = _port(client, f"{where}.client", DEFAULT_CLIENT_PORT)
        peers = network_policy_peers(
            client.get("networkPolicyPeers"), f"{where}.client.networkPolicyPeers"
        )
        return (Listener(DEFAULT_LISTENER_NAME, port, network_policy_peers=peers),)
    if not isinstance(value, list) or not value:
        raise SpecError(where, "expected a list of at least one listener")
    if len(value) > LISTENERS_MAX:
        raise SpecError(where, f"{len(value)} listeners; at most {LISTENERS_MAX}")
    out: dict[str, Listener] = {}
    for i, item in enumerate(value):
        path = f"{where}[{i}]"
        entry = _mapping(item, path)
        _only(entry, path, ("name", "port", "tls", "authentication", "networkPolicyPeers"))
        name = _str(entry, "name", path, None)
        if name is None or not LISTENER_NAME.fullmatch(name):
            raise SpecError(
                f"{path}.name",
                f"{name!r}: lowercase letters and digits, starting with a letter, at most 11",
            )
        if name in RESERVED_LISTENER_NAMES:
            raise SpecError(f"{path}.name", f"{name!r} is the operator's own listener's name")
        if name in out:
            raise SpecError(f"{path}.name", f"listener {name!r} is listed twice")
        auth = _mapping(entry.get("authentication"), f"{path}.authentication")
        _only(auth, f"{path}.authentication", ("type",))
        auth_type = _str(auth, "type", f"{path}.authentication", "none")
        if auth_type not in AUTHENTICATION_TYPES:
            raise SpecError(
                f"{path}.authentication.type",
                f"{auth_type!r}: one of {', '.join(AUTHENTICATION_TYPES)}",
            )
        tls = _bool(entry, "tls", path, False)
        if auth_type == "tls" and not tls:
            raise SpecError(
                f"{path}.authentication.type",
                "tls authentication (client certificates) needs tls: true on the listener",
            )
        peers = network_policy_peers(entry.get("networkPolicyPeers"), f"{path}.networkPolicyPeers")
        out[name] = Listener(name, _port(entry, path, _ABSENT), tls, auth_type or "none", peers)
    return tuple(out.values())


def _authorization(value: object, secured: bool) -> Authorization | None:
    where = "spec.authorization"
    if value is None:
        return Authorization() if secured else None
    section = _mapping(value, where)
    _only(section, where, ("type", "superUsers"))
    if section.get("type") != "simple":
        raise SpecError(f"{where}.type", f"{section.get('type')!r}: only simple (Kafka's ACLs)")
    if not secured:
        raise SpecError(
            where,
            "needs a listener with tls or authentication: without them every client and "
            "every broker is User:ANONYMOUS and the ACLs could tell no one apart",
        )
    users = section.get("superUsers", [])
    if not isinstance(users, list) or len(users) > SUPER_USERS_MAX:
        raise SpecError(f"{where}.superUsers", f"expected a list of at most {SUPER_USERS_MAX}")
    checked = []
    for i, user in enumerate(users):
        try:
            if not isinstance(user, str):
                raise ValueError(f"expected a string, got {_kind(user)}")
            checked.extend(super_user_principals(user))
        except ValueError as e:
            raise SpecError(f"{where}.superUsers[{i}]", f"{user!r}: {e}") from e
    return Authorization("simple", tuple(dict.fromkeys(checked)))


def _listener_port_path(spec: Mapping[str, Any], i: int) -> str:
    if isinstance(spec.get("listeners"), Mapping):
        return "spec.listeners.client.port"
    return f"spec.listeners[{i}].port"


def _ports(spec: Mapping[str, Any], listeners: tuple[Listener, ...]) -> Ports:
    where = "spec.controlPlane"
    legacy = spec.get("listeners")
    if "controlPlane" not in spec and isinstance(legacy, Mapping) and "controlPlane" in legacy:
        where = "spec.listeners.controlPlane"  # the form before issue 24 (_listeners)
        control_plane = _mapping(legacy.get("controlPlane"), where)
    else:
        control_plane = _mapping(spec.get("controlPlane"), where)
    metrics = _mapping(spec.get("metrics"), "spec.metrics")
    _only(control_plane, where, ("port",))
    _only(metrics, "spec.metrics", ("port",))
    ports = Ports(
        client=listeners[0].port,
        control_plane=_port(control_plane, where, DEFAULT_CONTROL_PLANE_PORT),
        metrics=_port(metrics, "spec.metrics", DEFAULT_METRICS_PORT),
    )
    taken = {
        names.CONTROLLER_PORT: "the controllers' own listener",
        names.INTERNAL_PORT: "the brokers' INTERNAL listener",
        names.ZOOKEEPER_CLIENT_PORT: "ZooKeeper",
    }
    for path, port in (
        *((_listener_port_path(spec, i), lst.port) for i, lst in enumerate(listeners)),
        (f"{where}.port", ports.control_plane),
        ("spec.metrics.port", ports.metrics),
    ):
        if port in taken:
            raise SpecError(path, f"{port} is already {taken[port]}'s port")
        taken[port] = path
    return ports


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def network_policy_peers(value: object, where: str) -> tuple[Mapping[str, Any], ...] | None:
    """A list of NetworkPolicyPeer as the API server accepts them; None when absent. An empty
    list is refused: in a NetworkPolicy it would mean "from anywhere", surely not what was
    meant by narrowing."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise SpecError(where, "expected a non-empty list of NetworkPolicyPeer")
    if len(value) > NETWORK_POLICY_PEERS_MAX:
        raise SpecError(where, f"{len(value)} peers; at most {NETWORK_POLICY_PEERS_MAX}")
    peers = []
    for i, item in enumerate(value):
        path = f"{where}[{i}]"
        peer = _mapping(item, path)
        _only(peer, path, ("podSelector", "namespaceSelector", "ipBlock"))
        if not peer:
            raise SpecError(path, "a peer needs podSelector, namespaceSelector or ipBlock")
        if "ipBlock" in peer and len(peer) > 1:
            raise SpecError(path, "ipBlock cannot be combined with a selector")
        for key in ("podSelector", "namespaceSelector"):
            if key in peer:
                _label_selector(peer[key], f"{path}.{key}")
        if "ipBlock" in peer:
            _ip_block(peer["ipBlock"], f"{path}.ipBlock")
        peers.append(dict(peer))
    return tuple(peers)


def _label_selector(value: object, where: str) -> None:
    selector = _mapping(value, where)
    _only(selector, where, ("matchLabels", "matchExpressions"))
    for key, label in _mapping(selector.get("matchLabels"), f"{where}.matchLabels").items():
        _label_pair(key, label, f"{where}.matchLabels[{key}]")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SpecError(f"{where}.matchExpressions", "expected a list")
    for i, item in enumerate(expressions):
        path = f"{where}.matchExpressions[{i}]"
        expression = _mapping(item, path)
        _only(expression, path, ("key", "operator", "values"))
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if operator not in _SELECTOR_OPERATORS:
            raise SpecError(f"{path}.operator", f"{operator!r}: one of {_SELECTOR_OPERATORS}")
        if not isinstance(values, list):
            raise SpecError(f"{path}.values", "expected a list")
        if (operator in ("In", "NotIn")) != bool(values):
            raise SpecError(f"{path}.values", f"{operator} takes values only with In and NotIn")
        _label_pair(key, "", path)
        for value_ in values:
            _label_pair(key, value_, f"{path}.values")


def _label_pair(key: object, value: object, where: str) -> None:
    if not isinstance(key, str) or len(key) > 316 or not _LABEL_KEY.fullmatch(key):
        raise SpecError(where, f"{key!r} is not a label key")
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise SpecError(where, f"{value!r} is not a label value")


def _ip_block(value: object, where: str) -> None:
    block = _mapping(value, where)
    _only(block, where, ("cidr", "except"))
    try:
        cidr = ipaddress.ip_network(str(block.get("cidr")), strict=False)
        excepted = [ipaddress.ip_network(str(e), strict=False) for e in block.get("except") or []]
    except ValueError as e:
        raise SpecError(where, f"not a CIDR: {e}") from e
    for e in excepted:
        if e.version != cidr.version or not e.subnet_of(cidr):  # type: ignore[arg-type]
            raise SpecError(f"{where}.except", f"{e} is not inside {cidr}")


def _brokers(value: object, ports: Ports) -> BrokerSpec:
    where = "spec.brokers"
    section = _mapping(value, where)
    _only(section, where, ("replicas", "storage", "resources", "config", "rack"))
    replicas = _int(section, "replicas", where, 3, *BROKER_REPLICAS)
    storage = _mapping(section.get("storage"), f"{where}.storage")
    _only(storage, f"{where}.storage", ("volumes", "deleteClaim"))
    volumes = _volumes(storage.get("volumes", [{"id": 0}]), f"{where}.storage.volumes")
    config = _broker_config(section.get("config"), f"{where}.config")
    spec = BrokerSpec(
        replicas=replicas,
        volumes=volumes,
        delete_claim=_bool(storage, "deleteClaim", f"{where}.storage", False),
        resources=Resources.parse(
            section.get("resources"), f"{where}.resources", DEFAULT_REQUESTS["broker"]
        ),
        config={k: v for k, v in config.items() if k in BROKER_KEYS},
        controller_config={k: v for k, v in config.items() if k not in BROKER_KEYS},
        rack_topology_key=_rack(section.get("rack"), f"{where}.rack"),
    )
    _check_broker_config(spec, ports, f"{where}.config")
    return spec


def _rack(value: object, where: str) -> str | None:
    if value is None:
        return None
    rack = _mapping(value, where)
    _only(rack, where, ("topologyKey",))
    key = _str(rack, "topologyKey", where, None)
    if key is None:
        raise SpecError(f"{where}.topologyKey", "required: the node label read as broker.rack")
    if len(key) > 316 or not _LABEL_KEY.fullmatch(key):
        raise SpecError(
            f"{where}.topologyKey",
            f"{key!r} is not a label key (e.g. topology.kubernetes.io/zone)",
        )
    return key


def _volumes(value: object, where: str) -> tuple[Volume, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(where, "expected a list of at least one volume")
    if len(value) > VOLUMES_MAX:
        raise SpecError(where, f"{len(value)} volumes; at most {VOLUMES_MAX}")
    volumes: dict[int, Volume] = {}
    for i, item in enumerate(value):
        path = f"{where}[{i}]"
        entry = _mapping(item, path)
        _only(entry, path, ("id", "size", "storageClass"))
        volume_id = _int(entry, "id", path, _ABSENT, *VOLUME_IDS)
        if volume_id in volumes:
            raise SpecError(f"{path}.id", f"volume id {volume_id} is listed twice")
        storage = Storage.parse(
            {k: v for k, v in entry.items() if k != "id"}, path, DEFAULT_VOLUME_SIZE
        )
        volumes[volume_id] = Volume(volume_id, storage.size, storage.storage_class)
    # Ordered by id: listing the same volumes in another order changes nothing.
    return tuple(volumes[i] for i in sorted(volumes))


def _as_property(value: object, where: str) -> str:
    """A YAML value as the text a properties file (or ``--override``) would carry."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value.bit_length() > 64:
        # No config key holds it; and str() of an integer of more than 4300 digits raises.
        raise SpecError(where, f"an integer of {value.bit_length()} bits is out of range")
    if isinstance(value, int | float | str):
        return str(value)
    raise SpecError(where, f"expected a string, number or boolean, got {_kind(value)}")


def _broker_config(value: object, where: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for key, raw in _mapping(value, where).items():
        path = f"{where}[{key}]"
        if key in _ZK_CLIENT_KEY_NAMES:
            raise SpecError(
                path,
                "set by the operator: brokers and controllers reach ZooKeeper over mutual TLS "
                "with secure ACLs exactly when spec.listeners are secured",
            )
        if key in OPERATOR_OWNED_BROKER_KEYS or key.startswith(OPERATOR_OWNED_BROKER_PREFIXES):
            raise SpecError(
                path,
                "set by the operator (from the pod, spec.listeners, spec.authorization and the "
                "volumes)",
            )
        row = BROKER_KEYS.get(key) or _CONTROLLER_ONLY_KEYS.get(key)
        if row is None:
            known = {**BROKER_KEYS, **_CONTROLLER_ONLY_KEYS}
            raise SpecError(path, f"unknown broker config key{_close(key, known)}")
        try:
            config[key] = row.to_string(row.parse(_as_property(raw, path)))
        except InvalidConfigError as e:
            raise SpecError(path, str(e)) from e
    return config


def _close(key: str, known: Mapping[str, object]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


def _check_broker_config(spec: BrokerSpec, ports: Ports, where: str) -> None:
    """The whole broker.properties as a broker would check it at start, with placeholders for
    the per-pod keys; then the replication factors against the number of brokers."""
    props = {
        **spec.properties(),
        "broker.id": "0",
        "zookeeper.connect": f"zookeeper:{names.ZOOKEEPER_CLIENT_PORT}{names.ZOOKEEPER_CHROOT}",
        "listeners": f"{names.CLIENT_LISTENER}://127.0.0.1:{ports.client},"
        f"{names.CONTROL_PLANE_LISTENER}://127.0.0.1:{ports.control_plane},"
        f"{names.INTERNAL_LISTENER}://127.0.0.1:{names.INTERNAL_PORT}",
        "control.plane.listener.name": names.CONTROL_PLANE_LISTENER,
        "inter.broker.listener.name": names.INTERNAL_LISTENER,
        "listener.security.protocol.map": names.LISTENER_SECURITY_PROTOCOL_MAP,
        "odradek.admin.listener": f"127.0.0.1:{ports.metrics}",
        "log.dirs": spec.log_dirs,
    }
    try:
        config = BrokerConfig.from_properties(props)
        ControllerConfig.from_properties(
            {
                **spec.controller_properties(),
                "controller.id": str(names.CONTROLLER_ID_BASE),
                "zookeeper.connect": props["zookeeper.connect"],
                "listeners": f"{names.CONTROLLER_LISTENER}://127.0.0.1:{names.CONTROLLER_PORT}",
            }
        )
    except InvalidConfigError as e:
        raise SpecError(where, str(e)) from e
    for key in _REPLICATION_FACTOR_KEYS:
        factor = getattr(config, BROKER_KEYS[key].attr)
        if factor > spec.replicas:
            origin = "" if key in spec.config else " (the operator's default)"
            raise SpecError(
                f"{where}[{key}]",
                f"{key} is {factor}{origin} but spec.brokers.replicas is {spec.replicas}: "
                f"such topics could not be created; set {key} to at most {spec.replicas}",
            )


# --- OdradekTopic -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """An ``OdradekTopic``: the Kafka topic it declares, in the cluster it names."""

    name: str  # the resource's metadata.name
    namespace: str
    cluster: str
    topic_name: str  # the Kafka topic: spec.topicName, default metadata.name
    partitions: int
    replication_factor: int
    config: Mapping[str, str]  # as Kafka prints each value, only the keys the resource sets

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> TopicSpec:
        metadata = _mapping(body.get("metadata"), "metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise SpecError("metadata.name", "required")
        spec = _mapping(body.get("spec"), "spec")
        _only(spec, "spec", ("cluster", "topicName", "partitions", "replicationFactor", "config"))
        cluster = _str(spec, "cluster", "spec", None)
        if cluster is None:
            raise SpecError("spec.cluster", "required: the OdradekCluster in this namespace")
        topic_name = _str(spec, "topicName", "spec", name) or name
        if (
            len(topic_name) > TOPIC_NAME_MAX
            or topic_name in (".", "..")
            or not _TOPIC_NAME.fullmatch(topic_name)
        ):
            where = "spec.topicName" if "topicName" in spec else "metadata.name"
            raise SpecError(
                where,
                f"{topic_name!r} is not a legal topic name: up to {TOPIC_NAME_MAX} ASCII "
                "letters, digits, '.', '_' and '-', not '.' or '..'",
            )
        replication_factor = _int(
            spec, "replicationFactor", "spec", _ABSENT, *TOPIC_REPLICATION_FACTORS
        )
        config = _topic_config(spec.get("config"), "spec.config")
        _check_min_insync_replicas(config, replication_factor)
        return cls(
            name=name,
            namespace=str(metadata.get("namespace") or "default"),
            cluster=cluster,
            topic_name=topic_name,
            partitions=_int(spec, "partitions", "spec", _ABSENT, *TOPIC_PARTITIONS),
            replication_factor=replication_factor,
            config=config,
        )

    def topic_config(self) -> TopicConfig:
        """The effective config with Kafka's defaults under the keys the resource sets."""
        return TopicConfig.from_properties(self.config)


def _topic_config(value: object, where: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for key, raw in _mapping(value, where).items():
        path = f"{where}[{key}]"
        row = TOPIC_CONFIG_KEYS.get(key)
        if row is None:
            raise SpecError(path, f"unknown topic config key{_close(key, TOPIC_CONFIG_KEYS)}")
        try:
            config[key] = row.to_string(row.parse(_as_property(raw, path)))
        except InvalidConfigError as e:
            raise SpecError(path, str(e)) from e
    try:
        TopicConfig.from_properties(config)  # rules between keys (compaction lags)
    except InvalidConfigError as e:
        raise SpecError(where, str(e)) from e
    return config


def _check_min_insync_replicas(config: Mapping[str, str], replication_factor: int) -> None:
    """A topic whose min.insync.replicas exceeds its replicas could never take an acks=all write
    (every producer would retry until its delivery timeout): refused, naming both numbers."""
    key = "min.insync.replicas"
    if key in config and int(config[key]) > replication_factor:
        raise SpecError(
            f"spec.config[{key}]",
            f"{key} is {config[key]} but spec.replicationFactor is {replication_factor}: no "
            f"acks=all write could succeed; set {key} to at most {replication_factor}",
        )


def topic_state(topic_body: Mapping[str, Any]) -> TopicSpec:
    """The desired state of an ``OdradekTopic``; ``SpecError`` if it cannot be honoured."""
    return TopicSpec.from_resource(topic_body)
