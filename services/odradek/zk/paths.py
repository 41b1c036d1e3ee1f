"""Every znode Odradek uses: its path and the bytes stored there, in Kafka's own JSON.

The layout is Kafka's ZooKeeper mode, so ``zkCli`` shows what an operator of Kafka expects, and a
znode written by either reads back in the other. Each data class is frozen and owns its format:
``encode() -> bytes`` writes exactly Kafka's fields (compact JSON, decimal strings where Kafka
uses strings); ``decode(data, path)`` reads every version Kafka has written and raises
``ZkDataError`` naming the path for anything else. No I/O happens here.

The layout, who writes each node and the session rules are in ``docs/zookeeper.md``.

Path builders validate their arguments (a topic name can never walk out of its directory) and
raise ``ValueError``: a bad name is a caller's bug, not bad data in ZooKeeper.

Its length is deliberate: like Kafka's ``ZkData`` it is the one place every path and format
is defined, a section per znode, so nothing else in the tree builds a path or parses znode JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Self

from odradek.common.limits import INT32_MAX, INT64_MAX
from odradek.common.partitions import TopicPartition
from odradek.common.topics import LEGAL_TOPIC_CHARACTERS, TOPIC_NAME_LENGTH_MAX
from odradek.config.endpoints import SecurityProtocol
from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
    parse_kafka_name,
    parse_principal,
)
from odradek.zk.codec import (
    JsonObject,
    build,
    check_id,
    decode_decimal,
    decode_replicas,
    encode_json,
    frozen_replicas,
    is_topic_id,
    replicas_json,
)
from odradek.zk.errors import ZkDataError

# --- paths -----------------------------------------------------------------------------------

CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"

CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"

# Kafka's ConfigType names: /config/<type>/<entity>.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")
# Kafka's ConfigEntityName.Default: /config/brokers/<default> holds every broker's defaults.
BROKER_DEFAULT_ENTITY = "<default>"

# What Kafka's KafkaZkClient.createTopLevelPaths creates at start-up (those Odradek uses).
PERSISTENT_PATHS = (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    BROKER_SEQID_PATH,
    CONFIG_CHANGES_PATH,
    *(f"{CONFIG_PATH}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
)

# Kafka's topic name rules (org.apache.kafka.common.internals.Topic).
_ENTITY_NAME = re.compile(r"[^/\x00]+")
_SEQUENCE_SUFFIX = re.compile(r"[0-9]{10}")


def validate_topic_name(topic: str) -> str:
    if (
        not isinstance(topic, str)
        or LEGAL_TOPIC_CHARACTERS.fullmatch(topic) is None
        or topic in (".", "..")
    ):
        raise ValueError(f"illegal topic name {topic!r}: use letters, digits, '.', '_' and '-'")
    if len(topic) > TOPIC_NAME_LENGTH_MAX:
        raise ValueError(f"topic name longer than {TOPIC_NAME_LENGTH_MAX} characters: {topic!r}")
    return topic


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{check_id('broker id', broker_id)}"


def broker_id_from_name(name: str) -> int:
    """The broker id of a child of ``/brokers/ids`` (``"3"`` -> 3)."""
    value = decode_decimal(name, BROKER_IDS_PATH, "broker id", 0, INT32_MAX)
    if str(value) != name:
        raise ZkDataError(f"broker id {name!r} is not in canonical form", path=BROKER_IDS_PATH)
    return value


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{validate_topic_name(topic)}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{check_id('partition', partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def entity_config_path(entity_type: str, entity_name: str) -> str:
    if entity_type not in CONFIG_ENTITY_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    if _ENTITY_NAME.fullmatch(entity_name) is None or entity_name in (".", ".."):
        raise ValueError(f"illegal config entity name {entity_name!r}")
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    return entity_config_path("topics", validate_topic_name(topic))


def broker_config_entity(broker_id: int | None) -> str:
    """The entity name of a broker's dynamic configs; None: the cluster-wide default."""
    return BROKER_DEFAULT_ENTITY if broker_id is None else str(check_id("broker id", broker_id))


