"""Per-alias keys of a connector's transforms and predicates (Kafka's ``ConnectorConfig.enrich``):
``transforms.<alias>.type``/``.predicate``/``.negate`` and the transform's own keys under
``transforms.<alias>.``; ``predicates.<alias>.type`` and the predicate's keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.api import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigKey,
    ConfigType,
    Importance,
)
from odradek.connect.config_def import invalid
from odradek.connect.connector_config.keys import PREDICATES, TRANSFORMS
from odradek.connect.plugins import Plugins


def prefixed(prefix: str, props: Mapping[str, str]) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def aliases(props: Mapping[str, str], key: str) -> list[str]:
    """The aliases ``key`` lists, each once, in order (duplicates are reported by the key's
    validator)."""
    raw = props.get(key, "") or ""
    return list(dict.fromkeys(a.strip() for a in raw.split(",") if a.strip()))


def prefix_key(prefix: str, key: ConfigKey, group: str) -> ConfigKey:
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
    for key, label, resolve in (
        (TRANSFORMS, "Transforms", plugins.transform_class),
        (PREDICATES, "Predicates", plugins.predicate_class),
    ):
        for alias in aliases(props, key):
            prefix = f"{key}.{alias}."
            p = _Plugin(prefix, prefix + "type", f"{label}: {alias}")
            name = props.get(p.type_key)
            if name:
                try:
                    p.cls = resolve(name, p.type_key)
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
    predicate_aliases = set(aliases(props, PREDICATES))
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
                    result.add(prefix_key(p.prefix, key, p.group))
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
