"""The controller's pending events: never dropped, one pending event per key.

Every event is a key and an action. ZooKeeper watch events are idempotent "read X again" events
(``brokers``, ``topics``, ``deletions``, ``topic <name>``, ``refresh``): the action reads the
current state and arms the watch again. So while an event with a key is pending, another with
the same key adds nothing and is coalesced into it. Once an event has been taken to run, a new
one with its key is queued again: the running action may have read the state before the change.
Election events carry a key of their own each (they are few, and their order matters).

Hence the queue holds at most one event per distinct key (a handful, plus one per topic that
changed) and never refuses one: a full queue used to drop a watch event, and that watch was then
never armed again. Events run in the order their key first became pending.

Runs on the controller's event loop only; other threads enqueue with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

Action = Callable[[], Awaitable[None]]


class EventQueue:
    def __init__(self) -> None:
        self._pending: OrderedDict[str, Action] = OrderedDict()
        self._ready = asyncio.Event()

    def put(self, key: str, action: Action) -> bool:
        """Queue ``action`` under ``key``; False if an event with that key is already pending."""
        if key in self._pending:
            return False
        self._pending[key] = action
        self._ready.set()
        return True

    async def get(self) -> tuple[str, Action]:
        """The oldest pending event, removed; waits for one."""
        while not self._pending:
            self._ready.clear()
            await self._ready.wait()
        return self._pending.popitem(last=False)

    def __len__(self) -> int:
        return len(self._pending)
