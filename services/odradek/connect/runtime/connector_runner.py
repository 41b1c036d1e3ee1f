"""One connector instance on a worker, and the thread it runs on.

A ``ConnectorRunner`` owns a connector object and a one-thread executor: ``start``,
``task_configs`` and ``stop`` run there in the order they were asked, never concurrently (Kafka's
WorkerConnector). Its state changes are reported through the ``report`` callback the worker gives
it; a connector that raises, or calls ``context.raise_error``, is FAILED and stays so until it is
stopped. Methods may be called from any thread; waits are bounded (``CONNECTOR_CALL_TIMEOUT_S``,
the shutdown timeout).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from odradek.connect.api import ConnectError, Connector
from odradek.connect.herder import State, TargetState

log = logging.getLogger(__name__)

CONNECTOR_CALL_TIMEOUT_S = 30.0
"""Longest wait for a connector's ``task_configs`` on its thread."""


class _ConnectorContext:
    def __init__(self, runner: ConnectorRunner):
        self._runner = runner

    def request_task_reconfiguration(self) -> None:
        self._runner.request_reconfiguration()

    def raise_error(self, error: Exception) -> None:
        self._runner.fail(error)


class ConnectorRunner:
    """One connector instance and its thread."""

    def __init__(
        self,
        name: str,
        connector: Connector,
        config: Mapping[str, str],
        report: Callable[[str, State, str | None], None],
        on_reconfigure: Callable[[], None],
    ):
        self.name = name
        self.connector = connector
        self.config = dict(config)
        self._report_to = report
        self.on_reconfigure = on_reconfigure
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"connect-connector-{name}")
        self.started = False
        self.failed: BaseException | None = None
        self.target = TargetState.STARTED
        connector.initialize(_ConnectorContext(self))

    def _report(self, state: State, error: BaseException | None = None) -> None:
        trace = "".join(traceback.format_exception(error)) if error is not None else None
        self._report_to(self.name, state, trace)

    def fail(self, error: BaseException) -> None:
        log.error("connector %s failed", self.name, exc_info=error)
        self.failed = error
        self._report(State.FAILED, error)

    def request_reconfiguration(self) -> None:
        if self.failed is None and self.started:
            try:
                self.on_reconfigure()
            except Exception:  # noqa: BLE001
                log.exception("connector %s: reconfiguration request failed", self.name)

    def submit(self, fn: Callable[[], Any]) -> Future:
        return self.executor.submit(fn)

    def transition(self, target: TargetState) -> Future:
        """Start, pause or stop the connector object on its thread (in order)."""
        return self.submit(lambda: self._transition(target))

    def _transition(self, target: TargetState) -> None:
        self.target = target
        if self.failed is not None:
            return
        try:
            if target is TargetState.STOPPED:
                if self.started:
                    self.started = False
                    self.connector.stop()
                self._report(State.STOPPED)
                return
            if not self.started:
                self.connector.start(self.config)
                self.started = True
            self._report(State.RUNNING if target is TargetState.STARTED else State.PAUSED)
        except Exception as e:  # noqa: BLE001 - a connector's failure fails it, not the worker
            self.fail(e)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        def call() -> list[dict[str, str]]:
            if self.failed is not None:
                raise ConnectError(f"connector {self.name} has failed: {self.failed}")
            if not self.started:
                raise ConnectError(f"connector {self.name} is not started ({self.target})")
            return [dict(c) for c in self.connector.task_configs(max_tasks)]

        return self.submit(call).result(CONNECTOR_CALL_TIMEOUT_S)

    def shutdown(self, timeout_s: float) -> bool:
        def stop() -> None:
            if self.started:
                self.started = False
                self.connector.stop()

        future = self.submit(stop)
        try:
            future.result(timeout_s)
            ok = True
        except FutureTimeout:
            log.error("connector %s did not stop within %.1f s; abandoned", self.name, timeout_s)
            ok = False
        except Exception:  # noqa: BLE001
            log.exception("connector %s: stop() failed", self.name)
            ok = True
        self.executor.shutdown(wait=False)
        return ok