def broker_config_path(broker_id: int | None) -> str:
    """``/config/brokers/<id>``, or ``/config/brokers/<default>`` for None."""
    return entity_config_path("brokers", broker_config_entity(broker_id))


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<topic>``: an empty node that asks the controller to delete it."""
    return f"{DELETE_TOPICS_PATH}/{validate_topic_name(topic)}"


def config_change_path_prefix() -> str:
    """The path to create with ``sequence=True``; ZooKeeper appends a 10-digit number."""
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


def isr_change_path_prefix() -> str:
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}"


def log_dir_event_path_prefix() -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"


def sequence_number(name: str, prefix: str) -> int:
    """The number of a sequential node (``"config_change_0000000007"`` -> 7)."""
    name = name.rsplit("/", 1)[-1]
    suffix = name[len(prefix) :]
    if not name.startswith(prefix) or _SEQUENCE_SUFFIX.fullmatch(suffix) is None:
        raise ZkDataError(f"{name!r} is not a {prefix}<10 digits> node", path=name)
    return int(suffix)


# --- /cluster/id -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterId:
    """``{"version":"1","id":"<22 characters>"}``; Kafka writes this version as a string."""

    id: str

    PATH: ClassVar[str] = CLUSTER_ID_PATH

    def encode(self) -> bytes:
        return encode_json({"version": "1", "id": self.id})

    @classmethod
    def decode(cls, data: bytes, path: str = CLUSTER_ID_PATH) -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, 1)
        return cls(obj.string("id"))


# --- /brokers/ids/<id> -----------------------------------------------------------------------

SECURITY_PROTOCOLS = tuple(protocol.name for protocol in SecurityProtocol)
# Kafka's EndPoint uriParseExp: LISTENER://host:port, the host in brackets when it is IPv6.
_ENDPOINT = re.compile(
    r"(?P<listener>[A-Za-z0-9_]+)://\[?(?P<host>[0-9a-zA-Z\-%._:]*)\]?:(?P<port>[0-9]+)"
)
_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
PORT_MAX = 65535


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener; ``listener_name`` is upper case, as Kafka normalises it."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __post_init__(self) -> None:
        object.__setattr__(self, "listener_name", self.listener_name.upper())
        if re.fullmatch(r"[A-Z0-9_]+", self.listener_name) is None:
            raise ValueError(f"illegal listener name {self.listener_name!r}")
        if _HOST.fullmatch(self.host) is None:
            raise ValueError(f"illegal host {self.host!r}")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.security_protocol!r}")
        if isinstance(self.port, bool) or not 0 <= self.port <= PORT_MAX:
            raise ValueError(f"port {self.port!r} outside [0, {PORT_MAX}]")

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class SupportedFeature:
    """A feature range a broker supports (KIP-584); Odradek advertises none yet."""

    name: str
    min_version: int
    max_version: int


MAX_BROKER_PARTITIONS_FIELD = "odradek_max_broker_partitions"  # Kafka ignores unknown fields


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker's registration, Kafka's version 5 JSON::

        {"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
         "endpoints":["PLAINTEXT://127.0.0.1:9092"],"rack":"r1","jmx_port":-1,"features":{},
         "host":"127.0.0.1","timestamp":"1700000000000","port":9092,"version":5}

    ``host``/``port`` repeat the first PLAINTEXT endpoint for old clients (``null``/-1 when there
    is none). ``decode`` also reads versions 1 to 4. The broker id is the node's name.
    """

    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    features: tuple[SupportedFeature, ...] = ()
    # Odradek's own: the replicas this broker can host (broker/replica_budget.py); None: unknown
    max_broker_partitions: int | None = None

    VERSION: ClassVar[int] = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", tuple(self.endpoints))
        object.__setattr__(self, "features", tuple(sorted(self.features, key=lambda f: f.name)))
        names = [endpoint.listener_name for endpoint in self.endpoints]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate listener names in {names}")

    def encode(self) -> bytes:
        plaintext = next(
            (e for e in self.endpoints if e.security_protocol == "PLAINTEXT"),
            None,
        )
        value = {
            "listener_security_protocol_map": {
                e.listener_name: e.security_protocol for e in self.endpoints
            },
            "endpoints": [e.connection_string() for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "features": {
                f.name: {"min_version": f.min_version, "max_version": f.max_version}
                for f in self.features
            },
            "host": None if plaintext is None else plaintext.host,
            "timestamp": str(self.timestamp_ms),
            "port": -1 if plaintext is None else plaintext.port,
            "version": self.VERSION,
        }
        if self.rack is not None:
            value["rack"] = self.rack
        if self.max_broker_partitions is not None:
            value[MAX_BROKER_PARTITIONS_FIELD] = self.max_broker_partitions
        return encode_json(value)

    @classmethod
    def decode(cls, data: bytes, path: str = f"{BROKER_IDS_PATH}/<id>") -> Self:
        obj = JsonObject.parse(data, path)
        version = obj.version(1, cls.VERSION)
        if version == 1:
            host, port = obj.string("host"), obj.integer("port", lo=0, hi=PORT_MAX)
            endpoints = [build(path, lambda: Endpoint("PLAINTEXT", host, port))]
        else:
            if "listener_security_protocol_map" in obj:
                protocols_obj = obj.child("listener_security_protocol_map")
                protocols = {k.upper(): protocols_obj.string(k) for k in protocols_obj}
            else:
                protocols = {protocol: protocol for protocol in SECURITY_PROTOCOLS}
            endpoints = [_decode_endpoint(text, protocols, path) for text in _strings(obj)]
        features_obj = obj.child("features", optional=True)
        features = []
        for name in features_obj:
            ranges = features_obj.child(name)
            features.append(
                SupportedFeature(
                    name,
                    ranges.integer("min_version", lo=-(2**15), hi=2**15 - 1),
                    ranges.integer("max_version", lo=-(2**15), hi=2**15 - 1),
                )
            )
        rack = obj.raw("rack") if "rack" in obj else None
        if rack is not None:
            rack = obj.string("rack")
        budget = None
        if MAX_BROKER_PARTITIONS_FIELD in obj:
            budget = obj.integer(MAX_BROKER_PARTITIONS_FIELD, lo=0, hi=2**31 - 1)
        return build(
            path,
            lambda: cls(
                endpoints=tuple(endpoints),
                rack=rack,
                jmx_port=obj.integer("jmx_port", default=-1),
                timestamp_ms=obj.decimal_string("timestamp", default=0, lo=0),
                features=tuple(features),
                max_broker_partitions=budget,
            ),
        )


def _strings(obj: JsonObject) -> list[str]:
    endpoints = obj.raw("endpoints") if "endpoints" in obj else None
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise ZkDataError("field 'endpoints' must be an array of strings", path=obj.path)
    return endpoints


def _decode_endpoint(text: str, protocols: Mapping[str, str], path: str) -> Endpoint:
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        raise ZkDataError(f"endpoint {text!r} is not LISTENER://host:port", path=path)
    listener = match["listener"].upper()
    if listener not in protocols:
        raise ZkDataError(f"listener {listener!r} has no security protocol", path=path)
    return build(
        path, lambda: Endpoint(listener, match["host"], int(match["port"]), protocols[listener])
    )


# --- /brokers/topics/<topic> -----------------------------------------------------------------


def _empty_replicas() -> Mapping[int, tuple[int, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class TopicAssignment:
    """The replicas of each partition of a topic::

        {"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},
         "topic_id":"cMr3GpVESX2L3byPGf93lQ"}

    Written as version 3 with a ``topic_id`` (as Kafka 3.x does), version 2 without one.
    ``adding_replicas``/``removing_replicas`` list only partitions being reassigned. Mappings
    are read-only and sorted by partition.
    """

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=_empty_replicas)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=_empty_replicas)

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", frozen_replicas(self.partitions, "assigned"))
        for name in ("adding_replicas", "removing_replicas"):
            replicas = {p: r for p, r in getattr(self, name).items() if len(tuple(r)) > 0}
            object.__setattr__(self, name, frozen_replicas(replicas, name))
        if self.topic_id is not None and not is_topic_id(self.topic_id):
            raise ValueError(f"topic id {self.topic_id!r} is not 16 bytes in URL-safe base64")

    def encode(self) -> bytes:
        value: dict[str, object] = {
            "version": 2 if self.topic_id is None else 3,
            "partitions": replicas_json(self.partitions),
            "adding_replicas": replicas_json(self.adding_replicas),
            "removing_replicas": replicas_json(self.removing_replicas),
        }
        if self.topic_id is not None:
            value["topic_id"] = self.topic_id
        return encode_json(value)

    @classmethod
    def decode(cls, data: bytes, path: str = f"{TOPICS_PATH}/<topic>") -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, 3)
        topic_id = obj.string("topic_id") if "topic_id" in obj else None
        return build(
            path,
            lambda: cls(
                partitions=decode_replicas(obj.child("partitions")),
                topic_id=topic_id,
                adding_replicas=decode_replicas(obj.child("adding_replicas", optional=True)),
                removing_replicas=decode_replicas(obj.child("removing_replicas", optional=True)),
            ),
        )


