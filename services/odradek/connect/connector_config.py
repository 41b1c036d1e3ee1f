"""The configuration every connector shares (Kafka's ConnectorConfig, SourceConnectorConfig and
SinkConnectorConfig), the transform chain and converters it names, and the validate endpoint's
answer (Kafka's ConfigInfos).

Keys and defaults are Kafka's: ``name``, ``connector.class``, ``tasks.max`` (1),
``key.converter`` / ``value.converter`` / ``header.converter`` (none: the worker's apply),
``transforms``, ``predicates``, ``errors.retry.timeout`` (0), ``errors.retry.delay.max.ms``
(60000), ``errors.tolerance`` (none), ``errors.log.enable`` (false),
``errors.log.include.messages`` (false); sinks add ``topics`` / ``topics.regex`` (exactly one),
``errors.deadletterqueue.topic.name`` (none), ``...replication.factor`` (3),
``...context.headers.enable`` (false); sources add ``exactly.once.support`` (requested),
``transaction.boundary`` (poll), ``transaction.boundary.interval.ms``, ``offsets.storage.topic``.
Per-alias keys are added for each transform (``transforms.<a>.type``, ``.predicate``,
``.negate`` and the transform's own keys under ``transforms.<a>.``), predicate
(``predicates.<a>.type`` and its keys) and converter (``value.converter.<key>``), as Kafka's
``ConnectorConfig.enrich`` and the herder's converter validation do. Client overrides
``producer.override.*``, ``consumer.override.*``, ``admin.override.*`` pass through (Kafka's
default override policy, All). Any other key that neither these nor the connector define is
refused, naming it (a connector class may list extra prefixes it accepts in
``ALLOWED_PREFIXES``).

``ConnectorConfig.parse(plugins, props)`` raises ``ConfigException`` naming the first bad key;
``validate_connector_config(plugins, props)`` reports every key, for
``PUT /connector-plugins/{plugin}/config/validate`` and for config writes.

Pure: no I/O; plugin modules are imported through ``plugins``. Safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.api import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Connector,
    ExactlyOnceSupport,
    Importance,
    SinkConnector,
    SourceConnector,
)
from odradek.connect.config_def import in_range, invalid, one_of, parse_value, to_string
from odradek.connect.plugins import CONNECTORS_GROUP, Plugins
from odradek.connect.transforms.chain import TransformationChain, TransformationStage

NAME = "name"
CONNECTOR_CLASS = "connector.class"
TASKS_MAX = "tasks.max"
KEY_CONVERTER = "key.converter"
VALUE_CONVERTER = "value.converter"
HEADER_CONVERTER = "header.converter"
TRANSFORMS = "transforms"
PREDICATES = "predicates"
ERRORS_RETRY_TIMEOUT = "errors.retry.timeout"
ERRORS_RETRY_DELAY_MAX_MS = "errors.retry.delay.max.ms"
ERRORS_TOLERANCE = "errors.tolerance"
ERRORS_LOG_ENABLE = "errors.log.enable"
ERRORS_LOG_INCLUDE_MESSAGES = "errors.log.include.messages"
TOPICS = "topics"
TOPICS_REGEX = "topics.regex"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_TOPIC_REPLICATION_FACTOR = "errors.deadletterqueue.topic.replication.factor"
DLQ_CONTEXT_HEADERS_ENABLE = "errors.deadletterqueue.context.headers.enable"
EXACTLY_ONCE_SUPPORT = "exactly.once.support"
TRANSACTION_BOUNDARY = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_MS = "transaction.boundary.interval.ms"
OFFSETS_STORAGE_TOPIC = "offsets.storage.topic"

CLIENT_OVERRIDE_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")

COMMON_GROUP = "Common"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
ERROR_GROUP = "Error Handling"
EXACTLY_ONCE_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "offsets.topic"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _name_validator(name: str, value: Any) -> None:
    """Kafka's ``nonEmptyStringWithoutControlChars``."""
    if value is None or value == "":
        raise invalid(name, value, "String may not be empty")
    controls = _CONTROL.findall(value)
    if controls:
        shown = ", ".join(f"\\u{ord(c):04X}" for c in controls)
        raise invalid(
            name,
            value,
            f"String may not contain control sequences but had the following ISO control "
            f"characters: {shown}",
        )


