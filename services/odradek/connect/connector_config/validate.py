"""The validate endpoint's answer (Kafka's ConfigInfos): every common, connector, transform,
predicate and converter key with its definition, value and errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConfigException, ConfigKey, ConfigType, ConfigValue
from odradek.connect.config_def import to_string
from odradek.connect.connector_config.enrich import enriched_config_def, prefix_key, prefixed
from odradek.connect.connector_config.keys import (
    COMMON_GROUP,
    CONNECTOR_CLASS,
    HEADER_CONVERTER,
    KEY_CONVERTER,
    VALUE_CONVERTER,
)
from odradek.connect.connector_config.parsed import (
    base_def,
    cross_key_errors,
    resolve_converter,
    unknown_keys,
    unknown_message,
)
from odradek.connect.plugins import CONNECTORS_GROUP, Plugins


def config_key_info(key: ConfigKey) -> dict[str, Any]:
    """Kafka's ``ConfigKeyInfo`` JSON. Kafka's class takes ``order_in_group`` in its constructor
    but serializes the getter, ``order``: what clients read is ``order``."""
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


def config_value_info(key: ConfigKey, value: ConfigValue, errors: list[str]) -> dict[str, Any]:
    """Kafka's ``ConfigValueInfo`` JSON (values as strings, passwords ``[hidden]``)."""
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
            {"definition": config_key_info(k), "value": config_value_info(k, v, errs)}
            for k, v, errs in self.entries.values()
        ]
        return {
            "name": name,
            "error_count": sum(len(errs) for _, _, errs in self.entries.values()),
            "groups": list(self.groups),
            "configs": configs,
        }


def validate_connector_config(
    plugins: Plugins,
    props: Mapping[str, str],
    extra_errors: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Kafka's ConfigInfos for ``props``: every common, connector, transform, predicate and
    converter key with its value and errors. Raises ``ConfigException`` only when there is no
    connector to validate against (``connector.class`` missing or not found), as Kafka answers
    those with 400 rather than a report. ``extra_errors`` (key, message) are what the worker
    found (client overrides its policy refuses, as Kafka's ``validateClientOverrides``)."""
    props = {str(k): "" if v is None else str(v) for k, v in props.items()}
    class_name = props.get(CONNECTOR_CLASS)
    if not class_name:
        raise ConfigException(CONNECTOR_CLASS, "Connector config contains no connector type")
    connector_class = plugins.connector_class(class_name)
    full_name = plugins.class_name(CONNECTORS_GROUP, class_name)
    report = _Report()

    enriched, found = enriched_config_def(plugins, base_def(connector_class), props)
    report.add_all(enriched, enriched.validate(props))
    for p in found:
        if p.error is not None:
            report.error(p.type_key, p.error.message)

    parsed = {name: v.value for name, (_, v, _) in report.entries.items()}
    for name, message in cross_key_errors(parsed, props, connector_class):
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

    for key in unknown_keys(props, enriched, connector_def, connector_class):
        report.error(key, unknown_message(key))
    for key, message in extra_errors:
        report.error(key, message)
    return report.to_json(full_name)


def _validate_converter(
    plugins: Plugins, which: str, props: Mapping[str, str], report: _Report
) -> None:
    class_name = (props.get(which) or "").strip()
    if not class_name:
        return
    try:
        cls = resolve_converter(plugins, which, class_name)
        own = cls().config()
    except ConfigException as exc:
        report.error(which, exc.message)
        return
    except Exception as exc:
        report.error(which, f"{class_name} could not be instantiated: {exc}")
        return
    prefix = which + "."
    converter_type = {"key.converter": "key", "value.converter": "value"}.get(which, "header")
    sub = {**prefixed(prefix, props), "converter.type": converter_type}
    values = own.validate(sub)
    by_name = {v.name: v for v in values}
    for key in own.keys.values():
        if key.name == "converter.type":
            continue  # set by the worker, as Kafka's herder sets it
        v = by_name.get(key.name) or ConfigValue(key.name, None)
        report.add(
            prefix_key(prefix, key, key.group or COMMON_GROUP),
            ConfigValue(prefix + key.name, v.value, v.recommended_values, v.errors, v.visible),
        )