# --- /brokers/topics/<topic>/partitions/<p>/state --------------------------------------------

LEADER_NONE = -1
LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader and ISR of one partition, and the epoch of the controller that wrote them::

        {"controller_epoch":6,"leader":0,"version":1,"leader_epoch":4,"isr":[0]}

    ``leader_recovery_state`` is written only when it is not RECOVERED (0), as Kafka does.
    The znode's version (its ``Stat``) is the compare-and-set token for updates.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED

    VERSION: ClassVar[int] = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))
        if self.leader_recovery_state not in (
            LEADER_RECOVERY_RECOVERED,
            LEADER_RECOVERY_RECOVERING,
        ):
            raise ValueError(f"unknown leader_recovery_state {self.leader_recovery_state!r}")

    def encode(self) -> bytes:
        value: dict[str, object] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": self.VERSION,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
            value["leader_recovery_state"] = self.leader_recovery_state
        return encode_json(value)

    @classmethod
    def decode(cls, data: bytes, path: str = f"{TOPICS_PATH}/<topic>/partitions/<p>/state") -> Self:
        obj = JsonObject.parse(data, path)
        if "version" in obj:
            obj.version(1, cls.VERSION)
        return build(
            path,
            lambda: cls(
                leader=obj.integer("leader", lo=LEADER_NONE),
                leader_epoch=obj.integer("leader_epoch", lo=0),
                isr=obj.integers("isr", lo=0),
                controller_epoch=obj.integer("controller_epoch", lo=0),
                leader_recovery_state=obj.integer(
                    "leader_recovery_state", default=LEADER_RECOVERY_RECOVERED
                ),
            ),
        )


