"""The keys and values of Connect's three internal topics, in Kafka Connect's formats.

This module is the one place these formats are written down (as ``zk/paths.py`` is for znodes):
every store, herder and tool encodes and decodes through it. Pure: no I/O.

Values are JSON as Kafka's ``JsonConverter`` writes it with ``schemas.enable=false``: compact
(``separators=(",", ":")``), UTF-8. A null value (``None`` here, an empty Kafka value) is a
tombstone.

Config topic (``config.storage.topic``, one partition, compacted):

==========================  ===============================================================
key                         value
==========================  ===============================================================
``connector-<name>``        ``{"properties":{...}}``; null = the connector was deleted
``task-<name>-<n>``         ``{"properties":{...}}``
``commit-<name>``           ``{"tasks":N}``: the task configs written before it are complete
``target-state-<name>``     ``{"state":"STARTED|PAUSED","state.v2":"STARTED|PAUSED|STOPPED"}``
                            (KIP-875: STOPPED is written as ``"state":"PAUSED"`` for older
                            readers; ``state.v2`` wins when present)
``restart-connector-<name>`` ``{"include-tasks":bool,"only-failed":bool}`` (KIP-745)
``tasks-fencing-<name>``    ``{"task-count":N}`` (KIP-618)
==========================  ===============================================================

Offset topic (``offset.storage.topic``, compacted): key ``["<connector>",{<source partition>}]``,
value ``{<source offset>}``, null value = the offset was reset. Kafka does not order the partition
map's keys; we write them sorted so one source partition always has one key (compaction needs
byte-equal keys), and we compare partitions by ``partition_key`` (order-free), so keys another
writer ordered differently still match.

Status topic (``status.storage.topic``, compacted): ``status-connector-<name>`` and
``status-task-<name>-<n>`` -> ``{"state":"RUNNING","trace":null,"worker_id":"host:port",
"generation":N}``; null = the connector was deleted. ``status-topic-<topic>:connector-<name>``
(KIP-558 active topics) is recognised by ``parse_status_key`` and otherwise ignored.

Connector names may contain ``-``; ``task-a-b-3`` is task 3 of connector ``a-b`` (the task number
is what follows the last ``-``, as Kafka parses it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
RESTART_PREFIX = "restart-connector-"
TASK_COUNT_PREFIX = "tasks-fencing-"
STATUS_CONNECTOR_PREFIX = "status-connector-"
STATUS_TASK_PREFIX = "status-task-"
STATUS_TOPIC_PREFIX = "status-topic-"


class FormatError(ValueError):
    """A key or value that is not in the format its topic holds."""


# ------------------------------------------------------------------ JSON


def dumps(value: Any) -> bytes:
    """Compact JSON, as Kafka's JsonConverter (schemas disabled) writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def loads(data: bytes | None) -> Any:
    """The JSON value of ``data``; None for a tombstone. ``FormatError`` when not JSON."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"not JSON: {data[:80]!r}") from e


def _object(data: bytes, what: str) -> dict[str, Any]:
    value = loads(data)
    if not isinstance(value, dict):
        raise FormatError(f"{what}: expected a JSON object, got {value!r:.80}")
    return value


# ------------------------------------------------------------------ offset topic

PartitionKey = tuple[tuple[str, Any], ...]
"""A source partition in hashable, order-free form (its items sorted, nested values as JSON)."""


def partition_key(partition: Mapping[str, Any]) -> PartitionKey:
    """The hashable form of a source partition: equal partitions give equal keys."""
    return tuple(
        sorted(
            (str(k), v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True))
            for k, v in partition.items()
        )
    )


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """``["<connector>",{<partition>}]``; the partition's keys sorted (see the module doc)."""
    return json.dumps(
        [connector, dict(partition)], separators=(",", ":"), sort_keys=True, ensure_ascii=False
    ).encode()


