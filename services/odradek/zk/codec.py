"""JSON reading and writing for znode data, with errors that name the znode.

Kafka writes znode data with Jackson, compactly (no spaces); ``encode_json`` does the same, so
``zkCli get`` shows what Kafka's own brokers would show. ``JsonObject`` reads one JSON object
field by field and raises ``ZkDataError`` (with the path) on anything unexpected: a missing
field, a wrong type, a number out of range. Booleans are not numbers here, although Python's
``bool`` is an ``int``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from odradek.common.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from odradek.zk.errors import ZkDataError

__all__ = [
    "JsonObject",
    "build",
    "check_id",
    "decode_decimal",
    "decode_replicas",
    "encode_json",
    "frozen_replicas",
    "is_topic_id",
    "random_topic_id",
    "replicas_json",
]


# Znode data is at most 1 MiB (ZooKeeper's jute.maxbuffer); Kafka's own znodes are far smaller.
ZNODE_DATA_BYTES_MAX = 1024 * 1024

_DECIMAL = re.compile(r"-?[0-9]{1,20}")
_MISSING: Any = object()
T = TypeVar("T")


def encode_json(value: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON, as Kafka's ``Json.encodeAsBytes`` writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_decimal(text: str, path: str, what: str, lo: int, hi: int) -> int:
    """An integer written as a decimal string (``"1700000000000"``), within ``[lo, hi]``."""
    if not isinstance(text, str) or _DECIMAL.fullmatch(text) is None:
        raise ZkDataError(f"{what} must be a decimal string, got {text!r}", path=path)
    value = int(text)
    if not lo <= value <= hi:
        raise ZkDataError(f"{what} {value} is outside [{lo}, {hi}]", path=path)
    return value


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class JsonObject:
    """One JSON object read from a znode; every accessor checks the type of what it returns."""

    def __init__(self, fields: Mapping[str, Any], path: str, where: str = "") -> None:
        self._fields = fields
        self.path = path
        self._where = where

    @classmethod
    def parse(cls, data: bytes | None, path: str) -> JsonObject:
        if data is None or len(data) == 0:
            raise ZkDataError("empty znode data, expected a JSON object", path=path)
        if len(data) > ZNODE_DATA_BYTES_MAX:
            raise ZkDataError(f"{len(data)} bytes is more than a znode can hold", path=path)
        try:
            value = json.loads(bytes(data).decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ZkDataError(f"not valid UTF-8 JSON: {exc}", path=path) from exc
        if not isinstance(value, dict):
            raise ZkDataError(f"expected a JSON object, got {_type_name(value)}", path=path)
        return cls(value, path)

    def _error(self, name: str, message: str) -> ZkDataError:
        return ZkDataError(f"field {self._where}{name!r} {message}", path=self.path)

    def _get(self, name: str, default: Any) -> Any:
        if name in self._fields:
            return self._fields[name]
        if default is _MISSING:
            raise self._error(name, "is missing")
        return default

    def __contains__(self, name: str) -> bool:
        return name in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def integer(
        self, name: str, *, default: Any = _MISSING, lo: int = INT32_MIN, hi: int = INT32_MAX
    ) -> int:
        value = self._get(name, default)
        if value is default and default is not _MISSING:
            return value
        return self.check_int(name, value, lo, hi)

    def check_int(self, name: str, value: Any, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._error(name, f"must be an integer, got {_type_name(value)}")
        if not lo <= value <= hi:
            raise self._error(name, f"{value} is outside [{lo}, {hi}]")
        return value

    def string(self, name: str, *, default: Any = _MISSING) -> str:
        value = self._get(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str):
            raise self._error(name, f"must be a string, got {_type_name(value)}")
        return value

    def decimal_string(
        self, name: str, *, default: Any = _MISSING, lo: int = INT64_MIN, hi: int = INT64_MAX
    ) -> int:
        """An integer Kafka writes as a string (``"timestamp":"1603608219071"``)."""
        value = self._get(name, default)
        if value is default and default is not _MISSING:
            return value
        return decode_decimal(value, self.path, f"field {self._where}{name!r}", lo, hi)

    def integers(self, name: str, *, lo: int = INT32_MIN, hi: int = INT32_MAX) -> tuple[int, ...]:
        return self.check_integers(name, self._get(name, _MISSING), lo, hi)

    def check_integers(
        self, name: str, value: Any, lo: int = INT32_MIN, hi: int = INT32_MAX
    ) -> tuple[int, ...]:
        if not isinstance(value, list):
            raise self._error(name, f"must be an array, got {_type_name(value)}")
        return tuple(self.check_int(f"{name}[{i}]", item, lo, hi) for i, item in enumerate(value))

    def child(self, name: str, *, optional: bool = False) -> JsonObject:
        """A nested object; with ``optional`` a missing one reads as ``{}``."""
        value = self._get(name, {} if optional else _MISSING)
        if not isinstance(value, dict):
            raise self._error(name, f"must be an object, got {_type_name(value)}")
        return JsonObject(value, self.path, f"{self._where}{name}.")

    def objects(self, name: str) -> list[JsonObject]:
        """An array of objects (``"partitions":[{"topic":"t","partition":0}]``)."""
        value = self._get(name, _MISSING)
        if not isinstance(value, list):
            raise self._error(name, f"must be an array, got {_type_name(value)}")
        items = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self._error(f"{name}[{i}]", f"must be an object, got {_type_name(item)}")
            items.append(JsonObject(item, self.path, f"{self._where}{name}[{i}]."))
        return items

    def raw(self, name: str) -> Any:
        return self._fields[name]

    def version(self, lo: int, hi: int) -> int:
        """Kafka's ``"version"`` field, an integer (or, in ``/cluster/id``, a string)."""
        value = self._get("version", _MISSING)
        if isinstance(value, str):
            return decode_decimal(value, self.path, "field 'version'", lo, hi)
        version = self.check_int("version", value)
        if not lo <= version <= hi:
            raise self._error("version", f"{version} is not a supported version ({lo}..{hi})")
        return version


