"""``spec.brokers``: the number of brokers, their JBOD volumes, resources, rack and config.

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
- The brokers' and controllers' ZooKeeper client keys (``zookeeper.ssl.*``,
  ``zookeeper.clientCnxnSocket``, ``zookeeper.set.acl``) are the operator's: a secured cluster
  reaches ZooKeeper over mutual TLS with secure ACLs (model/zookeeper_tls.py), any other over
  plaintext.
- ``spec.brokers.rack.topologyKey`` names a node label (``topology.kubernetes.io/zone``) whose
  value becomes each broker's ``broker.rack``. Kubernetes has no downward API for node labels, so
  the operator copies the label of a broker pod's node onto the pod (annotation
  ``odradek.io/rack``, reconcile/racks.py), the pod sees it as a downward API file, and the broker
  waits for that file at start (``odradek.broker.rack.file``, model/brokers.py). Both keys are the
  operator's; ``odradek.broker.rack.file.timeout.ms`` stays the user's.

Bounds and ``deleteClaim``'s default are the CRD's (readers.crd_*). The CRD requires
``replicas`` and ``storage.volumes`` (with sizes); the defaults here (3 brokers, one 10Gi
volume) only serve resources no API server has checked.

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.config.broker import BROKER_KEYS, BrokerConfig
from odradek.config.controller import CONTROLLER_KEYS, ControllerConfig
from odradek.config.zookeeper_tls import ZK_CLIENT_KEYS
from odradek.errors import InvalidConfigError
from odradek_operator import names
from odradek_operator.model.spec.listeners import Ports
from odradek_operator.model.spec.network import _LABEL_KEY
from odradek_operator.model.spec.readers import (
    _ABSENT,
    SpecError,
    _as_property,
    _bool,
    _close,
    _int,
    _mapping,
    _only,
    _str,
    crd_default,
    crd_fact,
    crd_range,
)
from odradek_operator.model.spec.resources import DEFAULT_REQUESTS, Resources, Storage

__all__ = [
    "BROKER_CONFIG_DEFAULTS",
    "OPERATOR_OWNED_BROKER_KEYS",
    "BrokerSpec",
    "Volume",
]

_CLUSTER = names.CLUSTER_KIND
BROKER_REPLICAS = crd_range(_CLUSTER, "spec.brokers.replicas")
VOLUMES_MAX = crd_fact(_CLUSTER, "spec.brokers.storage.volumes", "maxItems")
VOLUME_IDS = crd_range(_CLUSTER, "spec.brokers.storage.volumes[].id")
DELETE_CLAIM_DEFAULT: bool = crd_default(_CLUSTER, "spec.brokers.storage.deleteClaim")
DEFAULT_BROKER_REPLICAS = 3  # the CRD requires spec.brokers.replicas
DEFAULT_VOLUME_SIZE = "10Gi"  # the CRD requires each volume's size
if BROKER_REPLICAS[1] > names.CONTROLLER_ID_BASE:
    raise RuntimeError("broker ids 0..replicas-1 must stay below the controllers' ids")

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
class BrokerSpec:
    replicas: int = DEFAULT_BROKER_REPLICAS
    volumes: tuple[Volume, ...] = (Volume(0, DEFAULT_VOLUME_SIZE, None),)
    delete_claim: bool = DELETE_CLAIM_DEFAULT
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


def _brokers(value: object, ports: Ports) -> BrokerSpec:
    where = "spec.brokers"
    section = _mapping(value, where)
    _only(section, where, ("replicas", "storage", "resources", "config", "rack"))
    replicas = _int(section, "replicas", where, DEFAULT_BROKER_REPLICAS, *BROKER_REPLICAS)
    storage = _mapping(section.get("storage"), f"{where}.storage")
    _only(storage, f"{where}.storage", ("volumes", "deleteClaim"))
    volumes = _volumes(storage.get("volumes", [{"id": 0}]), f"{where}.storage.volumes")
    config = _broker_config(section.get("config"), f"{where}.config")
    spec = BrokerSpec(
        replicas=replicas,
        volumes=volumes,
        delete_claim=_bool(storage, "deleteClaim", f"{where}.storage", DELETE_CLAIM_DEFAULT),
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
