"""Time sources: the one place Odradek reads the system's clocks, and the manual clock tests use.

Modules take their time as plain callables (``clock: Callable[[], int] = wall_clock_ms``), the
narrowest seam: a test passes one bound method of a ``ManualClock`` and moves time itself, so a
timer-driven rule is checked exactly and without sleeping. ``Clock`` is the protocol ``ManualClock``
follows, for a component that needs more than one reading (monotonic and wall time together).

- ``monotonic`` (s) / ``monotonic_ms``: durations, timeouts, rates; never goes back.
- ``time`` (s) / ``wall_clock_ms``: timestamps that leave the process (record timestamps,
  retention by time, token expiry); may jump when the system clock is set.

``ManualClock`` keeps both readings in step; it is not thread-safe (tests drive it from one thread).
"""

from __future__ import annotations

import time as _time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "wall_clock_ms", "monotonic_ms"]


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, as Kafka's ``Time.milliseconds``."""
    return _time.time_ns() // 1_000_000


def monotonic_ms() -> float:
    """Monotonic milliseconds, as Kafka's ``Time.hiResClockMs`` (for rates and windows)."""
    return _time.monotonic() * 1000


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def monotonic_ms(self) -> float: ...

    def time(self) -> float: ...

    def time_ms(self) -> int: ...


class ManualClock:
    """Time that moves only when a test moves it; monotonic and wall readings advance together.

    ``now_ms`` may also be set directly (wall time; monotonic follows by the same step).
    """

    def __init__(self, now_ms: float = 1_800_000_000_000, monotonic_s: float = 1_000.0) -> None:
        self.now_ms = now_ms
        self._monotonic_offset_ms = monotonic_s * 1000 - now_ms

    def advance(self, seconds: float = 0.0, *, ms: float = 0.0) -> None:
        if seconds < 0 or ms < 0:
            raise ValueError("a manual clock only moves forwards")
        self.now_ms += seconds * 1000 + ms

    def monotonic(self) -> float:
        return self.monotonic_ms() / 1000

    def monotonic_ms(self) -> float:
        return self.now_ms + self._monotonic_offset_ms

    def time(self) -> float:
        return self.now_ms / 1000

    def time_ms(self) -> int:
        return int(self.now_ms)

    __call__ = time_ms  # a callable clock in ms, as storage and the broker take it
