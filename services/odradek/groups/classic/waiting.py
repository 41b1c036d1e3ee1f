"""The one asynchronous thing of classic groups: an answer that waits (a member in JoinGroup
until the join phase completes, a follower in SyncGroup until the leader's assignment).

The runtime awaits ``Result.deferred``; here it is an ``asyncio.Future`` of the broker's loop,
completed by an operation of the shard with an answer value (never an exception). This module
is the only one of the group state that imports asyncio (pyproject's import contract names it).
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

__all__ = ["Waiting", "new_waiting"]

T = TypeVar("T")

Waiting = asyncio.Future


def new_waiting() -> asyncio.Future[T]:
    """A future of the running loop (operations of the shard run on it)."""
    return asyncio.get_running_loop().create_future()


def answer(waiting: asyncio.Future[T], value: T) -> None:
    """Complete ``waiting`` with ``value`` unless it is done (its caller went away)."""
    if not waiting.done():
        waiting.set_result(value)
