"""A bounded wait for a condition on real processes: every loop of a test ends in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.2


def wait_until(
    condition: Callable[[], T], what: str, timeout_s: float, *, poll_s: float = POLL_S
) -> T:
    """``condition()``'s first truthy result, polled every ``poll_s``; AssertionError naming
    ``what`` once ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
