"""A task's record pipeline, built from its connector's config: key, value and header converters
and the chain of transforms with their predicates.

Converters come from the connector's config (``key.converter`` and ``key.converter.*``) when it
sets them, else from the worker's. ``transforms=a,b`` chains ``transforms.a.type`` then
``transforms.b.type``, each configured with its ``transforms.<alias>.*`` properties (prefix
removed, as Kafka does); ``transforms.<alias>.predicate=p`` applies the transform only to records
``predicates.p.type`` matches (``transforms.<alias>.negate=true``: only to those it does not).

Plugin classes are looked up through ``load_class`` (the worker's ``Plugins``); instances belong
to one task and are used from its thread only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from odradek.connect.api import ConfigException, ConnectRecord
from odradek.connect.runtime.errors import ErrorContext, ErrorHandler, Stage, class_name
from odradek.connect.transforms.chain import TransformationStage
from odradek.connect.worker_config import WorkerConfig


def load_class(plugins: Any, kind: str, name: str, key: str) -> type:
    """The plugin class ``name`` of ``kind`` (connector, converter, header_converter, transform,
    predicate) through ``Plugins.load``; ``ConfigException`` naming ``key`` when there is none."""
    try:
        return plugins.load(kind, name, key)
    except ConfigException:
        raise
    except (LookupError, ImportError, AttributeError, ValueError) as e:
        raise ConfigException(key, f"no {kind} plugin named {name}: {e}") from e


def _split_list(raw: str | None) -> list[str]:
    return [s.strip() for s in (raw or "").split(",") if s.strip()]


def _prefixed(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


class Pipeline:
    """Converters and transforms of one task (see the module doc)."""

    def __init__(
        self,
        key_converter: Any,
        value_converter: Any,
        header_converter: Any,
        steps: list[TransformationStage],
    ):
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.header_converter = header_converter
        self.steps = steps

    @classmethod
    def build(cls, config: Mapping[str, str], worker: WorkerConfig, plugins: Any) -> Pipeline:
        converters = []
        for which in ("key", "value", "header"):
            name = f"{which}.converter"
            if config.get(name):
                class_, props = config[name], _prefixed(config, name + ".")
            else:
                class_, props = worker.converter_config(which)
            kind = "header_converter" if which == "header" else "converter"
            converter = load_class(plugins, kind, class_, name)()
            if which == "header":
                converter.configure(props)
            else:
                converter.configure(props, which == "key")
            converters.append(converter)
        predicates = {}
        for alias in _split_list(config.get("predicates")):
            type_name = config.get(f"predicates.{alias}.type")
            if not type_name:
                raise ConfigException(f"predicates.{alias}.type", "required for every predicate")
            predicate = load_class(plugins, "predicate", type_name, f"predicates.{alias}.type")()
            predicate.configure(_prefixed(config, f"predicates.{alias}."))
            predicates[alias] = predicate
        steps = []
        for alias in _split_list(config.get("transforms")):
            prefix = f"transforms.{alias}."
            type_name = config.get(prefix + "type")
            if not type_name:
                raise ConfigException(prefix + "type", "required for every transform")
            transform = load_class(plugins, "transform", type_name, prefix + "type")()
            transform.configure(_prefixed(config, prefix))
            predicate = None
            if config.get(prefix + "predicate"):
                predicate = predicates.get(config[prefix + "predicate"])
                if predicate is None:
                    raise ConfigException(
                        prefix + "predicate", f"no predicate {config[prefix + 'predicate']!r}"
                    )
            negate = str(config.get(prefix + "negate", "false")).strip().lower() == "true"
            steps.append(TransformationStage(alias, transform, predicate, negate))
        return cls(*converters, steps)

    def convert(
        self,
        handler: ErrorHandler,
        context: ErrorContext,
        key: Callable[[Any], Any],
        value: Callable[[Any], Any],
        headers: Callable[[Any], Any],
    ) -> tuple[Any, Any, Any] | None:
        """(key, value, headers): each callable is given its converter and runs as its own
        stage of ``errors.tolerance``, in that order; None when one failed and the failure was
        tolerated (reported; the record is skipped)."""
        results = []
        for stage, converter, convert in (
            (Stage.KEY_CONVERTER, self.key_converter, key),
            (Stage.VALUE_CONVERTER, self.value_converter, value),
            (Stage.HEADER_CONVERTER, self.header_converter, headers),
        ):
            ok, result = handler.execute(
                stage, class_name(converter), lambda c=converter, f=convert: f(c), context
            )
            if not ok:
                return None
            results.append(result)
        return results[0], results[1], results[2]

    def transform(
        self, record: ConnectRecord, handler: ErrorHandler, context: ErrorContext
    ) -> tuple[bool, ConnectRecord | None]:
        """(ok, record or None when filtered out); ok is False when a step failed and the
        failure was tolerated (reported; the record is skipped)."""
        current: ConnectRecord | None = record
        for step in self.steps:
            if current is None:
                break
            r = current
            ok, current = handler.execute(
                Stage.TRANSFORMATION,
                class_name(step.transform),
                lambda s=step, r=r: s.apply(r),
                context,
            )
            if not ok:
                return False, None
        return True, current

    def close(self) -> None:
        seen = []
        for step in self.steps:
            for obj in (step.transform, step.predicate):
                if obj is not None and obj not in seen:
                    seen.append(obj)
        seen += [self.key_converter, self.value_converter, self.header_converter]
        for obj in seen:
            close = getattr(obj, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):  # closing must not stop the others
                    close()