def parse_offset_key(key: bytes) -> tuple[str, dict[str, Any]]:
    """(connector, partition) of an offset topic key; ``FormatError`` if it is not one."""
    value = loads(key)
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not isinstance(value[0], str)
        or not isinstance(value[1], dict)
    ):
        raise FormatError(f"not an offset key: {key[:80]!r}")
    return value[0], value[1]


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """The offset record's value; None (a tombstone) resets the partition's offset."""
    return None if offset is None else dumps(dict(offset))


def parse_offset_value(value: bytes | None) -> dict[str, Any] | None:
    return None if value is None else _object(value, "offset value")


# ------------------------------------------------------------------ config topic


def connector_config_key(name: str) -> bytes:
    return f"{CONNECTOR_PREFIX}{name}".encode()


def task_config_key(name: str, task: int) -> bytes:
    return f"{TASK_PREFIX}{name}-{task}".encode()


def commit_key(name: str) -> bytes:
    return f"{COMMIT_PREFIX}{name}".encode()


def target_state_key(name: str) -> bytes:
    return f"{TARGET_STATE_PREFIX}{name}".encode()


def restart_key(name: str) -> bytes:
    return f"{RESTART_PREFIX}{name}".encode()


def task_count_key(name: str) -> bytes:
    return f"{TASK_COUNT_PREFIX}{name}".encode()


def properties_value(props: Mapping[str, str] | None) -> bytes | None:
    """``{"properties":{...}}`` for a connector or task config; None deletes a connector."""
    return None if props is None else dumps({"properties": dict(props)})


def commit_value(tasks: int) -> bytes:
    return dumps({"tasks": tasks})


def target_state_value(state: TargetState) -> bytes:
    legacy = TargetState.PAUSED if state is TargetState.STOPPED else state
    return dumps({"state": legacy.value, "state.v2": state.value})


def restart_value(*, include_tasks: bool, only_failed: bool) -> bytes:
    return dumps({"include-tasks": include_tasks, "only-failed": only_failed})


def task_count_value(count: int) -> bytes:
    return dumps({"task-count": count})


@dataclass(frozen=True)
class ConnectorConfigRecord:
    name: str
    properties: dict[str, str] | None  # None: deleted


@dataclass(frozen=True)
class TaskConfigRecord:
    task_id: ConnectorTaskId
    properties: dict[str, str] | None


@dataclass(frozen=True)
class CommitRecord:
    name: str
    tasks: int | None  # None: tombstone (written when a connector is deleted)


@dataclass(frozen=True)
class TargetStateRecord:
    name: str
    state: TargetState | None  # None: tombstone


@dataclass(frozen=True)
class RestartRecord:
    name: str
    include_tasks: bool
    only_failed: bool


@dataclass(frozen=True)
class TaskCountRecord:
    name: str
    task_count: int | None


ConfigRecord = (
    ConnectorConfigRecord
    | TaskConfigRecord
    | CommitRecord
    | TargetStateRecord
    | RestartRecord
    | TaskCountRecord
)


def _split_task(rest: str) -> tuple[str, int]:
    name, sep, number = rest.rpartition("-")
    if not sep or not name or not number.isdigit():
        raise FormatError(f"not a task key: {rest!r}")
    return name, int(number)


def _properties(value: bytes | None, what: str) -> dict[str, str] | None:
    if value is None:
        return None
    props = _object(value, what).get("properties")
    if not isinstance(props, dict):
        raise FormatError(f"{what}: no properties object")
    return {str(k): v if isinstance(v, str) or v is None else str(v) for k, v in props.items()}


def _int_field(value: bytes, field: str, what: str) -> int:
    n = _object(value, what).get(field)
    if not isinstance(n, int) or isinstance(n, bool):
        raise FormatError(f"{what}: {field} is not an integer")
    return n


