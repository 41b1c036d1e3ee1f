"""The connector plugin API: what a connector for Odradek Connect implements.

It is Kafka Connect's API (``org.apache.kafka.connect.connector``, ``.source``, ``.sink``) in
Python, with Python names: a ``SourceConnector`` or ``SinkConnector`` splits its job into task
configurations; the worker runs each ``SourceTask`` / ``SinkTask`` in a thread of its own.

Threading contract (as Kafka's): a task's ``start``, ``poll``/``put``/``flush``/``pre_commit``,
``open``/``close`` and ``commit`` are called from its own thread only; ``stop`` is called from
another thread and must make a blocked ``poll`` return soon (within about a second). A connector's
methods are called from one worker thread at a time.

Offsets:
- A source record carries ``source_partition`` and ``source_offset`` (JSON-able dicts). The
  worker stores the latest offset per source partition once the record is acknowledged by the
  brokers; a restarted task reads them through ``context.offset_storage_reader``.
- A sink task receives records of the topic partitions it was ``open``ed for. The worker commits
  to the consumer group ``connect-<connector>`` only what ``pre_commit`` returns (by default what
  was passed to ``put`` and then ``flush``ed): at-least-once. A sink that keeps its own offsets
  (exactly-once sinks) returns ``{}`` from ``pre_commit`` and rewinds with ``context.offset``
  in ``open``.

Plugins are found through Python entry points (``odradek.connect.plugins``): see ``plugins``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from odradek.connect.data import Schema

Headers = tuple[tuple[str, Any], ...]
"""A record's headers: (key, value) pairs in order; keys may repeat, as Kafka's."""


class ConnectError(Exception):
    """A connector or task failed; the worker marks it FAILED with this message and trace."""


class RetriableError(ConnectError):
    """A failure worth retrying (the worker retries ``poll``/``put`` within ``errors.retry.*``)."""


class TimestampType(StrEnum):
    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class ConnectRecord:
    """What transforms and converters see: a topic, an optional partition, key and value with
    their optional schemas, a timestamp in ms (or None) and headers."""

    topic: str
    partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: Headers = ()

    def with_(self, **changes: Any) -> ConnectRecord:
        """A copy with ``changes`` (``dataclasses.replace``); transforms build records this way."""
        from dataclasses import replace

        return replace(self, **changes)


@dataclass(frozen=True)
class SourceRecord(ConnectRecord):
    source_partition: Mapping[str, Any] = field(default_factory=dict)
    source_offset: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkRecord(ConnectRecord):
    kafka_offset: int = -1
    timestamp_type: TimestampType = TimestampType.CREATE_TIME


@dataclass(frozen=True)
class RecordMetadata:
    """Where an acknowledged source record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None


# ------------------------------------------------------------------ configuration definitions


class ConfigType(StrEnum):
    """Kafka's ConfigDef types, with the names the validate endpoint reports."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(StrEnum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class ConfigException(ValueError):
    """A configuration value that is missing or invalid; ``name`` is the key at fault."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


NO_DEFAULT = object()
"""The default of a required key."""


@dataclass(frozen=True)
class ConfigKey:
    """One key of a ConfigDef. ``validator(name, parsed_value)`` raises ``ConfigException``;
    ``recommender(parsed_config)`` lists recommended values for the validate endpoint."""

    name: str
    type: ConfigType
    default: Any = NO_DEFAULT
    importance: Importance = Importance.MEDIUM
    documentation: str = ""
    group: str | None = None
    order_in_group: int = -1
    width: str = "NONE"
    display_name: str | None = None
    dependents: tuple[str, ...] = ()
    validator: Any = None
    recommender: Any = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


@dataclass(frozen=True)
class ConfigValue:
    """A key's result in a validation: the parsed value, recommended values, error messages."""

    name: str
    value: Any
    recommended_values: tuple[Any, ...] = ()
    errors: tuple[str, ...] = ()
    visible: bool = True


