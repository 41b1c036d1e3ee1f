"""The herder: what the REST API asks of a worker (standalone) or of a group of them
(distributed). Kafka Connect's ``Herder``, as a ``typing.Protocol`` of coroutines.

Every method either returns what Kafka Connect's REST API answers with, or raises one of the
``HerderError`` subclasses below, each with the HTTP status Kafka Connect gives it; the REST layer
turns them into Kafka Connect's JSON error (``{"error_code": 404, "message": "..."}``).
``NotLeaderError`` is not an answer: the REST layer forwards the request to ``leader_url``
(distributed mode: config writes, task configs and restarts are the leader's).

Target states (what the user asked: ``TargetState``) are kept apart from observed states (what a
worker reports: ``State``), as Kafka's config and status topics keep them apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class TargetState(StrEnum):
    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class State(StrEnum):
    """Observed states of a connector or task (Kafka's AbstractStatus.State)."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


class ConnectorType(StrEnum):
    SOURCE = "source"
    SINK = "sink"
    UNKNOWN = "unknown"


@dataclass(frozen=True, order=True)
class ConnectorTaskId:
    connector: str
    task: int

    def to_json(self) -> dict[str, Any]:
        return {"connector": self.connector, "task": self.task}


@dataclass(frozen=True)
class ConnectorInfo:
    """``GET /connectors/{name}``: name, config, task ids, type."""

    name: str
    config: Mapping[str, str]
    tasks: Sequence[ConnectorTaskId]
    type: ConnectorType

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": dict(self.config),
            "tasks": [t.to_json() for t in self.tasks],
            "type": self.type.value,
        }


@dataclass(frozen=True)
class StatusEntry:
    """One connector's or task's observed state, as the status topic stores it."""

    state: State
    worker_id: str
    trace: str | None = None
    generation: int = 0


@dataclass(frozen=True)
class ConnectorStateInfo:
    """``GET /connectors/{name}/status``."""

    name: str
    connector: StatusEntry
    tasks: Mapping[int, StatusEntry] = field(default_factory=dict)
    type: ConnectorType = ConnectorType.UNKNOWN

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connector": _entry_json(self.connector),
            "tasks": [{"id": i, **_entry_json(e)} for i, e in sorted(self.tasks.items())],
            "type": self.type.value,
        }


def _entry_json(entry: StatusEntry) -> dict[str, Any]:
    body: dict[str, Any] = {"state": entry.state.value, "worker_id": entry.worker_id}
    if entry.trace:
        body["trace"] = entry.trace
    return body


# ------------------------------------------------------------------ errors


class HerderError(Exception):
    """An answer of the REST API that is an error: ``status`` is its HTTP status."""

    status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadRequestError(HerderError):
    status = 400


class NotFoundError(HerderError):
    status = 404


class AlreadyExistsError(HerderError):
    status = 409


class ConflictError(HerderError):
    """A rebalance or a concurrent config change is in progress: retry later (409, as Kafka's)."""

    status = 409


class NotLeaderError(HerderError):
    """Only the leader can do this; the REST layer forwards the request to ``leader_url``."""

    status = 409

    def __init__(self, message: str, leader_url: str | None):
        super().__init__(message)
        self.leader_url = leader_url


class ServiceUnavailableError(HerderError):
    """The worker is starting or stopping, or has not joined its group yet."""

    status = 503


# ------------------------------------------------------------------ the protocol


class Herder(Protocol):
    """What the REST API drives. All coroutines run on the worker's event loop."""

    @property
    def worker_id(self) -> str:
        """``host:port`` of this worker's REST listener, as statuses report it."""

    @property
    def kafka_cluster_id(self) -> str | None: ...

    async def connectors(self) -> list[str]: ...

    async def connector_info(self, name: str) -> ConnectorInfo: ...

    async def connector_config(self, name: str) -> dict[str, str]: ...

    async def put_connector_config(
        self,
        name: str,
        config: Mapping[str, str],
        *,
        allow_replace: bool,
        initial_state: TargetState = TargetState.STARTED,
    ) -> tuple[bool, ConnectorInfo]:
        """Create or update; (created, info). ``AlreadyExistsError`` when it exists and
        ``allow_replace`` is false (POST /connectors); ``BadRequestError`` when the config does
        not validate (the message names the keys at fault)."""

    async def delete_connector(self, name: str) -> None: ...

    async def task_configs(self, name: str) -> list[tuple[ConnectorTaskId, dict[str, str]]]: ...

    async def connector_status(self, name: str) -> ConnectorStateInfo: ...

    async def task_status(self, task: ConnectorTaskId) -> StatusEntry: ...

    async def restart_connector(
        self, name: str, *, include_tasks: bool, only_failed: bool
    ) -> ConnectorStateInfo:
        """Restart (KIP-745); the status answered shows RESTARTING for what will restart."""

    async def restart_task(self, task: ConnectorTaskId) -> None: ...

    async def set_target_state(self, name: str, state: TargetState) -> None:
        """pause (PAUSED), resume (STARTED), stop (STOPPED: tasks shut down, KIP-875)."""

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        """KIP-875: ``[{"partition": {...}, "offset": {...}}]``; for a sink the partition is
        ``{"kafka_topic", "kafka_partition"}`` and the offset ``{"kafka_offset"}``."""

    async def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> str:
        """KIP-875 PATCH; only for a STOPPED connector. Returns the message to answer with."""

    async def reset_offsets(self, name: str) -> str:
        """KIP-875 DELETE; only for a STOPPED connector."""

    async def validate(self, config: Mapping[str, str]) -> dict[str, Any]:
        """``PUT /connector-plugins/{plugin}/config/validate``: Kafka's ConfigInfos JSON."""
