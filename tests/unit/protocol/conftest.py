"""Fixtures for the protocol tests: Hypothesis strategies for kio's schema dataclasses, and
kafka-python's own request and response classes (a Kafka protocol implementation we did not write).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from functools import cache
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import pytest
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kio.serial.readers import tz_aware_from_i64

from odradek.errors import ErrorCode
from odradek.protocol.fields import FieldSpec, Kind, layout

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_MAX_MS = 10**15  # within timedelta's range and exact through total_seconds()


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        return st.integers(*_INTS[kafka_type])
    match kafka_type:
        case "float64":
            return st.floats(allow_nan=False)
        case "bool":
            return st.booleans()
        case "error_code":
            return st.sampled_from(ErrorCode)
        case "timedelta_i32":
            return st.integers(-(2**31), 2**31 - 1).map(lambda ms: timedelta(milliseconds=ms))
        case "timedelta_i64":
            return st.integers(-_MAX_MS, _MAX_MS).map(lambda ms: timedelta(milliseconds=ms))
        case "datetime_i64":
            return st.integers(0, 253_402_300_799_999).map(tz_aware_from_i64)
        case "uuid":  # the all-zero uuid is read as None, as kio does
            return st.uuids().filter(lambda u: u.int != 0)
        case "string":
            return st.text(max_size=12)
        case "bytes" | "records":
            return st.binary(max_size=40)
    raise AssertionError(f"no strategy for {kafka_type}")


def _field(spec: FieldSpec) -> st.SearchStrategy[Any]:
    if spec.kind is Kind.STRUCT:
        assert spec.struct_type is not None
        value = entity_strategy(spec.struct_type)
    elif spec.kind is Kind.STRUCT_ARRAY:
        assert spec.struct_type is not None
        value = st.lists(entity_strategy(spec.struct_type), max_size=2).map(tuple)
    elif spec.kind is Kind.PRIMITIVE_ARRAY:
        value = st.lists(_primitive(spec.kafka_type or ""), max_size=3).map(tuple)
    else:
        value = _primitive(spec.kafka_type or "")
    if spec.nullable or (spec.kafka_type == "uuid" and spec.kind is Kind.PRIMITIVE):
        value = st.none() | value
    return value


@cache
def entity_strategy(entity_type: type[Any]) -> st.SearchStrategy[Any]:
    """Any value of a kio schema dataclass, tagged fields included."""
    schema = layout(entity_type)
    specs = {s.name: s for s in (*schema.fields, *schema.tagged)}
    names = [f.name for f in dataclasses.fields(entity_type)]
    return st.builds(
        entity_type, **{name: st.deferred(lambda s=specs[name]: _field(s)) for name in names}
    )


@pytest.fixture(scope="session")
def entities() -> Callable[[type[Any]], st.SearchStrategy[Any]]:
    return entity_strategy


def _kafka_python_classes() -> dict[tuple[int, str], type[ApiMessage]]:
    classes: dict[tuple[int, str], type[ApiMessage]] = {}
    for module in (
        kafka.protocol.admin,
        kafka.protocol.consumer,
        kafka.protocol.metadata,
        kafka.protocol.producer,
    ):
        for name in dir(module):
            value = getattr(module, name)
            if (
                isinstance(value, type)
                and issubclass(value, ApiMessage)
                and getattr(value, "_json", None) is not None
            ):
                classes[value.API_KEY, value.type] = value
    return classes


@pytest.fixture(scope="session")
def kafka_python() -> dict[tuple[int, str], type[ApiMessage]]:
    """kafka-python's message classes by (api_key, "request" | "response")."""
    return _kafka_python_classes()
