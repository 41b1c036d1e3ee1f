"""Per-topic log configuration: Kafka's keys, types, defaults and validation, as one table.

``CONFIG_KEYS`` is the single source of truth. Each ``ConfigKey`` row (``keys.py``) gives Kafka's
name, its type (with the wire values DescribeConfigs uses), its default, its bounds (``minimum``,
``maximum`` or the allowed ``choices``) and a one-line documentation string. ``TopicConfig`` has
one attribute per row, named with underscores (``segment.bytes`` -> ``segment_bytes``), and
checks every value when it is built, so a ``TopicConfig`` that exists is always valid; building
one by hand in a test is therefore safe.

Values arrive as strings (ZooKeeper's ``/config/topics/<topic>`` holds
``{"version":1,"config":{key: string}}``, and CreateTopics / AlterConfigs carry strings) or as
Python values from code, and are parsed as Kafka's ``ConfigDef`` parses them (``keys.py``).
Errors are ``InvalidConfigError`` with Kafka's wording: ``Invalid value -5 for configuration
segment.bytes: Value must be at least 14``, ``Unknown topic config name: segmnt.bytes``. The first
problem found is reported, as Kafka does: unknown names first, then values in table order.

``alter_overrides`` applies IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT) to the stored
overrides, as Kafka does to the properties it keeps in ZooKeeper; ``validate_alteration`` does the
same starting from an effective ``TopicConfig``.

Everything here is immutable and does no I/O: any thread may call it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from itertools import chain

# The generic machinery lives in keys.py; these names stay importable from here.
from odradek.config.keys import INT_MAX as INT_MAX
from odradek.config.keys import INT_MIN as INT_MIN
from odradek.config.keys import LONG_MAX, ConfigKey, ConfigType, Value
from odradek.config.keys import LONG_MIN as LONG_MIN
from odradek.config.keys import invalid_value as _invalid
from odradek.config.throttle import THROTTLED_REPLICAS_KEYS
from odradek.errors import InvalidConfigError

__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_TOPIC_CONFIG",
    "ConfigEntry",
    "ConfigKey",
    "ConfigSource",
    "ConfigType",
    "TopicConfig",
    "alter_overrides",
    "validate_alteration",
]


class ConfigSource(IntEnum):
    """Where a value comes from; the values are DescribeConfigs' ``config_source`` (v1+)."""

    DYNAMIC_TOPIC_CONFIG = 1
    DEFAULT_CONFIG = 5


_T = ConfigType