# --- /controller and /controller_epoch -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """The active controller::

        {"version":1,"brokerid":1000,"timestamp":"1700000000000","host":"127.0.0.1","port":9093}

    In Odradek the controller is its own process with its own id; the JSON keeps Kafka's
    ``brokerid`` key. ``host`` and ``port`` are Odradek's: where the controller's own listener
    serves brokers' requests (AlterPartition). Kafka's readers ignore fields they do not know, and
    a node without them (written by an older controller, or by Kafka) decodes with ``host`` None.
    ``decode`` also reads Kafka 3.4+'s version 2 (with ``kraftControllerEpoch``, ignored here).
    """

    controller_id: int
    timestamp_ms: int = 0
    host: str | None = None
    port: int | None = None

    PATH: ClassVar[str] = CONTROLLER_PATH
    VERSION: ClassVar[int] = 1

    def __post_init__(self) -> None:
        if (self.host is None) != (self.port is None):
            raise ValueError("a controller endpoint needs both host and port")

    @property
    def endpoint(self) -> tuple[str, int] | None:
        """``(host, port)`` of the controller's listener, or None if it published none."""
        if self.host is None or self.port is None:
            return None
        return self.host, self.port

    def encode(self) -> bytes:
        value: dict[str, object] = {
            "version": self.VERSION,
            "brokerid": self.controller_id,
            "timestamp": str(self.timestamp_ms),
        }
        if self.host is not None:
            value["host"] = self.host
            value["port"] = self.port
        return encode_json(value)

    @classmethod
    def decode(cls, data: bytes, path: str = CONTROLLER_PATH) -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, 2)
        host = obj.string("host", default=None)
        return cls(
            controller_id=obj.integer("brokerid", lo=0),
            timestamp_ms=obj.decimal_string("timestamp", default=0, lo=0),
            host=host,
            port=None if host is None else obj.integer("port", lo=1, hi=65535),
        )


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    """The controller epoch as a decimal string (``"7"``), not JSON: Kafka writes it so."""

    epoch: int

    PATH: ClassVar[str] = CONTROLLER_EPOCH_PATH

    def encode(self) -> bytes:
        return str(self.epoch).encode("ascii")

    @classmethod
    def decode(cls, data: bytes, path: str = CONTROLLER_EPOCH_PATH) -> Self:
        try:
            text = bytes(data).decode("ascii")
        except UnicodeDecodeError as exc:
            raise ZkDataError("controller epoch is not ASCII", path=path) from exc
        return cls(decode_decimal(text, path, "controller epoch", 0, INT32_MAX))


