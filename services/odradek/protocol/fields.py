"""The wire layout of a kio schema dataclass, read once per type, for ``reader`` and ``writer``.

kio generates one frozen dataclass per message and version from Kafka's JSON schemas; each field
carries its wire type in ``metadata["kafka_type"]`` and, if tagged, its tag in ``metadata["tag"]``.
Its Python type says the rest: ``X | None`` is nullable, ``tuple[X, ...]`` is an array, a dataclass
is a nested struct. ``layout`` turns that into a list of ``FieldSpec`` in wire order, plus the
tagged fields sorted by tag (the order Kafka writes them in). The class attribute ``__flexible__``
decides compact encodings and tagged-field sections. ``plan`` is how both directions plan an
entity: consecutive fixed-width fields form one run (one ``struct`` call), each other field a step.

Kafka's rule for tagged fields, kept by both directions: a tagged field equal to its default is not
written, and an absent one reads as its default. ``FieldSpec.default`` is that default.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Container
from dataclasses import MISSING, dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

__all__ = ["Kind", "FieldSpec", "Layout", "layout", "plan"]


S = TypeVar("S")  # a step: a reader's or a writer's


class Kind(enum.Enum):
    PRIMITIVE = "primitive"  # int32, string, uuid, ... (kafka_type says which)
    PRIMITIVE_ARRAY = "primitive array"
    RECORDS = "records"  # a record set: bytes on the wire, kept as a view or a file region
    STRUCT = "struct"
    STRUCT_ARRAY = "struct array"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    kind: Kind
    kafka_type: str | None  # None for structs and struct arrays
    nullable: bool
    tag: int | None
    default: Any  # the tagged-field default; MISSING for untagged fields without one
    struct_type: type[Any] | None  # the nested dataclass for STRUCT and STRUCT_ARRAY


@dataclass(frozen=True, slots=True)
class Layout:
    flexible: bool
    fields: tuple[FieldSpec, ...]  # untagged, in wire order
    tagged: tuple[FieldSpec, ...]  # sorted by tag


def _spec(field: dataclasses.Field[Any], field_type: Any) -> FieldSpec:
    nullable = False
    if get_origin(field_type) is UnionType:
        members = [member for member in get_args(field_type) if member is not NoneType]
        if len(members) != 1:
            raise TypeError(f"{field.name}: unsupported union {field_type}")
        field_type, nullable = members[0], True
    tag = field.metadata.get("tag")
    kafka_type = field.metadata.get("kafka_type")
    struct_type: type[Any] | None = None
    if get_origin(field_type) is tuple:
        item = get_args(field_type)[0]
        if dataclasses.is_dataclass(item):
            kind, struct_type, kafka_type = Kind.STRUCT_ARRAY, item, None
        else:
            kind = Kind.PRIMITIVE_ARRAY
    elif dataclasses.is_dataclass(field_type):
        kind, struct_type, kafka_type = Kind.STRUCT, field_type, None  # type: ignore[assignment]
    elif kafka_type == "records":
        kind = Kind.RECORDS
    else:
        kind = Kind.PRIMITIVE
    if kind is not Kind.STRUCT and kind is not Kind.STRUCT_ARRAY and kafka_type is None:
        raise TypeError(f"{field.name}: no kafka_type in its metadata")
    default = field.default
    if tag is not None and default is MISSING:
        if struct_type is None:
            raise TypeError(f"{field.name}: a tagged field needs a default")
        default = struct_type()  # a struct whose fields all take their defaults
    return FieldSpec(field.name, kind, kafka_type, nullable, tag, default, struct_type)


@cache
def layout(entity_type: type[Any]) -> Layout:
    """The wire layout of ``entity_type``; raises ``TypeError`` for a field it cannot place."""
    hints = get_type_hints(entity_type)  # resolves ``from __future__ import annotations``
    specs = [_spec(field, hints[field.name]) for field in dataclasses.fields(entity_type)]
    flexible = bool(entity_type.__flexible__)
    tagged = tuple(sorted((s for s in specs if s.tag is not None), key=lambda s: s.tag))
    if tagged and not flexible:
        raise TypeError(f"{entity_type.__name__}: tagged fields in a non-flexible version")
    return Layout(flexible, tuple(s for s in specs if s.tag is None), tagged)


def plan(
    schema: Layout,
    fixed_types: Container[str],
    fixed_run_step: Callable[[list[FieldSpec]], S],
    field_step: Callable[[FieldSpec, bool], S],
    tags_step: Callable[[tuple[FieldSpec, ...]], S],
) -> list[S]:
    """The steps that read or write an entity of ``schema``, in wire order: one
    ``fixed_run_step`` per run of consecutive non-nullable primitives whose ``kafka_type`` is
    in ``fixed_types``, one ``field_step`` per other field, then (flexible versions) the tags."""
    steps: list[S] = []
    run: list[FieldSpec] = []
    for spec in schema.fields:
        if spec.kind is Kind.PRIMITIVE and spec.kafka_type in fixed_types and not spec.nullable:
            run.append(spec)
            continue
        if run:
            steps.append(fixed_run_step(run))
            run = []
        steps.append(field_step(spec, schema.flexible))
    if run:
        steps.append(fixed_run_step(run))
    if schema.flexible:
        steps.append(tags_step(schema.tagged))
    return steps