# Kafka 3.x names, types, defaults and bounds (LogConfig), alphabetical as in Kafka's docs.
CONFIG_KEYS: Mapping[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            "cleanup.policy",
            _T.LIST,
            ("delete",),
            "How old segments are retired: deleted, compacted by key, or both.",
            choices=("compact", "delete"),
        ),
        ConfigKey(
            "compression.type",
            _T.STRING,
            "producer",
            "Codec of batches in the log; 'producer' keeps the producer's.",
            choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        ConfigKey(
            "delete.retention.ms",
            _T.LONG,
            86400000,
            "How long tombstones are kept in a compacted log.",
            minimum=0,
        ),
        ConfigKey(
            "file.delete.delay.ms",
            _T.LONG,
            60000,
            "Time to wait before deleting a segment file from the filesystem.",
            minimum=0,
        ),
        ConfigKey(
            "flush.messages",
            _T.LONG,
            LONG_MAX,
            "Number of messages written between two fsyncs of the log.",
            minimum=1,
        ),
        ConfigKey(
            "flush.ms",
            _T.LONG,
            LONG_MAX,
            "Maximum time a message stays in the log before an fsync.",
            minimum=0,
        ),
        THROTTLED_REPLICAS_KEYS[0],  # follower.replication.throttled.replicas (throttle.py)
        ConfigKey(
            "index.interval.bytes",
            _T.INT,
            4096,
            "Bytes of log between two entries of the offset index.",
            minimum=0,
        ),
        THROTTLED_REPLICAS_KEYS[1],  # leader.replication.throttled.replicas (throttle.py)
        ConfigKey(
            "max.compaction.lag.ms",
            _T.LONG,
            LONG_MAX,
            "Maximum time a message stays ineligible for compaction.",
            minimum=1,
        ),
        ConfigKey(
            "max.message.bytes",
            _T.INT,
            1048588,
            "Largest record batch size allowed, after compression.",
            minimum=0,
        ),
        ConfigKey(
            "message.timestamp.after.max.ms",
            _T.LONG,
            LONG_MAX,
            "How far a batch timestamp may be ahead of the broker's clock.",
            minimum=0,
        ),
        ConfigKey(
            "message.timestamp.before.max.ms",
            _T.LONG,
            LONG_MAX,
            "How far a batch timestamp may be behind the broker's clock.",
            minimum=0,
        ),
        ConfigKey(
            "message.timestamp.type",
            _T.STRING,
            "CreateTime",
            "Whether record timestamps are the producer's or the broker's append time.",
            choices=("CreateTime", "LogAppendTime"),
        ),
        ConfigKey(
            "min.cleanable.dirty.ratio",
            _T.DOUBLE,
            0.5,
            "Fraction of the log that must be dirty before the cleaner compacts it.",
            minimum=0,
            maximum=1,
        ),
        ConfigKey(
            "min.compaction.lag.ms",
            _T.LONG,
            0,
            "Minimum time a message stays uncompacted.",
            minimum=0,
        ),
        ConfigKey(
            "min.insync.replicas",
            _T.INT,
            1,
            "Minimum in-sync replicas that must acknowledge a write with acks=all.",
            minimum=1,
        ),
        ConfigKey(
            "preallocate",
            _T.BOOLEAN,
            False,
            "Whether to preallocate a segment file when it is created.",
        ),
        ConfigKey(
            "retention.bytes",
            _T.LONG,
            -1,
            "Size a partition may reach before old segments are deleted; -1: no limit.",
        ),
        ConfigKey(
            "retention.ms",
            _T.LONG,
            604800000,
            "How long a segment is kept before it is deleted; -1: no limit.",
            minimum=-1,
        ),
        ConfigKey(
            "segment.bytes",
            _T.INT,
            1073741824,
            "Size of a segment file before the log rolls a new one.",
            minimum=14,
        ),
        ConfigKey(
            "segment.index.bytes",
            _T.INT,
            10485760,
            "Size of the offset and time index files of a segment.",
            minimum=4,
        ),
        ConfigKey(
            "segment.jitter.ms",
            _T.LONG,
            0,
            "Maximum random jitter subtracted from segment.ms.",
            minimum=0,
        ),
        ConfigKey(
            "segment.ms",
            _T.LONG,
            604800000,
            "Time after which the log rolls a new segment even if the last is not full.",
            minimum=1,
        ),
        ConfigKey(
            "unclean.leader.election.enable",
            _T.BOOLEAN,
            False,
            "Whether a replica outside the ISR may become leader, losing data.",
        ),
    )
}


def _default(name: str) -> Value:
    return CONFIG_KEYS[name].default


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's effective log configuration; invalid values raise ``InvalidConfigError``."""

    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    compression_type: str = _default("compression.type")
    delete_retention_ms: int = _default("delete.retention.ms")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    follower_replication_throttled_replicas: tuple[str, ...] = _default(
        "follower.replication.throttled.replicas"
    )
    index_interval_bytes: int = _default("index.interval.bytes")
    leader_replication_throttled_replicas: tuple[str, ...] = _default(
        "leader.replication.throttled.replicas"
    )
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_type: str = _default("message.timestamp.type")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    min_insync_replicas: int = _default("min.insync.replicas")
    preallocate: bool = _default("preallocate")
    retention_bytes: int = _default("retention.bytes")
    retention_ms: int = _default("retention.ms")
    segment_bytes: int = _default("segment.bytes")
    segment_index_bytes: int = _default("segment.index.bytes")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_ms: int = _default("segment.ms")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")

    def __post_init__(self) -> None:
        for key in CONFIG_KEYS.values():
            object.__setattr__(self, key.attr, key.parse(getattr(self, key.attr)))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})"
            )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(
        cls, props: Mapping[str, object], base: TopicConfig | None = None
    ) -> TopicConfig:
        """``base`` (Kafka's defaults if None) with ``props`` applied on top, validated."""
        for name in props:
            if name not in CONFIG_KEYS:
                raise InvalidConfigError(f"Unknown topic config name: {name}")
        changes = {CONFIG_KEYS[name].attr: value for name, value in props.items()}
        base = DEFAULT_TOPIC_CONFIG if base is None else base
        if not changes:  # immutable and valid already: validating all its keys again costs
            return base  # ~80 µs, a topic of CreateTopics (77,000 in 1 MB) twice (issue 23)
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        """Every key with its value as Kafka prints it."""
        return {k.name: k.to_string(getattr(self, k.attr)) for k in CONFIG_KEYS.values()}

    def overrides(self, base: TopicConfig | None = None) -> dict[str, str]:
        """Only the keys whose value differs from ``base`` (Kafka's defaults if None)."""
        base = DEFAULT_TOPIC_CONFIG if base is None else base
        return {
            k.name: k.to_string(getattr(self, k.attr))
            for k in CONFIG_KEYS.values()
            if getattr(self, k.attr) != getattr(base, k.attr)
        }

    def describe(self, overrides_keys: Collection[str] = ()) -> list[ConfigEntry]:
        """Every key for DescribeConfigs; ``overrides_keys`` are those the topic sets itself."""
        return [
            ConfigEntry(
                name=k.name,
                value=k.to_string(getattr(self, k.attr)),
                source=ConfigSource.DYNAMIC_TOPIC_CONFIG
                if k.name in overrides_keys
                else ConfigSource.DEFAULT_CONFIG,
                type=k.type,
                documentation=k.doc,
            )
            for k in CONFIG_KEYS.values()
        ]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    documentation: str

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


