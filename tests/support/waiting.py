"""Bounded waits for a condition: the one home of the tests' poll loops, on real processes
(``wait_until``, ``wait_equal``) and inside an event loop (``wait_until_async``).

Every wait is bounded twice: by ``timeout_s`` on its clock (``time.monotonic`` for the sync
waits, the running loop's ``time()`` for the async one, so a virtual loop clock such as
looptime's bounds it in virtual seconds) and by a count of polls, one more than the timeout
allows, which the time bound always reaches first on a real clock but which still ends a wait on a
clock that does not move. A failure is an ``AssertionError`` that names what was awaited, how long
and how many polls it waited, the last value seen, and ``explain()`` (what the processes waited on
were doing) if given. Stateless: any number of tests and threads may wait at once."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

POLL_S = 0.2


def polls_max(timeout_s: float, poll_s: float) -> int:
    """The count bound: more polls than ``timeout_s`` leaves room for at ``poll_s`` apart.

    ``poll_s`` must be positive: without a pause between polls no count follows from the time
    (a condition that itself blocks, such as a consumer's ``poll(0.2)``, still takes a small one).
    """
    if not poll_s > 0:
        raise ValueError(f"poll_s must be positive, not {poll_s!r}: the count bound needs it")
    return math.ceil(timeout_s / poll_s) + 2


def _failure(
    what: str,
    timeout_s: float,
    polls: int,
    last: object,
    explain: Callable[[], str] | None,
) -> AssertionError:
    message = (
        f"timed out after {timeout_s} s ({polls} polls) waiting for {what}; last seen: {last!r}"
    )
    if explain is not None:
        message += "\n" + explain()
    return AssertionError(message)


def _poll(
    read: Callable[[], Any],
    done: Callable[[Any], bool],
    what: str,
    timeout_s: float,
    poll_s: float,
    explain: Callable[[], str] | None,
) -> Any:
    deadline = time.monotonic() + timeout_s
    limit = polls_max(timeout_s, poll_s)
    polls = 0
    while True:
        value = read()
        polls += 1
        if done(value):
            return value
        if time.monotonic() > deadline or polls >= limit:
            raise _failure(what, timeout_s, polls, value, explain)
        time.sleep(poll_s)


def wait_until(
    condition: Callable[[], T],
    what: str,
    timeout_s: float,
    *,
    poll_s: float = POLL_S,
    explain: Callable[[], str] | None = None,
) -> T:
    """``condition()``'s first truthy result, polled every ``poll_s``; AssertionError naming
    ``what`` once ``timeout_s`` has passed, followed by ``explain()`` if given."""
    return _poll(condition, bool, what, timeout_s, poll_s, explain)


def wait_equal(
    read: Callable[[], T],
    expected: T,
    what: str,
    timeout_s: float,
    *,
    poll_s: float = POLL_S,
    explain: Callable[[], str] | None = None,
) -> T:
    """Until ``read()`` returns ``expected`` (the failure shows the last value read instead)."""
    return _poll(
        read, lambda value: value == expected, f"{what} == {expected!r}", timeout_s, poll_s, explain
    )


async def wait_until_async(
    condition: Callable[[], T],
    what: str,
    timeout_s: float,
    *,
    poll_s: float = POLL_S,
    explain: Callable[[], str] | None = None,
) -> T:
    """``wait_until`` inside an event loop: ``condition()`` (not awaited) between
    ``asyncio.sleep(poll_s)``, bounded by the running loop's clock."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    limit = polls_max(timeout_s, poll_s)
    polls = 0
    while True:
        value = condition()
        polls += 1
        if value:
            return value
        if loop.time() > deadline or polls >= limit:
            raise _failure(what, timeout_s, polls, value, explain)
        await asyncio.sleep(poll_s)
