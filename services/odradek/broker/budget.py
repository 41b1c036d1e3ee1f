"""Budgets the broker's connections share: request memory and queued requests.

A ``Budget`` is a count with a capacity and a queue of waiters. The broker keeps two:

- **request memory**, Kafka's ``queued.max.request.bytes`` (its memory pool). Every large
  request frame (one that does not fit a connection's read buffer) reserves the bytes it holds
  here as they arrive (``protocol.framing.FrameDecoder``), and gives them back once the request
  has been handled. When the pool is empty the reservation is refused: that connection stops
  reading its socket and waits (``wait``) until memory comes back, so the bytes of requests held
  in memory by the whole broker never exceed the capacity. A frame in progress that the pool
  cannot grow simply waits; nothing is dropped. Small requests (up to the read buffer's size) do
  not come from this pool: their memory is bounded by the request counts instead, so a pool held
  by large partial frames never starves other clients' small requests.
- **queued requests**, Kafka's ``queued.max.requests``: requests read whole and not yet taken by
  their connection's handler, all connections together. At the capacity, connections stop taking
  frames out of their read buffers (and so, once those fill, stop reading), as Kafka's network
  threads block on a full request channel.

Waiters are served in the order they started waiting, each retrying its own reservation; one
that is still refused waits again (at the back). Runs on the broker's event loop only.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from odradek.protocol.framing import FrameBuffers

UNBOUNDED = -1  # e.g. queued.max.request.bytes = -1: no bound, as Kafka's default
IDLE_FRAME_BUFFER_BYTES = 32 * 1024 * 1024  # large requests' buffers kept for reuse, at most


class Budget:
    """A count shared by connections, with a capacity and waiters; see the module docstring."""

    def __init__(self, capacity: int = UNBOUNDED):
        if capacity != UNBOUNDED and capacity <= 0:
            raise ValueError("capacity must be positive, or -1 for no bound")
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[Callable[[], None]] = deque()

    @property
    def bounded(self) -> bool:
        return self.capacity != UNBOUNDED

    @property
    def available(self) -> int:
        if not self.bounded:
            return 1 << 62
        return self.capacity - self.used

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_reserve(self, amount: int) -> bool:
        """Take ``amount`` if available; otherwise take nothing and return False."""
        if amount < 0:
            raise ValueError(f"cannot reserve {amount}")
        if self.bounded and self.used + amount > self.capacity:
            return False
        self.used += amount
        return True

    def release(self, amount: int) -> None:
        """Give back ``amount``; wake the waiters, oldest first, while some is left."""
        if amount <= 0:
            return
        if amount > self.used:
            # A double release would make the budget grant more than it has: a bug, not input.
            raise RuntimeError(f"releasing {amount} but only {self.used} is used")
        self.used -= amount
        for _ in range(len(self._waiters)):
            if self.available <= 0:
                break
            self._waiters.popleft()()

    def wait(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once) after a release; it should retry and may wait again."""
        if callback not in self._waiters:
            self._waiters.append(callback)

    def cancel(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):  # not waiting: nothing to cancel
            self._waiters.remove(callback)


@dataclass(frozen=True, slots=True)
class RequestBudgets:
    """The two budgets of one broker, shared by the servers of all its listeners, and the
    recycled buffers of large requests (``protocol.framing.FrameBuffers``)."""

    memory: Budget  # queued.max.request.bytes
    slots: Budget  # queued.max.requests
    frame_buffers: FrameBuffers

    @classmethod
    def of(cls, *, queued_max_request_bytes: int, queued_max_requests: int) -> RequestBudgets:
        return cls(
            Budget(queued_max_request_bytes),
            Budget(queued_max_requests),
            FrameBuffers(idle_bytes_max=IDLE_FRAME_BUFFER_BYTES),
        )
