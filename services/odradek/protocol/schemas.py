"""Which message schema, and which header version, a given ``(api_key, api_version)`` uses.

Everything here is derived from kio's generated schemas (``kio.index``), never from a hand table:
a request schema's ``__header_schema__`` says whether its header is v1 or v2, a response schema's
says v0 or v1. ApiVersions is the one API whose response header stays v0 when its body is flexible;
kio's schemas already say so, and this module only passes it on.

Versions kio does not know still get an answer, because a header must parse even for a version we
refuse (KIP-511): Kafka's ``flexibleVersions`` are open-ended (``"9+"``), so a version above the
highest one known is flexible exactly when that highest one is, and a version below the lowest one
known predates flexible versions. An unknown API key is read with a v1 header (its body is never
parsed, only its correlation id is needed).

APIs kio 0.6.5 lacks (Kafka 4 dropped the ZooKeeper-era inter-broker ones: LeaderAndIsr,
StopReplica, UpdateMetadata, ControlledShutdown) can be added with ``register``: any frozen
dataclass written in kio's style (``kafka_type`` and ``tag`` field metadata) is read and written by
``reader`` and ``writer``.

Pure lookups; caches are keyed only by versions that have a schema (the keys of a hostile request
cannot grow them). Safe from any thread once ``register`` calls are done, at import time.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

__all__ = [
    "SchemaNotFoundError",
    "register",
    "request_schema",
    "response_schema",
    "known_versions",
    "is_flexible",
    "request_header_version",
    "response_header_version",
]

_extra: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {}
_known: dict[int, frozenset[int]] = {
    api_key: frozenset(schema_name_map[name]) for api_key, name in api_key_map.items()
}


class SchemaNotFoundError(LookupError):
    """Neither kio nor ``register`` knows this ``(api_key, api_version)``."""


def register(request_type: type[Any], response_type: type[Any]) -> None:
    """Add a request/response pair kio lacks. Call at import time, before any lookup."""
    key = (int(request_type.__api_key__), int(request_type.__version__))
    if (int(response_type.__api_key__), int(response_type.__version__)) != key:
        raise ValueError(f"{request_type.__name__} and {response_type.__name__} do not pair up")
    _extra[key] = (request_type, response_type)
    _known[key[0]] = known_versions(key[0]) | {key[1]}
    request_schema.cache_clear()
    response_schema.cache_clear()


@cache
def request_schema(api_key: int, api_version: int) -> type[Any]:
    """The request body's dataclass. Raises ``SchemaNotFoundError``."""
    if (api_key, api_version) in _extra:
        return _extra[api_key, api_version][0]
    if api_version not in known_versions(api_key):
        raise SchemaNotFoundError(f"no request schema for api key {api_key} v{api_version}")
    return load_request_schema(api_key, api_version)


@cache
def response_schema(api_key: int, api_version: int) -> type[Any]:
    """The response body's dataclass. Raises ``SchemaNotFoundError``."""
    if (api_key, api_version) in _extra:
        return _extra[api_key, api_version][1]
    if api_version not in known_versions(api_key):
        raise SchemaNotFoundError(f"no response schema for api key {api_key} v{api_version}")
    return load_response_schema(api_key, api_version)


def known_versions(api_key: int) -> frozenset[int]:
    """Every version of ``api_key`` with a schema (kio's, or registered)."""
    return _known.get(api_key, frozenset())


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether the body (and header v2/v1) use compact encodings and tagged fields."""
    versions = known_versions(api_key)
    if not versions:
        return False
    if api_version in versions:
        return bool(request_schema(api_key, api_version).__flexible__)
    highest = max(versions)
    if api_version > highest:
        return bool(request_schema(api_key, highest).__flexible__)
    return False


def request_header_version(api_key: int, api_version: int) -> int:
    """1 or 2: the request header a client sends for this API version."""
    if api_version in known_versions(api_key):
        return int(request_schema(api_key, api_version).__header_schema__.__version__)
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """0 or 1: the response header; ApiVersions answers with v0 at every version."""
    if api_version in known_versions(api_key):
        return int(response_schema(api_key, api_version).__header_schema__.__version__)
    return 0
