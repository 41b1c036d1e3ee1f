"""Plugin discovery: connectors, converters, transforms and predicates found through Python entry
points, and named the way Kafka Connect names them.

Entry point groups (pyproject.toml ``[project.entry-points."<group>"]``; the built-ins are
registered there too, so a third-party package installs with pip the same way):

- ``odradek.connect.connectors``: ``SourceConnector`` / ``SinkConnector`` subclasses;
- ``odradek.connect.converters``: converters and header converters (a class with
  ``from_connect``/``to_connect`` is a converter, one with ``from_connect_header`` a header
  converter; ``JsonConverter`` is both, as in Kafka);
- ``odradek.connect.transforms``: transformations;
- ``odradek.connect.predicates``: predicates.

An entry point's name is the plugin's class name as Kafka spells it
(``org.apache.kafka.connect.file.FileStreamSourceConnector``,
``org.apache.kafka.connect.transforms.InsertField$Value``); its value the Python class
(``package.module:Class``). Several names may point at one class (aliases such as
``io.confluent.connect.jdbc.JdbcSinkConnector``).

A configured class name resolves as Kafka's (``PluginUtils`` aliases): the full name; the simple
name (after the last ``.``); the simple name without its type suffix (``Connector``,
``Converter``, ``Transformation``, ``Predicate``) -- an alias that two plugins share is not an
alias of either; or a Python path ``package.module:Class`` (registered or not). A name that
resolves to nothing, or a plugin whose module fails to import, is a ``ConfigException`` naming
the key and the class. Entry points are read once; modules are imported only when a plugin is
used or listed, so one broken plugin does not hide the others (listing skips it and logs why).

``Plugins()`` reads the installed entry points and adds the built-ins (``builtin_entry_points``)
that the installed metadata lacks, so a source tree installed before a plugin was added still
finds Odradek's own. ``load(kind, name)`` is the runtime's single lookup.

Thread-safety: lookups may run from any thread; the caches only ever gain equal entries.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from odradek.connect.api import ConfigException, Connector, SinkConnector, SourceConnector

log = logging.getLogger(__name__)

CONNECTORS_GROUP = "odradek.connect.connectors"
CONVERTERS_GROUP = "odradek.connect.converters"
TRANSFORMS_GROUP = "odradek.connect.transforms"
PREDICATES_GROUP = "odradek.connect.predicates"
GROUPS = (CONNECTORS_GROUP, CONVERTERS_GROUP, TRANSFORMS_GROUP, PREDICATES_GROUP)


class PluginType(StrEnum):
    """The ``type`` of ``GET /connector-plugins`` entries (Kafka's PluginType, lower case)."""

    SOURCE = "source"
    SINK = "sink"
    CONVERTER = "converter"
    HEADER_CONVERTER = "header_converter"
    TRANSFORMATION = "transformation"
    PREDICATE = "predicate"


_SUFFIXES = {
    CONNECTORS_GROUP: ("Connector",),
    CONVERTERS_GROUP: ("HeaderConverter", "Converter"),
    TRANSFORMS_GROUP: ("Transformation",),
    PREDICATES_GROUP: ("Predicate",),
}
_WHAT = {
    CONNECTORS_GROUP: ("Connector", "connectors"),
    CONVERTERS_GROUP: ("Converter", "converters"),
    TRANSFORMS_GROUP: ("Transformation", "transformations"),
    PREDICATES_GROUP: ("Predicate", "predicates"),
}


@dataclass(frozen=True)
class EntryPointSpec:
    """What Plugins needs of an entry point (``importlib.metadata.EntryPoint`` fits)."""

    name: str
    value: str
    group: str


@dataclass(frozen=True)
class PluginDesc:
    class_name: str
    type: PluginType
    version: str

    def to_json(self) -> dict[str, str]:
        return {"class": self.class_name, "type": self.type.value, "version": self.version}


def _simple_name(name: str) -> str:
    return name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def _pruned(simple: str, group: str) -> str | None:
    for suffix in _SUFFIXES[group]:
        if simple.endswith(suffix) and len(simple) > len(suffix):
            return simple[: -len(suffix)]
    return None


def import_class(path: str) -> Any:
    """``package.module:Class`` (or ``package.module.Class``) -> the class; ImportError if not."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"{path!r} is not a Python path (package.module:Class)")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"module {module_name} has no attribute {attr}") from None
    return obj


class Plugins:
    """The plugins installed: resolves class names to classes and lists them."""

    def __init__(self, entry_points: Iterable[Any] | None = None, *, version: str | None = None):
        if entry_points is None:
            found = importlib.metadata.entry_points()
            # Installed entry points first; the built-ins as well, so a source tree whose
            # package metadata predates a plugin still finds Odradek's own.
            entry_points = [ep for group in GROUPS for ep in found.select(group=group)]
            entry_points += builtin_entry_points()
        self._entries: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
        for ep in entry_points:
            if ep.group in self._entries:
                self._entries[ep.group].setdefault(ep.name, ep)
        self._aliases = {g: self._compute_aliases(g) for g in GROUPS}
        self._loaded: dict[str, Any] = {}
        self._version = version or _package_version()

    def _compute_aliases(self, group: str) -> dict[str, str]:
        """alias -> full name, for aliases that name exactly one class (Kafka's rule)."""
        candidates: dict[str, set[str]] = {}
        values: dict[str, str] = {}
        for name, ep in self._entries[group].items():
            values[name] = ep.value
            simple = _simple_name(name)
            for alias in (simple, _pruned(simple, group), ep.value):
                if alias and alias != name:
                    candidates.setdefault(alias, set()).add(name)
        aliases = {}
        for alias, names in candidates.items():
            targets = {values[n] for n in names}
            if len(targets) == 1 and alias not in self._entries[group]:
                aliases[alias] = min(names)
        return aliases

    # ------------------------------------------------------------------ resolution

    def _load(self, ep: Any, key: str) -> Any:
        cached = self._loaded.get(ep.value)
        if cached is None:
            try:
                cached = import_class(ep.value)
            except Exception as exc:
                raise ConfigException(
                    key,
                    f"the plugin {ep.name} ({ep.value}) could not be loaded: "
                    f"{type(exc).__name__}: {exc}",
                ) from exc
            self._loaded[ep.value] = cached
        return cached

    def resolve(self, group: str, name: str, key: str) -> Any:
        """The class ``name`` resolves to in ``group``; a ``ConfigException`` naming ``key``
        if none does."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigException(key, f"Invalid value {name!r} for configuration {key}: empty")
        name = name.strip()
        entries = self._entries[group]
        ep = entries.get(name)
        if ep is None and name in self._aliases[group]:
            ep = entries[self._aliases[group][name]]
        if ep is not None:
            return self._load(ep, key)
        if ":" in name:
            try:
                return import_class(name)
            except Exception as exc:
                raise ConfigException(
                    key, f"Class {name} could not be loaded: {type(exc).__name__}: {exc}"
                ) from exc
        what, plural = _WHAT[group]
        available = ", ".join(sorted(entries)) or "none"
        raise ConfigException(
            key,
            f"Failed to find any class that implements {what} and which name matches {name}, "
            f"available {plural} are: {available}",
        )

    def connector_class(self, name: str, key: str = "connector.class") -> type[Connector]:
        cls = self.resolve(CONNECTORS_GROUP, name, key)
        if not (isinstance(cls, type) and issubclass(cls, (SourceConnector, SinkConnector))):
            raise ConfigException(key, f"{name} is not a SourceConnector or SinkConnector subclass")
        return cls

    def new_connector(self, name: str, key: str = "connector.class") -> Connector:
        return self._instantiate(self.connector_class(name, key), name, key)

    def converter_class(self, name: str, key: str = "value.converter") -> type:
        cls = self.resolve(CONVERTERS_GROUP, name, key)
        if not hasattr(cls, "from_connect") or not hasattr(cls, "to_connect"):
            raise ConfigException(key, f"{name} is not a Converter (no from_connect/to_connect)")
        return cls

    def new_converter(self, name: str, key: str = "value.converter") -> Any:
        return self._instantiate(self.converter_class(name, key), name, key)

    def header_converter_class(self, name: str, key: str = "header.converter") -> type:
        cls = self.resolve(CONVERTERS_GROUP, name, key)
        if not hasattr(cls, "from_connect_header") or not hasattr(cls, "to_connect_header"):
            raise ConfigException(key, f"{name} is not a HeaderConverter")
        return cls

    def new_header_converter(self, name: str, key: str = "header.converter") -> Any:
        return self._instantiate(self.header_converter_class(name, key), name, key)

    def transform_class(self, name: str, key: str) -> type:
        cls = self.resolve(TRANSFORMS_GROUP, name, key)
        if not hasattr(cls, "apply") or not hasattr(cls, "configure"):
            raise ConfigException(key, f"{name} is not a Transformation (no apply/configure)")
        return cls

    def new_transform(self, name: str, key: str) -> Any:
        return self._instantiate(self.transform_class(name, key), name, key)

    def predicate_class(self, name: str, key: str) -> type:
        cls = self.resolve(PREDICATES_GROUP, name, key)
        if not hasattr(cls, "test") or not hasattr(cls, "configure"):
            raise ConfigException(key, f"{name} is not a Predicate (no test/configure)")
        return cls

    def new_predicate(self, name: str, key: str) -> Any:
        return self._instantiate(self.predicate_class(name, key), name, key)

    _KINDS = {
        "connector": ("connector_class", "connector.class"),
        "converter": ("converter_class", "value.converter"),
        "header_converter": ("header_converter_class", "header.converter"),
        "transform": ("transform_class", "transforms"),
        "transformation": ("transform_class", "transforms"),
        "predicate": ("predicate_class", "predicates"),
    }

    def load(self, kind: str, name: str, key: str | None = None) -> type:
        """The class ``name`` of ``kind`` (``connector``, ``converter``, ``header_converter``,
        ``transform``, ``predicate``): the runtime's one entry point into the lookups above."""
        try:
            method, default_key = self._KINDS[kind]
        except KeyError:
            raise ValueError(f"unknown plugin kind {kind!r}") from None
        return getattr(self, method)(name, key or default_key)

    @staticmethod
    def _instantiate(cls: type, name: str, key: str) -> Any:
        try:
            return cls()
        except Exception as exc:
            raise ConfigException(
                key, f"the plugin {name} could not be instantiated: {type(exc).__name__}: {exc}"
            ) from exc

    def class_name(self, group: str, name: str) -> str:
        """The name ``name``'s class is listed under (its ``KAFKA_NAME``, or its Python path
        when registered so, or the first name registered for it): an alias such as
        ``JdbcSinkConnector`` reports the class it stands for, as Kafka reports the class."""
        name = name.strip()
        entries = self._entries[group]
        full = name if name in entries else self._aliases[group].get(name)
        if full is None:
            return name
        value = entries[full].value
        names = [n for n, ep in entries.items() if ep.value == value]
        try:
            cls = self._load(entries[full], "class")
        except ConfigException:
            cls = None
        return _canonical(cls, names, entries)

    # ------------------------------------------------------------------ listing

    def plugins(self, connectors_only: bool = True) -> list[PluginDesc]:
        """``GET /connector-plugins``: every loadable plugin once, sorted by class then type.
        A plugin whose module fails to import is left out (and logged)."""
        groups = (CONNECTORS_GROUP,) if connectors_only else GROUPS
        out: dict[tuple[str, PluginType], PluginDesc] = {}
        for group in groups:
            by_class: dict[int, list[str]] = {}
            classes: dict[int, Any] = {}
            for name, ep in self._entries[group].items():
                try:
                    cls = self._load(ep, "class")
                except ConfigException as exc:
                    log.warning("plugin %s skipped: %s", name, exc.message)
                    continue
                by_class.setdefault(id(cls), []).append(name)
                classes[id(cls)] = cls
            for ident, names in by_class.items():
                cls = classes[ident]
                name = _canonical(cls, names, self._entries[group])
                for type_ in _types_of(group, cls):
                    out[(name, type_)] = PluginDesc(name, type_, self._version_of(cls))
        return [out[k] for k in sorted(out)]

    def plugin_list_json(self, connectors_only: bool = True) -> list[dict[str, str]]:
        return [p.to_json() for p in self.plugins(connectors_only)]

    def _version_of(self, cls: Any) -> str:
        declared = getattr(cls, "VERSION", None)
        if isinstance(declared, str):
            return declared
        if isinstance(cls, type) and issubclass(cls, Connector):
            try:
                result = cls().version()
            except Exception:
                result = None
            if isinstance(result, str) and result != "unknown":
                return result
        return self._version


def _canonical(cls: Any, names: list[str], entries: dict[str, Any]) -> str:
    """The name a class is listed under: its ``KAFKA_NAME``, else the name that is its entry
    point's Python path, else the first name registered for it."""
    declared = getattr(cls, "KAFKA_NAME", None)
    if declared in names:
        return declared
    for name in names:
        if name == entries[name].value.replace(":", "."):
            return name
    return names[0]


def _types_of(group: str, cls: Any) -> list[PluginType]:
    if group == CONNECTORS_GROUP:
        if isinstance(cls, type) and issubclass(cls, SourceConnector):
            return [PluginType.SOURCE]
        if isinstance(cls, type) and issubclass(cls, SinkConnector):
            return [PluginType.SINK]
        return []
    if group == CONVERTERS_GROUP:
        types = []
        if hasattr(cls, "from_connect") and hasattr(cls, "to_connect"):
            types.append(PluginType.CONVERTER)
        if hasattr(cls, "from_connect_header"):
            types.append(PluginType.HEADER_CONVERTER)
        return types
    if group == TRANSFORMS_GROUP:
        return [PluginType.TRANSFORMATION]
    return [PluginType.PREDICATE]


def _package_version() -> str:
    try:
        return importlib.metadata.version("odradek")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


BUILTIN_CONNECTORS = (
    (
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "odradek.connect.connectors.file:FileStreamSourceConnector",
    ),
    (
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "odradek.connect.connectors.file:FileStreamSinkConnector",
    ),
    (
        "odradek.connect.connectors.sql.SqlSourceConnector",
        "odradek.connect.connectors.sql:SqlSourceConnector",
    ),
    (
        "odradek.connect.connectors.sql.SqlSinkConnector",
        "odradek.connect.connectors.sql:SqlSinkConnector",
    ),
    (
        "io.confluent.connect.jdbc.JdbcSourceConnector",
        "odradek.connect.connectors.sql:SqlSourceConnector",
    ),
    (
        "io.confluent.connect.jdbc.JdbcSinkConnector",
        "odradek.connect.connectors.sql:SqlSinkConnector",
    ),
    (
        "odradek.connect.connectors.files_sink.FileSinkConnector",
        "odradek.connect.connectors.files_sink:FileSinkConnector",
    ),
    (
        "odradek.connect.connectors.files_sink.ParquetSinkConnector",
        "odradek.connect.connectors.files_sink:FileSinkConnector",
    ),
)
"""The connectors Odradek ships, as pyproject.toml registers them (kept equal by a unit test)."""


def builtin_entry_points(connectors: bool = True) -> list[EntryPointSpec]:
    """The built-in plugins as entry points (what pyproject.toml registers), for tests and for
    running from a source tree whose installed metadata predates them. Modules are not imported
    here (the connectors' only when used)."""
    from odradek.connect.converters import BUILTIN_CONVERTERS, BUILTIN_HEADER_CONVERTERS
    from odradek.connect.predicates import builtin_predicates
    from odradek.connect.transforms import builtin_transforms

    specs = []
    if connectors:
        specs += [EntryPointSpec(n, v, CONNECTORS_GROUP) for n, v in BUILTIN_CONNECTORS]
    converters = {**BUILTIN_CONVERTERS, **BUILTIN_HEADER_CONVERTERS}
    for group, classes in (
        (CONVERTERS_GROUP, converters),
        (TRANSFORMS_GROUP, builtin_transforms()),
        (PREDICATES_GROUP, builtin_predicates()),
    ):
        for name, cls in classes.items():
            specs.append(EntryPointSpec(name, f"{cls.__module__}:{cls.__qualname__}", group))
    return specs
