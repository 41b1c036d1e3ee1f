"""What source and sink task runners share: the thread, the target state, status reports, and a
bounded, idempotent stop.

A runner owns one task instance and one thread. ``start`` starts the thread; ``set_target``
(STARTED/PAUSED) and ``stop`` may be called from any thread; ``join(timeout_s)`` waits for the
thread. A runner that does not stop in time is ``cancel``ed: it keeps running until its plugin
returns, but reports nothing more and commits nothing more (Kafka's cancelled task).
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable

from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState
from odradek.connect.runtime.status import StatusListener

log = logging.getLogger(__name__)

PAUSED_WAIT_S = 0.5
"""How long a paused task waits before looking at its state again (and flushing offsets)."""


class TaskRunner:
    def __init__(
        self,
        task_id: ConnectorTaskId,
        status: StatusListener,
        worker_id: str,
        target: TargetState,
        generation: Callable[[], int],
    ):
        self.id = task_id
        self._status = status
        self._worker_id = worker_id
        self._generation = generation
        self.target = target
        self.stopping = threading.Event()
        self.wakeup = threading.Event()
        self.cancelled = False
        self.failed: BaseException | None = None
        self.state = State.UNASSIGNED
        self.thread = threading.Thread(
            target=self._main, name=f"connect-task-{task_id.connector}-{task_id.task}", daemon=True
        )

    # -------------------------------------------------------------- called by the worker

    def start(self) -> None:
        self.thread.start()

    def set_target(self, target: TargetState) -> None:
        self.target = target
        self.wakeup.set()

    def stop(self) -> None:
        self.stopping.set()
        self.wakeup.set()

    def join(self, timeout_s: float) -> bool:
        self.thread.join(max(timeout_s, 0))
        return not self.thread.is_alive()

    def cancel(self) -> None:
        self.cancelled = True

    # -------------------------------------------------------------- on the task thread

    @property
    def paused(self) -> bool:
        return self.target is not TargetState.STARTED

    def report(self, state: State, error: BaseException | None = None) -> None:
        if self.cancelled:
            return
        self.state = state
        trace = None
        if error is not None:
            trace = "".join(traceback.format_exception(error))
        try:
            self._status.task(
                self.id, StatusEntry(state, self._worker_id, trace, self._generation())
            )
        except Exception:  # noqa: BLE001 - a status store failure must not kill the task
            log.exception("task %s: could not report %s", self.id, state)

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as e:  # noqa: BLE001 - any failure of plugin code fails the task
            self.failed = e
            log.error("task %s failed", self.id, exc_info=e)
            self.report(State.FAILED, e)
        else:
            if not self.cancelled and self.state is not State.FAILED:
                self.report(State.UNASSIGNED)
        finally:
            try:
                self.close()
            except Exception:  # noqa: BLE001
                log.exception("task %s: closing failed", self.id)

    def run(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