if [f.name for f in dataclasses.fields(TopicConfig)] != [k.attr for k in CONFIG_KEYS.values()]:
    raise RuntimeError("TopicConfig's attributes must follow CONFIG_KEYS, in the same order")

DEFAULT_TOPIC_CONFIG = TopicConfig()


def alter_overrides(
    overrides: Mapping[str, str],
    set_: Mapping[str, object] | None = None,
    delete: Iterable[str] = (),
    append: Mapping[str, str | Iterable[str]] | None = None,
    subtract: Mapping[str, str | Iterable[str]] | None = None,
    base: TopicConfig | None = None,
) -> tuple[dict[str, str], TopicConfig]:
    """IncrementalAlterConfigs on a topic's stored overrides (what ZooKeeper holds).

    SET stores a value, DELETE drops the override so the key falls back to ``base``; APPEND and
    SUBTRACT (list keys only) start from the current value, the override or else ``base``'s.
    Returns the new overrides, normalised as Kafka prints them, and the effective config.
    A key may appear in only one operation. Nothing is changed if anything is invalid.
    """
    base = DEFAULT_TOPIC_CONFIG if base is None else base
    set_, append, subtract, delete = set_ or {}, append or {}, subtract or {}, list(delete)
    seen: set[str] = set()
    for name in chain(set_, delete, append, subtract):
        if name not in CONFIG_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if name in seen:
            raise InvalidConfigError(f"Configuration {name} appears in more than one operation")
        seen.add(name)
    new: dict[str, object] = {**overrides, **set_}
    for name in delete:
        new.pop(name, None)
    for name, values in chain(append.items(), subtract.items()):
        key = CONFIG_KEYS[name]
        if key.type is not ConfigType.LIST:
            raise _invalid(name, values, "APPEND and SUBTRACT apply only to list configurations")
        current = key.parse(new.get(name, getattr(base, key.attr)))
        change = key.parse(values)
        if name in append:
            new[name] = current + tuple(v for v in change if v not in current)
        else:
            new[name] = tuple(v for v in current if v not in change)
    config = TopicConfig.from_properties(new, base)
    stored = {
        name: CONFIG_KEYS[name].to_string(getattr(config, CONFIG_KEYS[name].attr)) for name in new
    }
    return stored, config


def validate_alteration(
    current: TopicConfig,
    set_: Mapping[str, object] | None = None,
    delete: Iterable[str] = (),
    *,
    append: Mapping[str, str | Iterable[str]] | None = None,
    subtract: Mapping[str, str | Iterable[str]] | None = None,
    base: TopicConfig | None = None,
) -> TopicConfig:
    """``alter_overrides`` on an effective config: DELETE returns a key to ``base``'s value."""
    return alter_overrides(current.overrides(base), set_, delete, append, subtract, base)[1]
