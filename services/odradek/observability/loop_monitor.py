"""How late a service's event loop runs: its lag, as a metric and as a readiness check.

Every service serves all its clients from one asyncio event loop, so anything slow done there
(an fsync, a decompression, a large re-encode) delays every client by as much. The monitor
measures it directly: a task asks to sleep ``interval_s`` and records how much later than that
it woke up. That lag goes to ``odradek_event_loop_lag_seconds`` (a histogram, and the latest
value as a gauge).

Readiness: the service reports itself not ready while the lag has stayed above
``unready_lag_s`` for ``unready_after_s`` or longer: every sample since then was high (a single
late wake-up counts from when the loop stopped answering, so one stall of that length is
enough). One sample below the threshold makes it ready again. A loop that is stuck right now
cannot answer ``/readyz`` at all, which a probe's timeout reports by itself.

Runs on the event loop it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from odradek.observability.metrics import CommonMetrics

SAMPLE_INTERVAL_S = 0.25
UNREADY_LAG_S = 0.5  # a lag above this is "high"
UNREADY_AFTER_S = 5.0  # high for this long: not ready


class EventLoopMonitor:
    """Samples the event loop's lag; see the module docstring."""

    def __init__(
        self,
        metrics: CommonMetrics | None = None,
        *,
        interval_s: float = SAMPLE_INTERVAL_S,
        unready_lag_s: float = UNREADY_LAG_S,
        unready_after_s: float = UNREADY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.metrics = metrics
        self.interval_s = interval_s
        self.unready_lag_s = unready_lag_s
        self.unready_after_s = unready_after_s
        self.clock = clock
        self.lag_s = 0.0
        self.max_lag_s = 0.0
        self._high_since: float | None = None  # when the loop last began to run late
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            expected = self.clock() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now = self.clock()
            self.record(max(0.0, now - expected), now)

    def record(self, lag_s: float, now: float) -> None:
        """One sample: the loop woke ``lag_s`` late at ``now``."""
        self.lag_s = lag_s
        self.max_lag_s = max(self.max_lag_s, lag_s)
        if lag_s > self.unready_lag_s:
            if self._high_since is None:
                self._high_since = now - lag_s
        else:
            self._high_since = None
        if self.metrics is not None:
            self.metrics.observe_event_loop_lag(lag_s)

    def not_ready_reason(self) -> str | None:
        """Why the service is not ready because of its loop, or None."""
        since = self._high_since
        if since is None:
            return None
        high_for_s = self.clock() - since
        if high_for_s < self.unready_after_s:
            return None
        return (
            f"event loop lag {self.lag_s * 1000:.0f} ms, above {self.unready_lag_s * 1000:.0f} ms "
            f"for {high_for_s:.1f} s"
        )