def _unique_aliases(name: str, value: Any) -> None:
    aliases = value or []
    if len(set(aliases)) != len(aliases):
        raise invalid(name, ",".join(aliases), "Duplicate alias provided.")
    for alias in aliases:
        if not alias:
            raise invalid(name, ",".join(aliases), "an alias may not be empty")


def _regex_validator(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as exc:
            raise invalid(name, value, f"not a valid regular expression: {exc}") from None


def _key(
    name: str, type_: ConfigType, default: Any, group: str, order: int, **kw: Any
) -> ConfigKey:
    return ConfigKey(name, type_, default, group=group, order_in_group=order, **kw)


def common_config_def() -> ConfigDef:
    """Kafka's ``ConnectorConfig.configDef()``."""
    keys = [
        _key(
            NAME,
            ConfigType.STRING,
            NO_DEFAULT,
            COMMON_GROUP,
            1,
            importance=Importance.HIGH,
            width="MEDIUM",
            display_name="Connector name",
            validator=_name_validator,
            documentation="Globally unique name to use for this connector.",
        ),
        _key(
            CONNECTOR_CLASS,
            ConfigType.STRING,
            NO_DEFAULT,
            COMMON_GROUP,
            2,
            importance=Importance.HIGH,
            width="LONG",
            display_name="Connector class",
            documentation="Name or alias of the class for this connector: the full name "
            "(org.apache.kafka.connect.file.FileStreamSinkConnector), the simple name "
            "(FileStreamSinkConnector), the simple name without Connector (FileStreamSink), or "
            "a Python path (package.module:Class).",
        ),
        _key(
            TASKS_MAX,
            ConfigType.INT,
            1,
            COMMON_GROUP,
            3,
            importance=Importance.HIGH,
            width="SHORT",
            display_name="Tasks max",
            validator=in_range(1),
            documentation="Maximum number of tasks to use for this connector.",
        ),
        _key(
            KEY_CONVERTER,
            ConfigType.CLASS,
            None,
            COMMON_GROUP,
            4,
            importance=Importance.LOW,
            width="SHORT",
            display_name="Key converter class",
            documentation="Converter class used to convert between Kafka Connect format and the "
            "serialized form that is written to Kafka. Overrides the worker's key.converter.",
        ),
        _key(
            VALUE_CONVERTER,
            ConfigType.CLASS,
            None,
            COMMON_GROUP,
            5,
            importance=Importance.LOW,
            width="SHORT",
            display_name="Value converter class",
            documentation="Converter class used to convert between Kafka Connect format and the "
            "serialized form that is written to Kafka. Overrides the worker's value.converter.",
        ),
        _key(
            HEADER_CONVERTER,
            ConfigType.CLASS,
            None,
            COMMON_GROUP,
            6,
            importance=Importance.LOW,
            width="SHORT",
            display_name="Header converter class",
            documentation="HeaderConverter class used to convert between Kafka Connect format "
            "and the serialized form that is written to Kafka. Overrides the worker's "
            "header.converter.",
        ),
        _key(
            TRANSFORMS,
            ConfigType.LIST,
            "",
            TRANSFORMS_GROUP,
            7,
            importance=Importance.LOW,
            width="LONG",
            display_name="Transforms",
            validator=_unique_aliases,
            documentation="Aliases for the transformations to be applied to records.",
        ),
        _key(
            PREDICATES,
            ConfigType.LIST,
            "",
            PREDICATES_GROUP,
            8,
            importance=Importance.LOW,
            width="LONG",
            display_name="Predicates",
            validator=_unique_aliases,
            documentation="Aliases for the predicates used by transformations.",
        ),
        _key(
            ERRORS_RETRY_TIMEOUT,
            ConfigType.LONG,
            0,
            ERROR_GROUP,
            1,
            importance=Importance.MEDIUM,
            width="MEDIUM",
            display_name="Retry Timeout for Errors",
            validator=in_range(-1),
            documentation="The maximum duration in milliseconds that a failed operation will be "
            "reattempted. The default is 0, which means no retries will be attempted. Use -1 "
            "for infinite retries.",
        ),
        _key(
            ERRORS_RETRY_DELAY_MAX_MS,
            ConfigType.LONG,
            60000,
            ERROR_GROUP,
            2,
            importance=Importance.MEDIUM,
            width="MEDIUM",
            display_name="Maximum Delay Between Retries for Errors",
            validator=in_range(0),
            documentation="The maximum duration in milliseconds between consecutive retry "
            "attempts.",
        ),
        _key(
            ERRORS_TOLERANCE,
            ConfigType.STRING,
            "none",
            ERROR_GROUP,
            3,
            importance=Importance.MEDIUM,
            width="SHORT",
            display_name="Error Tolerance",
            validator=one_of("none", "all", case_insensitive=True),
            documentation="Behavior for tolerating errors during connector operation. 'none' "
            "fails the task at the first error; 'all' skips problematic records.",
        ),
        _key(
            ERRORS_LOG_ENABLE,
            ConfigType.BOOLEAN,
            False,
            ERROR_GROUP,
            4,
            importance=Importance.MEDIUM,
            width="SHORT",
            display_name="Log Errors",
            documentation="If true, write each error and the details of the failed operation "
            "and problematic record to the Connect application log.",
        ),
        _key(
            ERRORS_LOG_INCLUDE_MESSAGES,
            ConfigType.BOOLEAN,
            False,
            ERROR_GROUP,
            5,
            importance=Importance.MEDIUM,
            width="SHORT",
            display_name="Log Error Details",
            documentation="Whether to include in the log the Connect record that resulted in a "
            "failure.",
        ),
    ]
    return ConfigDef(keys)


def sink_config_def() -> ConfigDef:
    """Kafka's ``SinkConnectorConfig.configDef()``."""
    return common_config_def().merged(
        ConfigDef(
            [
                _key(
                    TOPICS,
                    ConfigType.LIST,
                    "",
                    COMMON_GROUP,
                    4,
                    importance=Importance.HIGH,
                    width="LONG",
                    display_name="Topics",
                    documentation="List of topics to consume, separated by commas.",
                ),
                _key(
                    TOPICS_REGEX,
                    ConfigType.STRING,
                    "",
                    COMMON_GROUP,
                    4,
                    importance=Importance.HIGH,
                    width="LONG",
                    display_name="Topics regex",
                    validator=_regex_validator,
                    documentation="Regular expression giving topics to consume. Only one of "
                    "topics or topics.regex should be specified.",
                ),
                _key(
                    DLQ_TOPIC_NAME,
                    ConfigType.STRING,
                    "",
                    ERROR_GROUP,
                    6,
                    importance=Importance.MEDIUM,
                    width="MEDIUM",
                    display_name="Dead Letter Queue Topic Name",
                    documentation="The name of the topic to be used as the dead letter queue "
                    "(DLQ) for messages that result in an error when processed by this sink "
                    "connector, or its transformations or converters. Empty: no DLQ.",
                ),
                _key(
                    DLQ_TOPIC_REPLICATION_FACTOR,
                    ConfigType.SHORT,
                    3,
                    ERROR_GROUP,
                    7,
                    importance=Importance.MEDIUM,
                    width="MEDIUM",
                    display_name="Dead Letter Queue Topic Replication Factor",
                    validator=in_range(-1),
                    documentation="Replication factor used to create the dead letter queue "
                    "topic when it doesn't already exist (-1: the broker's default).",
                ),
                _key(
                    DLQ_CONTEXT_HEADERS_ENABLE,
                    ConfigType.BOOLEAN,
                    False,
                    ERROR_GROUP,
                    8,
                    importance=Importance.MEDIUM,
                    width="MEDIUM",
                    display_name="Enable Error Context Headers",
                    documentation="If true, add headers containing error context to the "
                    "messages written to the dead letter queue.",
                ),
            ]
        )
    )


def source_config_def() -> ConfigDef:
    """Kafka's ``SourceConnectorConfig.configDef()`` (less topic creation)."""
    return common_config_def().merged(
        ConfigDef(
            [
                _key(
                    EXACTLY_ONCE_SUPPORT,
                    ConfigType.STRING,
                    "requested",
                    EXACTLY_ONCE_GROUP,
                    1,
                    importance=Importance.MEDIUM,
                    width="SHORT",
                    display_name="Exactly once support",
                    validator=one_of("requested", "required", case_insensitive=True),
                    documentation="Permitted values are requested, required. If set to "
                    '"required", forces a preflight check for the connector to ensure that it '
                    "can provide exactly-once semantics with the given configuration.",
                ),
                _key(
                    TRANSACTION_BOUNDARY,
                    ConfigType.STRING,
                    "poll",
                    EXACTLY_ONCE_GROUP,
                    2,
                    importance=Importance.MEDIUM,
                    width="SHORT",
                    display_name="Transaction Boundary",
                    validator=one_of("poll", "interval", "connector", case_insensitive=True),
                    documentation="Permitted values are: poll, interval, connector. If set to "
                    "'poll', a new producer transaction will be started and committed for every "
                    "batch of records that each task from this connector provides to Connect.",
                ),
                _key(
                    TRANSACTION_BOUNDARY_INTERVAL_MS,
                    ConfigType.LONG,
                    None,
                    EXACTLY_ONCE_GROUP,
                    3,
                    importance=Importance.LOW,
                    width="SHORT",
                    display_name="Transaction boundary interval",
                    validator=lambda n, v: v is None or in_range(0)(n, v),
                    documentation="If 'transaction.boundary' is set to 'interval', determines the "
                    "interval for producer transaction commits by connector tasks. If unset, "
                    "defaults to the value of the worker-level 'offset.flush.interval.ms'.",
                ),
                _key(
                    OFFSETS_STORAGE_TOPIC,
                    ConfigType.STRING,
                    None,
                    OFFSETS_TOPIC_GROUP,
                    1,
                    importance=Importance.LOW,
                    width="LONG",
                    display_name="Offsets topic",
                    documentation="The name of a separate offsets topic to use for this "
                    "connector. If empty or not specified, the worker's global offsets topic "
                    "name will be used.",
                ),
            ]
        )
    )


# ------------------------------------------------------------------ enrichment


def _prefixed(prefix: str, props: Mapping[str, str]) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def _aliases(props: Mapping[str, str], key: str) -> list[str]:
    """The aliases ``key`` lists, each once, in order (duplicates are reported by the key's
    validator)."""
    raw = props.get(key, "") or ""
    return list(dict.fromkeys(a.strip() for a in raw.split(",") if a.strip()))


def _prefix_key(prefix: str, key: ConfigKey, group: str) -> ConfigKey:
    return ConfigKey(
        prefix + key.name,
        key.type,
        key.default,
        importance=key.importance,
        documentation=key.documentation,
        group=group,
        order_in_group=key.order_in_group,
        width=key.width,
        display_name=key.display_name,
        dependents=tuple(prefix + d for d in key.dependents),
        validator=key.validator,
        recommender=key.recommender,
    )


@dataclass
class _Plugin:
    """A transform, predicate or converter named in a connector config: its keys, its class (or
    the error resolving it)."""

    prefix: str
    type_key: str
    group: str
    cls: Any = None
    error: ConfigException | None = None


def _enriched_plugins(plugins: Plugins, props: Mapping[str, str]) -> list[_Plugin]:
    out = []
    for alias in _aliases(props, TRANSFORMS):
        prefix = f"{TRANSFORMS}.{alias}."
        p = _Plugin(prefix, prefix + "type", f"Transforms: {alias}")
        name = props.get(p.type_key)
        if name:
            try:
                p.cls = plugins.transform_class(name, p.type_key)
            except ConfigException as exc:
                p.error = exc
        out.append(p)
    for alias in _aliases(props, PREDICATES):
        prefix = f"{PREDICATES}.{alias}."
        p = _Plugin(prefix, prefix + "type", f"Predicates: {alias}")
        name = props.get(p.type_key)
        if name:
            try:
                p.cls = plugins.predicate_class(name, p.type_key)
            except ConfigException as exc:
                p.error = exc
        out.append(p)
    return out


def enriched_config_def(
    plugins: Plugins, base: ConfigDef, props: Mapping[str, str]
) -> tuple[ConfigDef, list[_Plugin]]:
    """``base`` plus the per-alias keys of the transforms and predicates ``props`` names
    (Kafka's ``ConnectorConfig.enrich``)."""
    result = ConfigDef(list(base.keys.values()))
    found = _enriched_plugins(plugins, props)
    predicate_aliases = set(_aliases(props, PREDICATES))
    for p in found:
        is_transform = p.prefix.startswith(TRANSFORMS + ".")
        alias = p.prefix.split(".")[1]
        kind = "transformation" if is_transform else "predicate"
        result.add(
            ConfigKey(
                p.type_key,
                ConfigType.CLASS,
                NO_DEFAULT,
                importance=Importance.HIGH,
                group=p.group,
                order_in_group=1,
                width="LONG",
                display_name=f"{kind.capitalize()} type for {alias}",
                documentation=f"Class for the '{alias}' "
                f"{'transformation' if is_transform else 'predicate'}.",
                validator=_error_validator(p.error),
            )
        )
        if is_transform:
            result.add(
                ConfigKey(
                    p.prefix + "predicate",
                    ConfigType.STRING,
                    None,
                    importance=Importance.MEDIUM,
                    group=p.group,
                    order_in_group=2,
                    width="LONG",
                    display_name=f"Predicate for {alias}",
                    documentation="The alias of a predicate used to determine whether to apply "
                    "this transformation.",
                    validator=_predicate_ref_validator(predicate_aliases),
                )
            )
            result.add(
                ConfigKey(
                    p.prefix + "negate",
                    ConfigType.BOOLEAN,
                    False,
                    importance=Importance.MEDIUM,
                    group=p.group,
                    order_in_group=3,
                    width="SHORT",
                    display_name=f"Negate the predicate for {alias}",
                    documentation="Whether the configured predicate should be negated.",
                )
            )
        if p.cls is not None:
            try:
                own = p.cls().config()
            except Exception as exc:
                p.error = ConfigException(p.type_key, f"config() of {p.cls!r} failed: {exc}")
                continue
            for key in own.keys.values():
                if p.prefix + key.name not in result.keys:
                    result.add(_prefix_key(p.prefix, key, p.group))
    return result, found


def _error_validator(error: ConfigException | None):
    def check(name: str, value: Any) -> None:
        if error is not None:
            raise ConfigException(name, error.message)

    return check


def _predicate_ref_validator(defined: set[str]):
    def check(name: str, value: Any) -> None:
        if value is not None and value != "" and value not in defined:
            raise invalid(
                name,
                value,
                f"the predicate alias {value} is not defined in {PREDICATES} "
                f"(defined: {', '.join(sorted(defined)) or 'none'})",
            )

    return check


# ------------------------------------------------------------------ the parsed config


def _connector_kind(cls: type) -> str:
    return "sink" if issubclass(cls, SinkConnector) else "source"


def _base_def(cls: type) -> ConfigDef:
    return sink_config_def() if issubclass(cls, SinkConnector) else source_config_def()


@dataclass
class ConnectorConfig:
    """A connector's configuration, parsed: the common keys typed (``values``), the connector
    class resolved, the original properties kept (``props``) for the connector itself."""

    props: dict[str, str]
    values: dict[str, Any]
    connector_class: type[Connector]
    class_name: str
    plugins: Plugins

    @classmethod
    def parse(cls, plugins: Plugins, props: Mapping[str, str]) -> ConnectorConfig:
        """Raises ``ConfigException`` naming the first missing, bad or unknown key."""
        props = dict(props)
        class_name = props.get(CONNECTOR_CLASS)
        if not class_name:
            raise ConfigException(
                CONNECTOR_CLASS, f"Connector config {props} contains no connector type"
            )
        connector_class = plugins.connector_class(class_name)
        base = _base_def(connector_class)
        for key in (TRANSFORMS, PREDICATES):
            _unique_aliases(key, parse_value(key, ConfigType.LIST, props.get(key, "")))
        enriched, found = enriched_config_def(plugins, base, props)
        for p in found:
            if p.type_key not in props:
                raise ConfigException(
                    p.type_key,
                    f'Missing required configuration "{p.type_key}" which has no default value.',
                )
            if p.error is not None:
                raise p.error
        values = enriched.parse(props)
        for name, message in _cross_key_errors(values, props, connector_class):
            raise ConfigException(name, message)
        connector_def = _connector_config_def(connector_class)
        connector_def.parse(props)
        unknown = _unknown_keys(props, enriched, connector_def, connector_class)
        if unknown:
            raise ConfigException(unknown[0], _unknown_message(unknown[0]))
        for which in (KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER):
            if values.get(which):
                _resolve_converter(plugins, which, values[which])
        return cls(
            props,
            values,
            connector_class,
            plugins.class_name(CONNECTORS_GROUP, class_name),
            plugins,
        )

    @property
    def name(self) -> str:
        return self.values[NAME]

    @property
    def kind(self) -> str:
        """``source`` or ``sink``."""
        return _connector_kind(self.connector_class)

    @property
    def tasks_max(self) -> int:
        return self.values[TASKS_MAX]

    @property
    def errors_tolerance_all(self) -> bool:
        return self.values[ERRORS_TOLERANCE].lower() == "all"

    @property
    def topics(self) -> list[str]:
        return list(self.values.get(TOPICS) or [])

    @property
    def topics_regex(self) -> str | None:
        return self.values.get(TOPICS_REGEX) or None

    @property
    def dlq_topic(self) -> str | None:
        return self.values.get(DLQ_TOPIC_NAME) or None

    def get(self, key: str) -> Any:
        return self.values[key]

    def client_overrides(self, client: str) -> dict[str, str]:
        """``producer``/``consumer``/``admin``: the ``<client>.override.*`` keys, unprefixed."""
        return _prefixed(f"{client}.override.", self.props)

    def transformation_chain(self) -> TransformationChain:
        """New, configured transforms and predicates (one chain per task: they keep state)."""
        predicates: dict[str, Any] = {}
        for alias in self.values[PREDICATES]:
            prefix = f"{PREDICATES}.{alias}."
            predicate = self.plugins.new_predicate(self.props[prefix + "type"], prefix + "type")
            _configure(predicate, _prefixed(prefix, self.props), prefix)
            predicates[alias] = predicate
        stages = []
        for alias in self.values[TRANSFORMS]:
            prefix = f"{TRANSFORMS}.{alias}."
            transform = self.plugins.new_transform(self.props[prefix + "type"], prefix + "type")
            own = {
                k: v
                for k, v in _prefixed(prefix, self.props).items()
                if k not in ("type", "predicate", "negate")
            }
            _configure(transform, own, prefix)
            predicate_alias = self.values.get(prefix + "predicate")
            stages.append(
                TransformationStage(
                    alias,
                    transform,
                    predicates.get(predicate_alias) if predicate_alias else None,
                    bool(self.values.get(prefix + "negate")),
                )
            )
        return TransformationChain(stages)

    def converter(
        self,
        which: str,
        worker_class: str | None = None,
        worker_props: Mapping[str, str] | None = None,
    ) -> Any | None:
        """The configured ``key.converter``/``value.converter``/``header.converter``: the
        connector's class with its ``<which>.*`` props, else ``worker_class`` with
        ``worker_props`` (the worker's ``<which>.*``, unprefixed), else None."""
        return build_converter(self.plugins, which, self.props, worker_class, worker_props)


def build_converter(
    plugins: Plugins,
    which: str,
    props: Mapping[str, str],
    worker_class: str | None = None,
    worker_props: Mapping[str, str] | None = None,
) -> Any | None:
    """A configured converter for ``which`` (``key.converter`` ...), from ``props`` (the
    connector's) or the worker's fallback; ``ConfigException`` names the key at fault."""
    class_name = (props.get(which) or "").strip()
    if class_name:
        converter_props = _prefixed(which + ".", props)
    elif worker_class:
        class_name = worker_class
        converter_props = dict(worker_props or {})
    else:
        return None
    converter = _resolve_converter(plugins, which, class_name)()
    if which == HEADER_CONVERTER:
        _configure(converter, {**converter_props, "converter.type": "header"}, which + ".")
    else:
        is_key = which == KEY_CONVERTER
        try:
            converter.configure(converter_props, is_key)
        except ConfigException as exc:
            raise ConfigException(f"{which}.{exc.name}", exc.message) from exc
    return converter


def _resolve_converter(plugins: Plugins, which: str, class_name: str) -> type:
    if which == HEADER_CONVERTER:
        return plugins.header_converter_class(class_name, which)
    return plugins.converter_class(class_name, which)


def _configure(plugin: Any, props: Mapping[str, str], prefix: str) -> None:
    try:
        plugin.configure(props)
    except ConfigException as exc:
        raise ConfigException(prefix + exc.name, exc.message) from exc


def _connector_config_def(connector_class: type) -> ConfigDef:
    try:
        return connector_class().config()
    except Exception as exc:
        raise ConfigException(
            CONNECTOR_CLASS, f"config() of {connector_class.__name__} failed: {exc}"
        ) from exc


def _unknown_message(key: str) -> str:
    return (
        f"Unknown configuration key {key}: neither a Connect key nor one of the connector's "
        "(Odradek refuses keys it does not implement)"
    )


def _unknown_keys(
    props: Mapping[str, str], enriched: ConfigDef, connector_def: ConfigDef, connector_class: type
) -> list[str]:
    prefixes = [
        *CLIENT_OVERRIDE_PREFIXES,
        KEY_CONVERTER + ".",
        VALUE_CONVERTER + ".",
        HEADER_CONVERTER + ".",
        *getattr(connector_class, "ALLOWED_PREFIXES", ()),
    ]
    # A transform's or predicate's keys are its own business (a custom plugin may accept any).
    prefixes += [f"{TRANSFORMS}.{a}." for a in _aliases(props, TRANSFORMS)]
    prefixes += [f"{PREDICATES}.{a}." for a in _aliases(props, PREDICATES)]
    return sorted(
        k
        for k in props
        if k not in enriched.keys
        and k not in connector_def.keys
        and not any(k.startswith(p) for p in prefixes)
    )


def _cross_key_errors(
    values: Mapping[str, Any], props: Mapping[str, str], connector_class: type
) -> list[tuple[str, str]]:
    """Checks across keys, as Kafka's Sink/SourceConnectorConfig make them."""
    errors: list[tuple[str, str]] = []
    if issubclass(connector_class, SinkConnector):
        topics = values.get(TOPICS) or []
        regex = values.get(TOPICS_REGEX) or ""
        dlq = values.get(DLQ_TOPIC_NAME) or ""
        if topics and regex:
            message = (
                f"{TOPICS} and {TOPICS_REGEX} are mutually exclusive options, but both are set."
            )
            errors += [(TOPICS, message), (TOPICS_REGEX, message)]
        elif not topics and not regex:
            message = f"Must configure one of {TOPICS} or {TOPICS_REGEX}"
            errors += [(TOPICS, message), (TOPICS_REGEX, message)]
        if dlq and dlq in topics:
            errors.append(
                (
                    DLQ_TOPIC_NAME,
                    f"The DLQ topic '{dlq}' may not be included in the list of topics "
                    f"('{TOPICS}={','.join(topics)}') to be consumed.",
                )
            )
        if dlq and regex:
            try:
                matches = re.fullmatch(regex, dlq) is not None
            except re.error:
                matches = False
            if matches:
                errors.append(
                    (
                        DLQ_TOPIC_NAME,
                        f"The DLQ topic '{dlq}' may not be included in the regex matching the "
                        f"topics to be consumed ('{TOPICS_REGEX}={regex}').",
                    )
                )
    elif issubclass(connector_class, SourceConnector):
        if (values.get(TRANSACTION_BOUNDARY) or "").lower() == "connector" and not getattr(
            connector_class, "can_define_transaction_boundaries", None
        ):
            errors.append(
                (
                    TRANSACTION_BOUNDARY,
                    f"The connector does not support connector-defined transaction boundaries "
                    f"({TRANSACTION_BOUNDARY}=connector)",
                )
            )
        if (values.get(EXACTLY_ONCE_SUPPORT) or "").lower() == "required":
            try:
                support = connector_class().exactly_once_support(props)
            except Exception as exc:
                support = None
                errors.append((EXACTLY_ONCE_SUPPORT, f"exactly_once_support() failed: {exc}"))
            if support is not ExactlyOnceSupport.SUPPORTED:
                errors.append(
                    (
                        EXACTLY_ONCE_SUPPORT,
                        "The connector does not implement the API required for preflight "
                        "validation of exactly-once source support. Please consult the "
                        "documentation for the connector to determine whether it supports "
                        "exactly-once semantics, and then consider reconfiguring the connector "
                        "to use the value 'requested' for this property "
                        "(which will disable this preflight check)."
                        if support is None
                        else "The connector does not support exactly-once semantics with the "
                        "provided configuration.",
                    )
                )
    return errors


# ------------------------------------------------------------------ the validate endpoint


def _definition_json(key: ConfigKey) -> dict[str, Any]:
    return {
        "name": key.name,
        "type": key.type.value,
        "required": key.required,
        "default_value": None if key.required else to_string(key.default, key.type),
        "importance": key.importance.value,
        "documentation": key.documentation,
        "group": key.group,
        "width": key.width,
        "display_name": key.display_name or key.name,
        "dependents": list(key.dependents),
        "order": key.order_in_group,
    }


def _value_json(key: ConfigKey, value: ConfigValue, errors: list[str]) -> dict[str, Any]:
    list_type = key.type is ConfigType.LIST
    return {
        "name": key.name,
        "value": to_string(value.value, key.type),
        "recommended_values": [
            to_string(v, ConfigType.STRING if list_type else key.type)
            for v in value.recommended_values
        ],
        "errors": errors,
        "visible": value.visible,
    }


class _Report:
    """ConfigInfos under construction: keys in order, each with its value and errors."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[ConfigKey, ConfigValue, list[str]]] = {}
        self.groups: list[str] = []

    def add(self, key: ConfigKey, value: ConfigValue) -> None:
        if key.name in self.entries:
            self.error(key.name, *value.errors)
            return
        self.entries[key.name] = (key, value, list(value.errors))
        if key.group and key.group not in self.groups:
            self.groups.append(key.group)

    def add_all(self, config_def: ConfigDef, values: list[ConfigValue]) -> None:
        by_name = {v.name: v for v in values}
        for key in config_def.keys.values():
            self.add(key, by_name.get(key.name) or ConfigValue(key.name, None))

    def error(self, name: str, *messages: str) -> None:
        if name not in self.entries:
            self.add(
                ConfigKey(name, ConfigType.STRING, None, group=COMMON_GROUP),
                ConfigValue(name, None),
            )
        errors = self.entries[name][2]
        for m in messages:
            if m not in errors:
                errors.append(m)

    def to_json(self, name: str) -> dict[str, Any]:
        configs = [
            {"definition": _definition_json(k), "value": _value_json(k, v, errs)}
            for k, v, errs in self.entries.values()
        ]
        return {
            "name": name,
            "error_count": sum(len(errs) for _, _, errs in self.entries.values()),
            "groups": list(self.groups),
            "configs": configs,
        }


def validate_connector_config(plugins: Plugins, props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka's ConfigInfos for ``props``: every common, connector, transform, predicate and
    converter key with its value and errors. Raises ``ConfigException`` only when there is no
    connector to validate against (``connector.class`` missing or not found), as Kafka answers
    those with 400 rather than a report."""
    props = {str(k): "" if v is None else str(v) for k, v in props.items()}
    class_name = props.get(CONNECTOR_CLASS)
    if not class_name:
        raise ConfigException(
            CONNECTOR_CLASS, f"Connector config {props} contains no connector type"
        )
    connector_class = plugins.connector_class(class_name)
    full_name = plugins.class_name(CONNECTORS_GROUP, class_name)
    report = _Report()

    enriched, found = enriched_config_def(plugins, _base_def(connector_class), props)
    report.add_all(enriched, enriched.validate(props))
    for p in found:
        if p.error is not None:
            report.error(p.type_key, p.error.message)

    parsed = {name: v.value for name, (_, v, _) in report.entries.items()}
    for name, message in _cross_key_errors(parsed, props, connector_class):
        report.error(name, message)

    try:
        connector = connector_class()
        connector_def = connector.config()
        connector_values = connector.validate(props)
    except Exception as exc:
        connector_def = ConfigDef()
        report.error(
            CONNECTOR_CLASS, f"the connector's validation failed: {type(exc).__name__}: {exc}"
        )
    else:
        report.add_all(connector_def, connector_values)
        for value in connector_values:  # values for keys the connector's def does not list
            if value.name not in connector_def.keys and value.errors:
                report.error(value.name, *value.errors)

    for which in (KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER):
        _validate_converter(plugins, which, props, report)

    for key in _unknown_keys(props, enriched, connector_def, connector_class):
        report.error(key, _unknown_message(key))
    return report.to_json(full_name)


def _validate_converter(
    plugins: Plugins, which: str, props: Mapping[str, str], report: _Report
) -> None:
    class_name = (props.get(which) or "").strip()
    if not class_name:
        return
    try:
        cls = _resolve_converter(plugins, which, class_name)
        own = cls().config()
    except ConfigException as exc:
        report.error(which, exc.message)
        return
    except Exception as exc:
        report.error(which, f"{class_name} could not be instantiated: {exc}")
        return
    prefix = which + "."
    converter_type = {"key.converter": "key", "value.converter": "value"}.get(which, "header")
    sub = {**_prefixed(prefix, props), "converter.type": converter_type}
    values = own.validate(sub)
    by_name = {v.name: v for v in values}
    for key in own.keys.values():
        if key.name == "converter.type":
            continue  # set by the worker, as Kafka's herder sets it
        v = by_name.get(key.name) or ConfigValue(key.name, None)
        report.add(
            _prefix_key(prefix, key, key.group or COMMON_GROUP),
            ConfigValue(prefix + key.name, v.value, v.recommended_values, v.errors, v.visible),
        )