# --- helpers shared by the formats in paths.py ----------------------------------------------


def check_id(what: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        raise ValueError(f"{what} must be an integer in [0, {INT32_MAX}], got {value!r}")
    return value


def build(path: str, make: Callable[[], T]) -> T:
    """Construct a decoded value; the constructor's ``ValueError`` becomes a ``ZkDataError``."""
    try:
        return make()
    except ValueError as exc:
        raise ZkDataError(str(exc), path=path) from exc


def frozen_replicas(value: Mapping[int, Iterable[int]], what: str) -> Mapping[int, tuple[int, ...]]:
    items = {}
    for partition, replicas in value.items():
        items[check_id(f"{what} partition", partition)] = tuple(
            check_id(f"{what} replica", replica) for replica in replicas
        )
    return MappingProxyType(dict(sorted(items.items())))


def replicas_json(value: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(partition): list(replicas) for partition, replicas in value.items()}


def decode_replicas(obj: JsonObject) -> dict[int, tuple[int, ...]]:
    replicas = {}
    for key in obj:
        partition = decode_decimal(key, obj.path, "partition", 0, INT32_MAX)
        replicas[partition] = obj.integers(key, lo=0)
    return replicas


# Kafka's Uuid string form: 16 bytes in URL-safe base64 without padding.
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_RESERVED_TOPIC_IDS = ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ")  # ZERO, METADATA
TOPIC_ID_ATTEMPTS_MAX = 100


def is_topic_id(topic_id: str) -> bool:
    if _TOPIC_ID.fullmatch(topic_id) is None:
        return False
    raw = base64.urlsafe_b64decode(topic_id + "==")
    return len(raw) == 16 and base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == topic_id


def random_topic_id(random_bytes: Callable[[int], bytes] = os.urandom) -> str:
    """A new topic id as Kafka's ``Uuid.randomUuid`` makes one (never starting with '-')."""
    for _ in range(TOPIC_ID_ATTEMPTS_MAX):
        raw = uuid.UUID(bytes=random_bytes(16), version=4).bytes
        topic_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not topic_id.startswith("-") and topic_id not in _RESERVED_TOPIC_IDS:
            return topic_id
    raise RuntimeError(f"no usable topic id in {TOPIC_ID_ATTEMPTS_MAX} random draws")