# --- /config ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntityConfig:
    """Overrides for one entity: ``{"version":1,"config":{"retention.ms":"86400000"}}``.

    Keys are Kafka's configuration names; values are strings, as Kafka stores them.
    """

    config: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    VERSION: ClassVar[int] = 1

    def __post_init__(self) -> None:
        for key, value in self.config.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(f"config {key!r}={value!r}: keys and values must be strings")
        object.__setattr__(self, "config", MappingProxyType(dict(sorted(self.config.items()))))

    def encode(self) -> bytes:
        return encode_json({"version": self.VERSION, "config": dict(self.config)})

    @classmethod
    def decode(cls, data: bytes, path: str = f"{CONFIG_PATH}/<type>/<name>") -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, cls.VERSION)
        config = obj.child("config", optional=True)
        return cls({key: config.string(key) for key in config})


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """``{"version":2,"entity_path":"topics/orders"}``: tells brokers to re-read a config."""

    entity_path: str

    VERSION: ClassVar[int] = 2

    @classmethod
    def for_entity(cls, entity_type: str, entity_name: str) -> Self:
        entity_config_path(entity_type, entity_name)  # validates both
        return cls(f"{entity_type}/{entity_name}")

    def encode(self) -> bytes:
        return encode_json({"version": self.VERSION, "entity_path": self.entity_path})

    @classmethod
    def decode(
        cls, data: bytes, path: str = f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}<seq>"
    ) -> Self:
        obj = JsonObject.parse(data, path)
        if obj.version(1, cls.VERSION) == 1:
            return cls(f"{obj.string('entity_type')}/{obj.string('entity_name')}")
        return cls(obj.string("entity_path"))


# --- /admin and /isr_change_notification -----------------------------------------------------


def _decode_topic_partition(obj: JsonObject) -> TopicPartition:
    topic = obj.string("topic")
    try:
        validate_topic_name(topic)
    except ValueError as exc:
        raise ZkDataError(str(exc), path=obj.path) from exc
    return TopicPartition(topic, obj.integer("partition", lo=0))


