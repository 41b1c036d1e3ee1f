"""A source connector for the distributed worker tests: ``tasks.max`` tasks that produce nothing
(each ``poll`` waits ``POLL_WAIT_S`` and returns no records), so a test sees where tasks run
without data. Loaded by the worker processes by Python path (``distributed_plugins:IdleSource``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from odradek.connect.api import ConfigDef, SourceConnector, SourceRecord, SourceTask

POLL_WAIT_S = 0.1


class IdleSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self._stopping = threading.Event()

    def poll(self) -> list[SourceRecord] | None:
        self._stopping.wait(POLL_WAIT_S)
        return None

    def stop(self) -> None:
        self._stopping.set()


class IdleSource(SourceConnector):
    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)

    def task_class(self) -> type[SourceTask]:
        return IdleSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"task.index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return ConfigDef()
