"""DescribeConfigs rows for topics and brokers: value, source, synonyms, type and documentation.

Sources follow Kafka's ``ZkAdminManager.createTopicConfigEntry``: a topic key the topic
overrides comes from DYNAMIC_TOPIC_CONFIG; otherwise from the broker key it inherits
(``TOPIC_CONFIG_SYNONYMS``): STATIC_BROKER_CONFIG when the broker's ``server.properties`` set
that key, else DEFAULT_CONFIG. Synonyms list, most specific first, the topic override, the broker
keys that are set, then the broker keys' defaults (``retention.ms`` ->
``log.retention.ms``/``.minutes``/``.hours``), as Kafka lists them.

A broker key counts as "set" when ``server.properties`` or an override named it, whatever its
value (``BrokerConfig.named_keys``): Kafka reports a key named at its own default as
STATIC_BROKER_CONFIG too, and so every topic inherits it as non-default. A config built by hand
names no keys; there a key counts as set when its value differs from the key's default (or it
has no default). The keys here are the static ones (STATIC_BROKER_CONFIG or DEFAULT_CONFIG,
read-only); the few a broker may change at run time, the replication throttle rates, are
described with their dynamic sources by ``broker_configs``, and topics inherit none of them.

Pure functions of immutable configs; any thread may call them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum

from odradek.config.broker import BROKER_KEYS, TOPIC_CONFIG_SYNONYMS, BrokerConfig
from odradek.config.keys import ConfigKey, ConfigType
from odradek.config.topic import CONFIG_KEYS, TopicConfig

__all__ = [
    "ConfigDescription",
    "ConfigSynonym",
    "Source",
    "broker_keys_set",
    "describe_broker_config",
    "described",
    "describe_topic_config",
]


class Source(IntEnum):
    """DescribeConfigs' ``config_source`` (Kafka's ``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: Source


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    """One DescribeConfigs row (also CreateTopics v5+ ``configs``)."""

    name: str
    value: str | None
    source: Source
    config_type: int  # ConfigType's wire value
    read_only: bool
    is_sensitive: bool = False
    documentation: str | None = None
    synonyms: tuple[ConfigSynonym, ...] = ()


def described(
    key: ConfigKey,
    value: str | None,
    synonyms: list[ConfigSynonym],
    *,
    read_only: bool,
    include_synonyms: bool,
    include_documentation: bool,
    is_sensitive: bool = False,
) -> ConfigDescription:
    """``key``'s row: its source is its first synonym's (the one in force), else the default."""
    return ConfigDescription(
        name=key.name,
        value=value,
        source=synonyms[0].source if synonyms else Source.DEFAULT_CONFIG,
        config_type=int(key.type),
        read_only=read_only,
        is_sensitive=is_sensitive,
        documentation=key.doc if include_documentation else None,
        synonyms=tuple(synonyms) if include_synonyms else (),
    )


def _is_set(key: ConfigKey, value: object) -> bool:
    if key.required:
        return True
    if key.nullable:
        return value is not None
    return value != key.parse(key.default)


def broker_keys_set(broker: BrokerConfig | None) -> dict[str, str]:
    """Broker keys the configuration named, or whose value is not their default, as Kafka
    prints them."""
    if broker is None:
        return {}
    found = {}
    for key in BROKER_KEYS.values():
        value = getattr(broker, key.attr)
        if key.name in broker.named_keys or _is_set(key, value):
            found[key.name] = key.to_string(value)
    return found


def _default_string(key: ConfigKey) -> str | None:
    if key.required or key.nullable:
        return None
    return key.to_string(key.parse(key.default))


def _wanted(keys: Collection[str] | None, name: str) -> bool:
    return keys is None or name in keys


def describe_topic_config(
    config: TopicConfig,
    overrides: Mapping[str, str],
    broker: BrokerConfig | None,
    *,
    keys: Collection[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[ConfigDescription]:
    """Every topic key (or only ``keys``) of a topic whose effective config is ``config``."""
    broker_set = broker_keys_set(broker)
    rows = []
    for key in CONFIG_KEYS.values():
        if not _wanted(keys, key.name):
            continue
        value = key.to_string(getattr(config, key.attr))
        synonyms = []
        if key.name in overrides:
            synonyms.append(ConfigSynonym(key.name, value, Source.DYNAMIC_TOPIC_CONFIG))
        broker_names = [name for name, _ in TOPIC_CONFIG_SYNONYMS[key.name]]
        for name in broker_names:
            if name in broker_set:
                synonyms.append(ConfigSynonym(name, broker_set[name], Source.STATIC_BROKER_CONFIG))
        for name in broker_names:
            default = _default_string(BROKER_KEYS[name])
            if default is not None:
                synonyms.append(ConfigSynonym(name, default, Source.DEFAULT_CONFIG))
        rows.append(
            described(
                key,
                value,
                synonyms,
                read_only=False,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return rows


def describe_broker_config(
    broker: BrokerConfig,
    *,
    keys: Collection[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[ConfigDescription]:
    """Every key of this broker's static configuration (or only ``keys``), all read-only."""
    broker_set = broker_keys_set(broker)
    rows = []
    for key in BROKER_KEYS.values():
        if not _wanted(keys, key.name):
            continue
        value = getattr(broker, key.attr)
        sensitive = key.type is ConfigType.PASSWORD  # as Kafka: never shown, only flagged
        text = None if value is None or sensitive else key.to_string(value)
        synonyms = []
        if key.name in broker_set:
            synonyms.append(ConfigSynonym(key.name, text, Source.STATIC_BROKER_CONFIG))
        default = _default_string(key)
        if default is not None:
            synonyms.append(ConfigSynonym(key.name, default, Source.DEFAULT_CONFIG))
        rows.append(
            described(
                key,
                text,
                synonyms,
                read_only=True,
                is_sensitive=sensitive,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return rows