@dataclass(frozen=True)
class PartitionReassignment:
    """Kafka's legacy reassignment request::

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}
    """

    partitions: Mapping[TopicPartition, tuple[int, ...]]

    PATH: ClassVar[str] = REASSIGN_PARTITIONS_PATH
    VERSION: ClassVar[int] = 1

    def __post_init__(self) -> None:
        items = {TopicPartition(*tp): tuple(replicas) for tp, replicas in self.partitions.items()}
        object.__setattr__(self, "partitions", MappingProxyType(dict(sorted(items.items()))))

    def encode(self) -> bytes:
        return encode_json(
            {
                "version": self.VERSION,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                    for tp, replicas in self.partitions.items()
                ],
            }
        )

    @classmethod
    def decode(cls, data: bytes, path: str = REASSIGN_PARTITIONS_PATH) -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, cls.VERSION)
        return cls(
            {
                _decode_topic_partition(item): item.integers("replicas", lo=0)
                for item in obj.objects("partitions")
            }
        )


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """Partitions whose ISR a leader changed::

    {"version":1,"partitions":[{"topic":"t","partition":0}]}
    """

    partitions: tuple[TopicPartition, ...]

    VERSION: ClassVar[int] = 1

    def __post_init__(self) -> None:
        unique = {TopicPartition(*tp) for tp in self.partitions}
        object.__setattr__(self, "partitions", tuple(sorted(unique)))

    def encode(self) -> bytes:
        return encode_json(
            {
                "version": self.VERSION,
                "partitions": [{"topic": t, "partition": p} for t, p in self.partitions],
            }
        )

    @classmethod
    def decode(cls, data: bytes, path: str = f"{ISR_CHANGE_NOTIFICATION_PATH}/<seq>") -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, cls.VERSION)
        return cls(tuple(_decode_topic_partition(item) for item in obj.objects("partitions")))


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """A broker's log dir failed (Kafka's ``LogDirEventNotificationZNode``), a sequential node
    ``/log_dir_event_notification/log_dir_event_<seq>``::

    {"version":1,"broker":1,"event":1}
    """

    broker_id: int
    event: int = 1  # LogDirFailure, the only event Kafka defines

    VERSION: ClassVar[int] = 1
    LOG_DIR_FAILURE: ClassVar[int] = 1

    def encode(self) -> bytes:
        return encode_json({"version": self.VERSION, "broker": self.broker_id, "event": self.event})

    @classmethod
    def decode(cls, data: bytes, path: str = f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/<seq>") -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, cls.VERSION)
        return cls(obj.integer("broker", lo=0), obj.integer("event", lo=1, hi=1))


# --- /latest_producer_id_block ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The last block of producer ids handed out, both ends inclusive::

    {"version":1,"broker":1,"block_start":"0","block_end":"999"}
    """

    broker_id: int
    block_start: int
    block_end: int

    PATH: ClassVar[str] = LATEST_PRODUCER_ID_BLOCK_PATH
    VERSION: ClassVar[int] = 1

    def __post_init__(self) -> None:
        if not 0 <= self.block_start <= self.block_end <= INT64_MAX:
            raise ValueError(f"bad producer id block [{self.block_start}, {self.block_end}]")

    def encode(self) -> bytes:
        return encode_json(
            {
                "version": self.VERSION,
                "broker": self.broker_id,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        )

    @classmethod
    def decode(cls, data: bytes, path: str = LATEST_PRODUCER_ID_BLOCK_PATH) -> Self:
        obj = JsonObject.parse(data, path)
        obj.version(1, cls.VERSION)
        return build(
            path,
            lambda: cls(
                broker_id=obj.integer("broker"),
                block_start=obj.decimal_string("block_start", lo=0),
                block_end=obj.decimal_string("block_end", lo=0),
            ),
        )


# --- /kafka-acl and /kafka-acl-extended ------------------------------------------------------

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
# The pattern types stored (Kafka's PatternType.isSpecific) and the resource types of ACLs.
ACL_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
ACL_RESOURCE_TYPES = tuple(
    t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
)


def acl_root_path(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for LITERAL, ``/kafka-acl-extended/prefixed`` for PREFIXED."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"no ACLs are stored for pattern type {pattern_type.name}")


def acl_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """``/kafka-acl/Topic``: Kafka's resource type name, one node per type."""
    if resource_type not in ACL_RESOURCE_TYPES:
        raise ValueError(f"no ACLs are stored for resource type {resource_type.name}")
    return f"{acl_root_path(pattern_type)}/{kafka_name(resource_type)}"


def acl_resource_path(pattern: ResourcePattern) -> str:
    """``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``."""
    name = pattern.name
    if _ENTITY_NAME.fullmatch(name or "") is None or name in (".", ".."):
        raise ValueError(f"illegal ACL resource name {name!r}")
    return f"{acl_type_path(pattern.pattern_type, pattern.resource_type)}/{name}"


def acl_changes_path(pattern_type: PatternType) -> str:
    """Where changes to ACLs of ``pattern_type`` are announced."""
    acl_root_path(pattern_type)  # validates
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_CHANGES_PATH
    return EXTENDED_ACL_CHANGES_PATH


def acl_change_path_prefix(pattern_type: PatternType) -> str:
    """The path to create with ``sequence=True``: ``/kafka-acl-changes/acl_changes_``."""
    return f"{acl_changes_path(pattern_type)}/{ACL_CHANGE_PREFIX}"


# What Kafka's KafkaZkClient.createAclPaths creates: every type node and both change nodes.
ACL_PATHS = (
    *(acl_type_path(p, t) for p in ACL_PATTERN_TYPES for t in ACL_RESOURCE_TYPES),
    LITERAL_ACL_CHANGES_PATH,
    EXTENDED_ACL_CHANGES_PATH,
)


@dataclass(frozen=True)
class ResourceAcls:
    """The ACLs of one resource pattern (Kafka's ``AclEntry`` JSON)::

        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
         "operation":"Read","host":"*"}]}

    Names are Kafka's (``Allow``/``Deny``; ``Read``, ``ClusterAction``, ``All``, ...); reading
    also takes Kafka's other spellings (``READ``). The entries are a set; written sorted.
    """

    entries: frozenset[AccessControlEntry] = frozenset()

    VERSION: ClassVar[int] = 1

    def encode(self) -> bytes:
        entries = sorted(
            self.entries,
            key=lambda e: (e.principal, e.permission_type, e.operation, e.host),
        )
        return encode_json(
            {
                "version": self.VERSION,
                "acls": [
                    {
                        "principal": e.principal,
                        "permissionType": kafka_name(e.permission_type),
                        "operation": kafka_name(e.operation),
                        "host": e.host,
                    }
                    for e in entries
                ],
            }
        )

    @classmethod
    def decode(cls, data: bytes | None, path: str = f"{LITERAL_ACL_PATH}/<type>/<name>") -> Self:
        if not data:
            return cls()
        obj = JsonObject.parse(data, path)
        obj.version(cls.VERSION, cls.VERSION)
        entries = []
        for item in obj.objects("acls"):
            try:
                principal = item.string("principal")
                parse_principal(principal)
                entries.append(
                    AccessControlEntry(
                        principal=principal,
                        host=item.string("host"),
                        operation=parse_kafka_name(AclOperation, item.string("operation")),
                        permission_type=parse_kafka_name(
                            AclPermissionType, item.string("permissionType")
                        ),
                    )
                )
            except ValueError as e:
                raise ZkDataError(str(e), path=path) from e
        return cls(frozenset(entries))


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A change notification's data, as Kafka writes it: ``TOPIC:orders`` (a LITERAL pattern,
    the resource type's Java name), or for PREFIXED
    ``{"version":1,"resourceType":"TOPIC","name":"app-","patternType":"PREFIXED"}``."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    acl_root_path(pattern.pattern_type)  # validates
    return encode_json(
        {
            "version": 1,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        }
    )


def decode_acl_change(data: bytes, pattern_type: PatternType, path: str) -> ResourcePattern:
    """The resource pattern a notification under ``acl_changes_path(pattern_type)`` names."""
    try:
        if pattern_type is PatternType.LITERAL:
            type_name, sep, name = bytes(data).decode("utf-8").partition(":")
            if not sep:
                raise ValueError("expected a string in format ResourceType:ResourceName")
            return ResourcePattern(parse_kafka_name(ResourceType, type_name), name)
        obj = JsonObject.parse(data, path)
        obj.version(1, 1)
        return ResourcePattern(
            parse_kafka_name(ResourceType, obj.string("resourceType")),
            obj.string("name"),
            parse_kafka_name(PatternType, obj.string("patternType")),
        )
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkDataError(f"bad ACL change notification: {e}", path=path) from e