class ConfigDef:
    """Kafka's ConfigDef: keys with types, defaults, validators and documentation.

    ``parse`` turns string properties into typed values (raising ``ConfigException`` on the first
    bad key); ``validate`` reports every key with its errors, for the validate endpoint. The
    parsing rules (``true``/``false``, comma lists, ints in range) live in ``connect.config_def``.
    """

    def __init__(self, keys: Sequence[ConfigKey] = ()):
        self.keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.add(key)

    def add(self, key: ConfigKey) -> ConfigDef:
        if key.name in self.keys:
            raise ValueError(f"config key {key.name} defined twice")
        self.keys[key.name] = key
        return self

    def define(
        self, name: str, type_: ConfigType, default: Any = NO_DEFAULT, **kw: Any
    ) -> ConfigDef:
        return self.add(ConfigKey(name, type_, default, **kw))

    def merged(self, other: ConfigDef) -> ConfigDef:
        """This definition plus ``other``'s keys (a connector's keys plus the common ones)."""
        result = ConfigDef(list(self.keys.values()))
        for key in other.keys.values():
            if key.name not in result.keys:
                result.add(key)
        return result

    def parse(self, props: Mapping[str, str]) -> dict[str, Any]:
        from odradek.connect.config_def import parse

        return parse(self, props)

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        from odradek.connect.config_def import validate

        return validate(self, props)


# ------------------------------------------------------------------ connectors


class ConnectorContext(Protocol):
    def request_task_reconfiguration(self) -> None:
        """Ask the worker to call ``task_configs`` again (e.g. a new table appeared)."""

    def raise_error(self, error: Exception) -> None:
        """Fail the connector from a background thread of its own."""


class Connector(ABC):
    """Splits a job into task configs. Subclass ``SourceConnector`` or ``SinkConnector``."""

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def version(self) -> str:
        return "unknown"

    @abstractmethod
    def config(self) -> ConfigDef:
        """The connector's own keys (the common ones are added by the worker)."""

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        """Per-key validation of ``props`` (the validate endpoint); cross-key checks go here."""
        return self.config().validate(props)

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configurations (string to string)."""

    @abstractmethod
    def stop(self) -> None: ...

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[Any, Any]) -> bool:
        """KIP-875: accept (True) or refuse (raise ``ConnectError``) an offsets change; the default
        refuses nothing but says the connector was not consulted (False)."""
        return False


class ExactlyOnceSupport(StrEnum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class SourceConnector(Connector):
    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """KIP-618: whether this connector can run with exactly.once.support=required."""
        return None


class SinkConnector(Connector):
    pass


# ------------------------------------------------------------------ tasks


class Task(ABC):
    def version(self) -> str:
        return "unknown"

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class OffsetStorageReader(Protocol):
    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None: ...

    def offsets(
        self, partitions: Sequence[Mapping[str, Any]]
    ) -> dict[tuple[tuple[str, Any], ...], dict[str, Any]]:
        """Offsets keyed by the partition's sorted items."""


class SourceTaskContext(Protocol):
    @property
    def configs(self) -> Mapping[str, str]: ...

    @property
    def offset_storage_reader(self) -> OffsetStorageReader: ...


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """New records, or None/[] if there are none yet; may block up to about a second."""

    def commit(self) -> None:
        """Offsets of what was acknowledged have been committed."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """``record`` was acknowledged (``metadata``), or filtered out by a transform (None)."""


class ErrantRecordReporter(Protocol):
    def report(self, record: SinkRecord, error: Exception) -> None:
        """Send ``record`` to the dead letter queue (per ``errors.tolerance``) or fail the task."""


class SinkTaskContext(Protocol):
    @property
    def configs(self) -> Mapping[str, str]: ...

    def offset(self, partition: TopicPartition, offset: int) -> None:
        """Rewind or skip: consume ``partition`` from ``offset`` next (e.g. in ``open``)."""

    def timeout(self, timeout_ms: int) -> None:
        """After a ``RetriableError`` from ``put``, redeliver the same records after this wait."""

    def assignment(self) -> frozenset[TopicPartition]: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def request_commit(self) -> None: ...

    @property
    def errant_record_reporter(self) -> ErrantRecordReporter | None: ...


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """``partitions`` were assigned to this task (after a rebalance)."""

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None: ...

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable. Offsets are the next offsets to consume."""

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """The offsets the worker may commit to the group: by default ``flush`` then all of them."""
        self.flush(current_offsets)
        return dict(current_offsets)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """``partitions`` were revoked; write out what is buffered for them."""
