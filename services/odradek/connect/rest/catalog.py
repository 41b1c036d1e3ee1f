"""``/connector-plugins`` over ``odradek.connect.plugins.Plugins``: the plugin list as Kafka answers
it, and a plugin's config keys as Kafka's ``ConfigKeyInfo`` JSON (KIP-769).

A plugin's keys come from an instance's ``config()`` (connectors, converters, transforms and
predicates all have one in Kafka's API), made on the caller's thread: plugin constructors must not
block. Pure otherwise.
"""

from __future__ import annotations

from typing import Any

from odradek.connect.api import ConfigDef, ConfigException, ConfigKey
from odradek.connect.config_def import to_string
from odradek.connect.herder import BadRequestError, NotFoundError

__all__ = ["PluginsCatalog", "config_key_info"]


def config_key_info(key: ConfigKey) -> dict[str, Any]:
    """Kafka's ``ConfigKeyInfo`` for one key."""
    return {
        "name": key.name,
        "type": key.type.value,
        "required": key.required,
        "default_value": None if key.required else to_string(key.default, key.type),
        "importance": key.importance.value,
        "documentation": key.documentation,
        "group": key.group,
        "order_in_group": key.order_in_group,
        "width": key.width,
        "display_name": key.display_name or key.name,
        "dependents": list(key.dependents),
    }


class PluginsCatalog:
    """A ``rest.app.PluginCatalog`` over the installed plugins."""

    _LOOKUPS = ("connector_class", "converter_class", "transform_class", "predicate_class")

    def __init__(self, plugins: Any) -> None:
        self._plugins = plugins

    def connector_plugins(self, *, connectors_only: bool) -> list[dict[str, Any]]:
        return self._plugins.plugin_list_json(connectors_only)

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        cls = None
        for lookup in self._LOOKUPS:
            try:
                cls = getattr(self._plugins, lookup)(plugin, "plugin")
                break
            except ConfigException:
                continue
        if cls is None:
            raise NotFoundError(f"Unknown plugin {plugin}.")
        try:
            definition = cls().config()
        except Exception as exc:  # noqa: BLE001 - a plugin's own failure, reported to the user
            raise BadRequestError(
                f"the plugin {plugin} could not describe its config: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(definition, ConfigDef):
            return []
        return [config_key_info(k) for k in definition.keys.values()]
