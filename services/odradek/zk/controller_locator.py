"""Where the active controller listens, for brokers: ``/controller`` read and watched.

A broker sends AlterPartition (and, later, ControlledShutdown) to the active controller's own
listener, whose host and port the controller publishes in ``/controller`` when it wins
(``zk.election``). ``ControllerLocator`` keeps the current one: it reads ``/controller`` with a
watch, reads it again whenever the watch fires (a new controller won, the old one's session
ended) and after a reconnection (kazoo drops watches with the connection), and wakes whoever
waits for an endpoint. ``current`` is None while there is no active controller, or while the
active one published no endpoint (an older controller).

Usage on the broker's event loop::

    locator = ControllerLocator(zk)
    await locator.start()
    host, port = await locator.wait_for_endpoint(timeout_s=30)   # TimeoutError if none
    ...
    await locator.stop()

A request the controller answers with NOT_CONTROLLER, or a connection to it that fails, means
the locator's view is stale or about to change: wait for the next endpoint and send again.

Loop-confined: ``start``, ``stop``, ``wait_for_endpoint`` and ``current`` on the loop that
called ``start``; the watch and session callbacks (kazoo's thread) only hand over to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from odradek.zk.client import SessionEvent, WatchEvent, ZkClient
from odradek.zk.election import read_controller
from odradek.zk.errors import ZkError
from odradek.zk.paths import ControllerInfo

__all__ = ["ControllerLocator", "active_controller_endpoint"]

log = logging.getLogger(__name__)

RETRY_DELAY_S = 1.0  # after a failed read (timeout, lost connection), read again this soon


async def active_controller_endpoint(zk: ZkClient) -> tuple[str, int] | None:
    """The active controller's listener ``(host, port)`` right now, or None (one read)."""
    found = await read_controller(zk)
    return None if found is None else found[0].endpoint


class ControllerLocator:
    def __init__(self, zk: ZkClient):
        self.zk = zk
        self.current: ControllerInfo | None = None
        self.epoch: int | None = None
        self._changed = asyncio.Event()
        self._reading: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        self._read_again = False  # a watch fired while a read ran: it may have read before

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.zk.add_session_listener(self._on_session, loop=self._loop)
        await self._read()

    async def stop(self) -> None:
        self._stopped = True
        self.zk.remove_session_listener(self._on_session)
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading

    @property
    def endpoint(self) -> tuple[str, int] | None:
        return None if self.current is None else self.current.endpoint

    async def wait_for_endpoint(self, timeout_s: float) -> tuple[str, int]:
        """The active controller's ``(host, port)``, waiting up to ``timeout_s`` for one."""
        async with asyncio.timeout(timeout_s):
            while (endpoint := self.endpoint) is None:
                self._changed.clear()
                await self._changed.wait()
        return endpoint

    # -- reading -------------------------------------------------------------------------

    def _on_watch(self, event: WatchEvent) -> None:  # kazoo's thread
        loop = self._loop
        if loop is not None and not self._stopped:
            with contextlib.suppress(RuntimeError):  # loop closed
                loop.call_soon_threadsafe(self._schedule_read)

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:  # the loop
        if event in (SessionEvent.RECONNECTED, SessionEvent.NEW_SESSION):
            self._schedule_read()

    def _schedule_read(self) -> None:
        if self._stopped:
            return
        if self._reading is not None and not self._reading.done():
            self._read_again = True
            return
        self._reading = asyncio.ensure_future(self._read_until_done())

    async def _read_until_done(self) -> None:
        while not self._stopped:
            self._read_again = False
            try:
                await self._read()
                if not self._read_again:
                    return
            except ZkError as e:
                log.info("reading /controller failed, again in %.1f s: %s", RETRY_DELAY_S, e)
                await asyncio.sleep(RETRY_DELAY_S)

    async def _read(self) -> None:
        found = await read_controller(self.zk, watch=self._on_watch)
        before = self.current
        self.current, self.epoch = (None, None) if found is None else found
        if self.current != before:
            log.info("active controller: %s", self.current)
        self._changed.set()
