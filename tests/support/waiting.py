"""A bounded wait for a condition on real processes: every loop of a test ends in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.2


def wait_until(
    condition: Callable[[], T],
    what: str,
    timeout_s: float,
    *,
    poll_s: float = POLL_S,
    explain: Callable[[], str] | None = None,
) -> T:
    """``condition()``'s first truthy result, polled every ``poll_s``; AssertionError naming
    ``what`` once ``timeout_s`` has passed, followed by ``explain()`` (what the processes
    waited on were doing) if given."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            message = f"timed out after {timeout_s} s waiting for {what}"
            if explain is not None:
                message += "\n" + explain()
            raise AssertionError(message)
        time.sleep(poll_s)
