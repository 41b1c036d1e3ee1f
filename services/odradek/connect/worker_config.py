"""A worker's configuration: Kafka Connect's worker keys, with Kafka's names and defaults.

``WorkerConfig(props, distributed=...)`` parses string properties (a ``.properties`` file read by
``parse_properties``) into typed attributes, refuses a key it does not know with an error naming
it (``ConfigException``), and derives the confluent-kafka configurations of the clients the worker
creates (``producer_config``, ``consumer_config``, ``admin_config``).

Client overrides keep Kafka's prefixes: ``producer.*``, ``consumer.*``, ``admin.*`` are passed to
those clients with the prefix removed, as librdkafka properties (librdkafka and the Java client
share most names: ``acks``, ``linger.ms``, ``max.poll.interval.ms``...). Converter properties keep
theirs: ``key.converter.schemas.enable`` is ``schemas.enable`` for the key converter.

Security keys (``security.protocol``, ``sasl.*``, ``ssl.*``), top-level or prefixed, are the Java
client's or librdkafka's and are mapped, layered and checked by ``worker_security`` (what cannot
be mapped is refused here, at the worker's start); ``security_settings()`` is the top-level
layer alone, for the distributed group membership's client.

``config.providers`` (Kafka's env, file and directory providers) are resolved first, by
``config_providers.resolve`` over ``environ`` (``os.environ`` unless given), so ``props`` and
every client config hold the resolved values.

Immutable after construction; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect import config_providers, worker_security
from odradek.connect.api import ConfigException

CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")
HTTPS_PREFIX = "listeners.https."  # the REST listener's TLS keys
CONVERTER_PREFIXES = ("key.converter.", "value.converter.", "header.converter.")

DEFAULT_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


@dataclass(frozen=True)
class _Key:
    type: type
    default: Any
    required_in: tuple[str, ...] = ()  # "standalone", "distributed"
    choices: tuple[str, ...] = ()
    minimum: int | None = None


_R_BOTH = ("standalone", "distributed")
_R_DIST = ("distributed",)
_R_STANDALONE = ("standalone",)

KEYS: dict[str, _Key] = {
    "bootstrap.servers": _Key(str, "localhost:9092"),
    "client.id": _Key(str, None),
    "key.converter": _Key(str, None, _R_BOTH),
    "value.converter": _Key(str, None, _R_BOTH),
    "header.converter": _Key(str, DEFAULT_HEADER_CONVERTER),
    "listeners": _Key(str, "http://:8083"),
    "rest.advertised.host.name": _Key(str, None),
    "rest.advertised.port": _Key(int, None, minimum=0),
    "rest.advertised.listener": _Key(str, None, choices=("http", "https")),
    "rest.extension.classes": _Key(str, ""),  # connect.rest.security checks and loads it
    "offset.flush.interval.ms": _Key(int, 60_000, minimum=1),
    "offset.flush.timeout.ms": _Key(int, 5_000, minimum=1),
    "task.shutdown.graceful.timeout.ms": _Key(int, 5_000, minimum=0),
    "connector.client.config.override.policy": _Key(
        str, "All", choices=worker_security.OVERRIDE_POLICIES
    ),
    # standalone
    "offset.storage.file.filename": _Key(str, None, _R_STANDALONE),
    # distributed
    "group.id": _Key(str, None, _R_DIST),
    "config.storage.topic": _Key(str, None, _R_DIST),
    "offset.storage.topic": _Key(str, None, _R_DIST),
    "status.storage.topic": _Key(str, None, _R_DIST),
    "config.storage.replication.factor": _Key(int, 3, minimum=-1),
    "offset.storage.replication.factor": _Key(int, 3, minimum=-1),
    "status.storage.replication.factor": _Key(int, 3, minimum=-1),
    "offset.storage.partitions": _Key(int, 25, minimum=-1),
    "status.storage.partitions": _Key(int, 5, minimum=-1),
    "scheduled.rebalance.max.delay.ms": _Key(int, 300_000, minimum=0),
    "session.timeout.ms": _Key(int, 10_000, minimum=1),
    "heartbeat.interval.ms": _Key(int, 3_000, minimum=1),
    "rebalance.timeout.ms": _Key(int, 60_000, minimum=1),
    "worker.sync.timeout.ms": _Key(int, 3_000, minimum=1),
    "worker.unsync.backoff.ms": _Key(int, 300_000, minimum=0),
    "connect.protocol": _Key(str, "sessioned", choices=("compatible", "sessioned")),
    "exactly.once.source.support": _Key(
        str, "disabled", choices=("disabled", "preparing", "enabled")
    ),
}

REFUSED = {
    "plugin.path": "plugins come from Python entry points (odradek.connect.*), not a plugin path",
    "internal.key.converter": "removed in Kafka 3.0; internal topics always use JSON",
    "internal.value.converter": "removed in Kafka 3.0; internal topics always use JSON",
}


def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` text: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments,
    ``\\`` at the end of a line continues it. Escapes other than line continuation are kept."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                key, rest = line[:i], line[i:].lstrip()
                if rest[:1] in ("=", ":"):
                    rest = rest[1:].lstrip()
                break
        else:
            key, rest = line, ""
        props[key] = rest
    if pending:
        raise ValueError("properties text ends inside a continued line")
    return props


def _typed(name: str, key: _Key, raw: str) -> Any:
    if key.type is int:
        try:
            value = int(raw.strip())
        except ValueError as e:
            raise ConfigException(name, f"{raw!r} is not an integer") from e
        if key.minimum is not None and value < key.minimum:
            raise ConfigException(name, f"{value} is below the minimum {key.minimum}")
        return value
    value = raw.strip()
    if key.choices and value not in key.choices:
        raise ConfigException(name, f"{value!r} is not one of {', '.join(key.choices)}")
    return value


class WorkerConfig:
    """Parsed worker properties. ``values[name]`` holds every known key (default when unset)."""

    def __init__(
        self,
        props: Mapping[str, str],
        *,
        distributed: bool,
        environ: Mapping[str, str] | None = None,
    ):
        for name, raw in props.items():
            if not isinstance(raw, str):
                raise ConfigException(name, f"value must be a string, got {type(raw).__name__}")
        self.props = config_providers.resolve(props, environ)
        self.distributed = distributed
        mode = "distributed" if distributed else "standalone"
        self.values: dict[str, Any] = {}
        for name, raw in self.props.items():
            if name in REFUSED:
                raise ConfigException(name, f"not supported: {REFUSED[name]}")
            if config_providers.is_provider_key(name):
                continue  # checked and used by config_providers.resolve
            if name.startswith(CLIENT_PREFIXES + CONVERTER_PREFIXES + (HTTPS_PREFIX,)):
                continue  # HTTPS_PREFIX: checked with the listener, by connect.rest.security
            if worker_security.is_security_key(name):
                continue  # checked below, with the prefixed ones
            key = KEYS.get(name)
            if key is None:
                raise ConfigException(name, "unknown worker configuration key")
            if name == "connector.client.config.override.policy":
                raw = worker_security.POLICY_CLASSES.get(raw.strip(), raw)
            self.values[name] = _typed(name, key, raw)
        for name, key in KEYS.items():
            if name not in self.values:
                if mode in key.required_in:
                    raise ConfigException(name, f"required in {mode} mode")
                self.values[name] = key.default
        if distributed and self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigException("heartbeat.interval.ms", "must be lower than session.timeout.ms")
        for client in (None, *worker_security.CLIENTS):  # every layer the worker itself sets
            self._security(client)
        mechanism = self.security_settings().get("sasl.mechanism")
        protocol = self.security_settings().get("security.protocol", "PLAINTEXT").upper()
        if distributed and protocol.startswith("SASL_") and mechanism == "OAUTHBEARER":
            raise ConfigException(
                "sasl.mechanism",
                "OAUTHBEARER is not supported in distributed mode: the group membership's "
                "client speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512",
            )

    @classmethod
    def from_file(cls, path: str, *, distributed: bool) -> WorkerConfig:
        with open(path, encoding="utf-8") as f:
            return cls(parse_properties(f.read()), distributed=distributed)

    def get(self, name: str) -> Any:
        return self.values[name]

    # The keys the runtime reads often, as attributes.
    @property
    def bootstrap_servers(self) -> str:
        return self.values["bootstrap.servers"]

    @property
    def group_id(self) -> str | None:
        return self.values["group.id"]

    @property
    def offset_flush_interval_ms(self) -> int:
        return self.values["offset.flush.interval.ms"]

    @property
    def offset_flush_timeout_ms(self) -> int:
        return self.values["offset.flush.timeout.ms"]

    @property
    def task_shutdown_graceful_timeout_ms(self) -> int:
        return self.values["task.shutdown.graceful.timeout.ms"]

    @property
    def session_timeout_ms(self) -> int:
        return self.values["session.timeout.ms"]

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.values["heartbeat.interval.ms"]

    @property
    def rebalance_timeout_ms(self) -> int:
        return self.values["rebalance.timeout.ms"]

    @property
    def exactly_once_source_enabled(self) -> bool:
        return self.values["exactly.once.source.support"] == "enabled"

    @property
    def offset_storage_file(self) -> str | None:
        return self.values["offset.storage.file.filename"]

    # ---------------------------------------------------------------- derived configs

    def prefixed(self, prefix: str) -> dict[str, str]:
        """The properties under ``prefix``, with it removed."""
        return {k[len(prefix) :]: v for k, v in self.props.items() if k.startswith(prefix)}

    def converter_config(self, which: str) -> tuple[str, dict[str, str]]:
        """(class name, properties) of ``key``, ``value`` or ``header`` converter."""
        name = f"{which}.converter"
        return self.values[name], self.prefixed(name + ".")

    def _security(self, client: str | None, overrides: Mapping[str, str] = ()) -> dict[str, str]:
        prefixed = self.prefixed(f"{client}.") if client else {}
        return worker_security.client_security(self.props, client, prefixed, overrides)

    def security_settings(self) -> dict[str, str]:
        """librdkafka's security settings of the top-level keys (no client prefix)."""
        return self._security(None)

    def client_overrides(self, connector_config: Mapping[str, str], client: str) -> dict:
        """A connector's ``<client>.override.*`` keys, as the override policy allows them."""
        policy = self.values["connector.client.config.override.policy"]
        return worker_security.client_overrides(policy, connector_config, client)

    def override_errors(self, connector_config: Mapping[str, str]) -> list[tuple[str, str]]:
        """(key, message) of a connector's client overrides that the policy refuses or that
        cannot be mapped: what validating its config reports, before a task would fail."""
        errors = []
        builders = {
            "producer": self.producer_config,
            "consumer": lambda overrides: self.consumer_config(None, overrides),
            "admin": self.admin_config,
        }
        for client, build in builders.items():
            try:
                build(self.client_overrides(connector_config, client))
            except ConfigException as e:
                errors.append((e.name, e.message))
        return errors

    def _client(self, client: str, overrides: Mapping[str, str]) -> dict[str, Any]:
        """What every client gets: the bootstrap servers, client.id, the client's own
        (``<client>.*``) and the connector's ``overrides``, the security keys mapped."""
        base: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.values["client.id"]:
            base["client.id"] = self.values["client.id"]
        own = self.prefixed(f"{client}.")
        plain = {
            k: v
            for k, v in {**own, **dict(overrides)}.items()
            if not worker_security.is_security_key(k)
        }
        return {**base, **plain, **self._security(client, overrides)}

    def producer_config(self, overrides: Mapping[str, str] = ()) -> dict[str, Any]:
        """A confluent-kafka Producer config: Kafka Connect's producer defaults (acks=all,
        idempotence, Java's murmur2 partitioner, one retry budget bounded by
        delivery.timeout.ms), then ``producer.*``,
        then ``overrides`` (a connector's ``producer.override.*``)."""
        client = self._client("producer", overrides)
        config = {
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.timeout.ms": 120_000,
            # Java's partitioner: a keyed record lands where Kafka Connect would put it, and an
            # exactly-once task's offset records where the offset store writes the same key
            "partitioner": "murmur2_random",
            **client,
        }
        return config

    def consumer_config(
        self, group: str | None, overrides: Mapping[str, str] = ()
    ) -> dict[str, Any]:
        """A confluent-kafka Consumer config for ``group`` (None: no group, manual assignment):
        no auto-commit, earliest, as Kafka Connect's sink and store consumers."""
        config: dict[str, Any] = {
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **self._client("consumer", overrides),
        }
        if group is not None:
            config["group.id"] = group
        else:
            config.setdefault("group.id", "odradek-connect-no-group")
        return config

    def admin_config(self, overrides: Mapping[str, str] = ()) -> dict[str, Any]:
        return self._client("admin", overrides)