def parse_config_record(key: bytes, value: bytes | None) -> ConfigRecord | None:
    """The typed record of a config topic entry; None for a key this worker does not know
    (``session-key`` and future kinds: ignored, as Kafka ignores what it does not know).
    ``FormatError`` for a known key with a malformed value."""
    try:
        k = key.decode()
    except UnicodeDecodeError:
        return None
    # target-state- and tasks-fencing- before task-: the longer prefixes share letters.
    if k.startswith(TARGET_STATE_PREFIX):
        name = k[len(TARGET_STATE_PREFIX) :]
        if value is None:
            return TargetStateRecord(name, None)
        body = _object(value, k)
        raw = body.get("state.v2", body.get("state"))
        try:
            return TargetStateRecord(name, TargetState(raw))
        except ValueError as e:
            raise FormatError(f"{k}: unknown target state {raw!r}") from e
    if k.startswith(TASK_COUNT_PREFIX):
        name = k[len(TASK_COUNT_PREFIX) :]
        count = None if value is None else _int_field(value, "task-count", k)
        return TaskCountRecord(name, count)
    if k.startswith(CONNECTOR_PREFIX):
        return ConnectorConfigRecord(k[len(CONNECTOR_PREFIX) :], _properties(value, k))
    if k.startswith(TASK_PREFIX):
        name, task = _split_task(k[len(TASK_PREFIX) :])
        return TaskConfigRecord(ConnectorTaskId(name, task), _properties(value, k))
    if k.startswith(COMMIT_PREFIX):
        name = k[len(COMMIT_PREFIX) :]
        return CommitRecord(name, None if value is None else _int_field(value, "tasks", k))
    if k.startswith(RESTART_PREFIX):
        if value is None:
            return None
        body = _object(value, k)
        return RestartRecord(
            k[len(RESTART_PREFIX) :],
            bool(body.get("include-tasks", False)),
            bool(body.get("only-failed", False)),
        )
    return None


# ------------------------------------------------------------------ status topic


def status_connector_key(name: str) -> bytes:
    return f"{STATUS_CONNECTOR_PREFIX}{name}".encode()


def status_task_key(name: str, task: int) -> bytes:
    return f"{STATUS_TASK_PREFIX}{name}-{task}".encode()


def status_value(entry: StatusEntry | None) -> bytes | None:
    if entry is None:
        return None
    return dumps(
        {
            "state": entry.state.value,
            "trace": entry.trace,
            "worker_id": entry.worker_id,
            "generation": entry.generation,
        }
    )


def parse_status_value(value: bytes | None) -> StatusEntry | None:
    if value is None:
        return None
    body = _object(value, "status value")
    try:
        state = State(body.get("state"))
    except ValueError as e:
        raise FormatError(f"status value: unknown state {body.get('state')!r}") from e
    trace = body.get("trace")
    generation = body.get("generation", 0)
    return StatusEntry(
        state=state,
        worker_id=str(body.get("worker_id", "")),
        trace=trace if isinstance(trace, str) else None,
        generation=generation if isinstance(generation, int) else 0,
    )


@dataclass(frozen=True)
class ConnectorStatusKey:
    name: str


@dataclass(frozen=True)
class TaskStatusKey:
    task_id: ConnectorTaskId


@dataclass(frozen=True)
class TopicStatusKey:
    topic: str
    connector: str


StatusKey = ConnectorStatusKey | TaskStatusKey | TopicStatusKey


def parse_status_key(key: bytes) -> StatusKey | None:
    """What a status topic key names; None for a key this worker does not know."""
    try:
        k = key.decode()
    except UnicodeDecodeError:
        return None
    if k.startswith(STATUS_CONNECTOR_PREFIX):
        return ConnectorStatusKey(k[len(STATUS_CONNECTOR_PREFIX) :])
    if k.startswith(STATUS_TASK_PREFIX):
        try:
            name, task = _split_task(k[len(STATUS_TASK_PREFIX) :])
        except FormatError:
            return None
        return TaskStatusKey(ConnectorTaskId(name, task))
    if k.startswith(STATUS_TOPIC_PREFIX):
        topic, sep, rest = k[len(STATUS_TOPIC_PREFIX) :].partition(":" + CONNECTOR_PREFIX)
        if sep:
            return TopicStatusKey(topic, rest)
    return None
