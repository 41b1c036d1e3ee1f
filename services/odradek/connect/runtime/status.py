"""Where a worker reports the observed state of its connectors and tasks.

``StatusListener`` is what the ``Worker`` calls on every state change (RUNNING, PAUSED, STOPPED,
FAILED with a trace, UNASSIGNED when stopped by a rebalance, DESTROYED when deleted). Standalone
mode keeps the latest entries in memory (``MemoryStatusListener``); distributed mode writes them to
the status topic. Calls come from task and connector threads: implementations are thread-safe and
must not block for long (a task thread waits for them).
"""

from __future__ import annotations

import threading
from typing import Protocol

from odradek.connect.herder import ConnectorTaskId, StatusEntry


class StatusListener(Protocol):
    def connector(self, name: str, entry: StatusEntry) -> None: ...

    def task(self, task_id: ConnectorTaskId, entry: StatusEntry) -> None: ...


class MemoryStatusListener:
    """The latest entry of every connector and task, in memory. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, StatusEntry] = {}
        self._tasks: dict[ConnectorTaskId, StatusEntry] = {}

    def connector(self, name: str, entry: StatusEntry) -> None:
        with self._lock:
            self._connectors[name] = entry

    def task(self, task_id: ConnectorTaskId, entry: StatusEntry) -> None:
        with self._lock:
            self._tasks[task_id] = entry

    def get_connector(self, name: str) -> StatusEntry | None:
        with self._lock:
            return self._connectors.get(name)

    def get_task(self, task_id: ConnectorTaskId) -> StatusEntry | None:
        with self._lock:
            return self._tasks.get(task_id)

    def tasks_of(self, name: str) -> dict[int, StatusEntry]:
        with self._lock:
            return {t.task: e for t, e in self._tasks.items() if t.connector == name}

    def forget(self, name: str) -> None:
        """Drop a deleted connector's entries."""
        with self._lock:
            self._connectors.pop(name, None)
            for t in [t for t in self._tasks if t.connector == name]:
                del self._tasks[t]

    def forget_task(self, task_id: ConnectorTaskId) -> None:
        """Drop one task's entry."""
        with self._lock:
            self._tasks.pop(task_id, None)
