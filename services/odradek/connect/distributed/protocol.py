"""The bytes distributed workers exchange through the group coordinator: each member's metadata
(in JoinGroup) and each member's assignment (in SyncGroup). Pure: no I/O.

Format: UTF-8 JSON objects, with a ``version`` field (1). This is **not** Kafka's binary
``ConnectProtocol``/``IncrementalCooperativeConnectProtocol``, so a Java Connect worker cannot join
an Odradek group. The protocol name is ours (``PROTOCOL_NAME``), under the protocol type
``connect``: a Java worker joining the same ``group.id`` offers only ``sessioned``/``compatible``/
``default``, shares no protocol with us, and the coordinator answers it
INCONSISTENT_GROUP_PROTOCOL instead of handing either side bytes it cannot read.

Member metadata (JoinGroup ``protocols[].metadata``)::

    {"version": 1, "url": "http://host:8083", "config_offset": 12,
     "connectors": ["a"], "tasks": [["a", 0], ["a", 1]]}

``connectors``/``tasks`` are what the member runs now (its previous assignment, KIP-415), so a
new leader learns the group's state from the members themselves.

Assignment (SyncGroup ``assignments[].assignment``)::

    {"version": 1, "error": 0, "leader": "<member id>", "leader_url": "http://...",
     "config_offset": 12, "connectors": [...], "tasks": [[name, n], ...],
     "revoked_connectors": [...], "revoked_tasks": [[name, n], ...], "delay_ms": 0}

Anything else (not JSON, wrong types, unknown version) raises ``ProtocolError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from odradek.connect.herder import ConnectorTaskId

__all__ = [
    "PROTOCOL_TYPE",
    "PROTOCOL_NAME",
    "VERSION",
    "NO_ERROR",
    "CONFIG_MISMATCH",
    "ProtocolError",
    "MemberMetadata",
    "Assignment",
    "encode_metadata",
    "decode_metadata",
    "encode_assignment",
    "decode_assignment",
]

PROTOCOL_TYPE = "connect"
PROTOCOL_NAME = "odradek-cooperative-v1"
VERSION = 1
MAX_BYTES = 16 * 1024 * 1024  # a metadata or assignment larger than this is refused

# Assignment errors, as Kafka's ConnectProtocol numbers them.
NO_ERROR = 0
CONFIG_MISMATCH = 1  # the leader could not read the config topic as far as a member had


class ProtocolError(ValueError):
    """Bytes that are not a member metadata or an assignment of this protocol."""


def _sorted_tasks(tasks: Iterable[ConnectorTaskId]) -> tuple[ConnectorTaskId, ...]:
    return tuple(sorted(set(tasks)))


@dataclass(frozen=True)
class MemberMetadata:
    """What a member tells the leader when it joins."""

    url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[ConnectorTaskId, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "connectors", tuple(sorted(set(self.connectors))))
        object.__setattr__(self, "tasks", _sorted_tasks(self.tasks))


@dataclass(frozen=True)
class Assignment:
    """What the leader tells one member in SyncGroup."""

    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[ConnectorTaskId, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[ConnectorTaskId, ...] = ()
    delay_ms: int = 0
    error: int = NO_ERROR

    def __post_init__(self) -> None:
        for name in ("connectors", "revoked_connectors"):
            object.__setattr__(self, name, tuple(sorted(set(getattr(self, name)))))
        for name in ("tasks", "revoked_tasks"):
            object.__setattr__(self, name, _sorted_tasks(getattr(self, name)))


def _tasks_json(tasks: Iterable[ConnectorTaskId]) -> list[list[Any]]:
    return [[t.connector, t.task] for t in tasks]


def encode_metadata(metadata: MemberMetadata) -> bytes:
    body = {
        "version": VERSION,
        "url": metadata.url,
        "config_offset": metadata.config_offset,
        "connectors": list(metadata.connectors),
        "tasks": _tasks_json(metadata.tasks),
    }
    return json.dumps(body, separators=(",", ":")).encode()


def encode_assignment(assignment: Assignment) -> bytes:
    body = {
        "version": VERSION,
        "error": assignment.error,
        "leader": assignment.leader,
        "leader_url": assignment.leader_url,
        "config_offset": assignment.config_offset,
        "connectors": list(assignment.connectors),
        "tasks": _tasks_json(assignment.tasks),
        "revoked_connectors": list(assignment.revoked_connectors),
        "revoked_tasks": _tasks_json(assignment.revoked_tasks),
        "delay_ms": assignment.delay_ms,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _object(data: bytes | bytearray | memoryview, what: str) -> dict[str, Any]:
    if len(data) > MAX_BYTES:
        raise ProtocolError(f"{what}: {len(data)} bytes, more than {MAX_BYTES}")
    try:
        body = json.loads(bytes(data))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"{what} is not JSON: {e}") from e
    if not isinstance(body, dict):
        raise ProtocolError(f"{what} is not a JSON object")
    version = body.get("version")
    if type(version) is not int or version < VERSION:
        raise ProtocolError(f"{what}: unknown version {version!r}")
    return body


def _str(body: dict[str, Any], key: str, what: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"{what}: {key!r} must be a string")
    return value


def _int(body: dict[str, Any], key: str, what: str, *, minimum: int) -> int:
    value = body.get(key)
    if type(value) is not int or value < minimum:
        raise ProtocolError(f"{what}: {key!r} must be an integer >= {minimum}")
    return value


def _names(body: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{what}: {key!r} must be a list of strings")
    return tuple(value)


def _tasks(body: dict[str, Any], key: str, what: str) -> tuple[ConnectorTaskId, ...]:
    value = body.get(key, [])
    if not isinstance(value, list):
        raise ProtocolError(f"{what}: {key!r} must be a list of [connector, task]")
    tasks = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[0], str)
            or type(item[1]) is not int
            or item[1] < 0
        ):
            raise ProtocolError(f"{what}: {key!r} holds {item!r}, not [connector, task]")
        tasks.append(ConnectorTaskId(item[0], item[1]))
    return tuple(tasks)


def decode_metadata(data: bytes | bytearray | memoryview) -> MemberMetadata:
    what = "member metadata"
    body = _object(data, what)
    return MemberMetadata(
        url=_str(body, "url", what),
        config_offset=_int(body, "config_offset", what, minimum=-1),
        connectors=_names(body, "connectors", what),
        tasks=_tasks(body, "tasks", what),
    )


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    what = "assignment"
    body = _object(data, what)
    return Assignment(
        error=_int(body, "error", what, minimum=0),
        leader=_str(body, "leader", what),
        leader_url=_str(body, "leader_url", what),
        config_offset=_int(body, "config_offset", what, minimum=-1),
        connectors=_names(body, "connectors", what),
        tasks=_tasks(body, "tasks", what),
        revoked_connectors=_names(body, "revoked_connectors", what),
        revoked_tasks=_tasks(body, "revoked_tasks", what),
        delay_ms=_int(body, "delay_ms", what, minimum=0),
    )
