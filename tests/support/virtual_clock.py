"""Async unit tests on a virtual loop clock (kopf's ``looptime``) instead of real sleeps.

``run_on_virtual_clock(coroutine, timeout_s)`` runs it in a fresh event loop whose ``time()``
moves only when the loop has nothing to do, then jumps to the next timer: ``asyncio.sleep``,
``call_later``, ``wait_for`` and ``asyncio.timeout`` take no real time, and a test that sleeps
0.1 s to let a 30 ms timer fire three times sees exactly that. ``timeout_s`` bounds the test in
virtual seconds (pytest-timeout still bounds it in real ones).

Only the loop's clock is virtual: ``time.monotonic`` and ``time.time`` are not, so code under test
that reads them needs its clock injected. Not for tests with real sockets, threads or processes:
the clock would jump ahead while they work. A test may run one loop at a time; tests in
separate processes (pytest-xdist) are independent.

Why not ``@pytest.mark.looptime`` on pytest-asyncio tests: it needs ``async def`` tests collected
by pytest-asyncio, and the project's unit tests run their coroutines with ``asyncio.run`` (strict
mode, no ``asyncio`` marks); a loop factory keeps their shape.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import looptime

T = TypeVar("T")

TIMEOUT_S = 10.0


def run_on_virtual_clock(coroutine: Awaitable[T], timeout_s: float = TIMEOUT_S) -> T:
    """``asyncio.run(asyncio.wait_for(coroutine, timeout_s))`` on a looptime loop."""
    with asyncio.Runner(loop_factory=looptime.new_event_loop) as runner:
        return runner.run(asyncio.wait_for(coroutine, timeout_s))


def on_virtual_clock(test: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    """Decorate an ``async def`` test (no fixtures) to run on the virtual clock."""

    @functools.wraps(test)
    def run() -> None:
        run_on_virtual_clock(test())

    return run
