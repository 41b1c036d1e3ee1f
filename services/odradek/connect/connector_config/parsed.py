"""A connector's configuration parsed for the runtime: typed common keys, the connector class,
the transform chain and the converters it names. Parsing raises ``ConfigException`` naming the
first missing, bad or unknown key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    Connector,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from odradek.connect.config_def import parse_value
from odradek.connect.connector_config.enrich import aliases, enriched_config_def, prefixed
from odradek.connect.connector_config.keys import (
    CLIENT_OVERRIDE_PREFIXES,
    CONNECTOR_CLASS,
    DLQ_TOPIC_NAME,
    ERRORS_TOLERANCE,
    EXACTLY_ONCE_SUPPORT,
    HEADER_CONVERTER,
    KEY_CONVERTER,
    NAME,
    PREDICATES,
    TASKS_MAX,
    TOPICS,
    TOPICS_REGEX,
    TRANSACTION_BOUNDARY,
    TRANSFORMS,
    VALUE_CONVERTER,
    sink_config_def,
    source_config_def,
    unique_aliases,
)
from odradek.connect.plugins import CONNECTORS_GROUP, Plugins
from odradek.connect.transforms.chain import TransformationChain, TransformationStage


def _connector_kind(cls: type) -> str:
    return "sink" if issubclass(cls, SinkConnector) else "source"


def base_def(cls: type) -> ConfigDef:
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
            raise ConfigException(CONNECTOR_CLASS, "Connector config contains no connector type")
        connector_class = plugins.connector_class(class_name)
        base = base_def(connector_class)
        for key in (TRANSFORMS, PREDICATES):
            unique_aliases(key, parse_value(key, ConfigType.LIST, props.get(key, "")))
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
        for name, message in cross_key_errors(values, props, connector_class):
            raise ConfigException(name, message)
        connector_def = _connector_config_def(connector_class)
        connector_def.parse(props)
        unknown = unknown_keys(props, enriched, connector_def, connector_class)
        if unknown:
            raise ConfigException(unknown[0], unknown_message(unknown[0]))
        for which in (KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER):
            if values.get(which):
                _check_converter_props(plugins, which, values[which], props)
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
        return prefixed(f"{client}.override.", self.props)

    def transformation_chain(self) -> TransformationChain:
        """New, configured transforms and predicates (one chain per task: they keep state)."""
        predicates: dict[str, Any] = {}
        for alias in self.values[PREDICATES]:
            prefix = f"{PREDICATES}.{alias}."
            predicate = self.plugins.new_predicate(self.props[prefix + "type"], prefix + "type")
            _configure(predicate, prefixed(prefix, self.props), prefix)
            predicates[alias] = predicate
        stages = []
        for alias in self.values[TRANSFORMS]:
            prefix = f"{TRANSFORMS}.{alias}."
            transform = self.plugins.new_transform(self.props[prefix + "type"], prefix + "type")
            own = {
                k: v
                for k, v in prefixed(prefix, self.props).items()
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
        converter_props = prefixed(which + ".", props)
    elif worker_class:
        class_name = worker_class
        converter_props = dict(worker_props or {})
    else:
        return None
    converter = resolve_converter(plugins, which, class_name)()
    if which == HEADER_CONVERTER:
        _configure(converter, {**converter_props, "converter.type": "header"}, which + ".")
    else:
        is_key = which == KEY_CONVERTER
        try:
            converter.configure(converter_props, is_key)
        except ConfigException as exc:
            raise ConfigException(f"{which}.{exc.name}", exc.message) from exc
    return converter


def _check_converter_props(
    plugins: Plugins, which: str, class_name: str, props: Mapping[str, str]
) -> None:
    """The converter resolves and its ``<which>.*`` keys parse (errors name the prefixed key)."""
    cls = resolve_converter(plugins, which, class_name)
    try:
        own = cls().config()
    except Exception as exc:
        raise ConfigException(which, f"{class_name} could not describe its config: {exc}") from exc
    converter_type = {KEY_CONVERTER: "key", VALUE_CONVERTER: "value"}.get(which, "header")
    try:
        own.parse({**prefixed(which + ".", props), "converter.type": converter_type})
    except ConfigException as exc:
        raise ConfigException(f"{which}.{exc.name}", exc.message) from exc


def resolve_converter(plugins: Plugins, which: str, class_name: str) -> type:
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


def unknown_message(key: str) -> str:
    return (
        f"Unknown configuration key {key}: neither a Connect key nor one of the connector's "
        "(Odradek refuses keys it does not implement)"
    )


def unknown_keys(
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
    prefixes += [f"{TRANSFORMS}.{a}." for a in aliases(props, TRANSFORMS)]
    prefixes += [f"{PREDICATES}.{a}." for a in aliases(props, PREDICATES)]
    return sorted(
        k
        for k in props
        if k not in enriched.keys
        and k not in connector_def.keys
        and not any(k.startswith(p) for p in prefixes)
    )


def cross_key_errors(
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
