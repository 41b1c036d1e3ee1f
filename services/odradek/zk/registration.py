"""A broker's registration: the ephemeral ``/brokers/ids/<id>`` holding its listeners and rack.

The node lives as long as the broker's ZooKeeper session, so the controller learns of a broker's
death from the node's deletion. ``BrokerRegistrar`` creates it, and creates it again whenever
the client reports a NEW session (the old session's ephemerals are gone, or go when the server
expires it).

Broker epoch: as in Kafka, the czxid of the node (the ZooKeeper transaction that created it),
so it grows at every registration. After each registration the registrar reads the node's stat
and records the epoch (``broker_epoch``, and ``on_registered(epoch)``); the controller reads
the same stat and puts the epoch in its requests, which the broker checks
(``broker/controller_requests.py``).

Creating follows Kafka's "checked ephemeral" rules:

- NODE_EXISTS owned by our own session: a retried create that had succeeded; done.
- NODE_EXISTS owned by another session: either the previous incarnation of this broker, whose
  session the server has not expired yet, or another live broker with the same id. Wait for the
  node to go (a watch wakes us) for one session timeout plus the server's expiry granularity
  (1.5 timeouts in all), then create again; if it is still there, raise ``BrokerIdInUseError``.

All methods run on the event loop that called ``register()``; the class is not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

from odradek.zk.client import SessionEvent, WatchEvent, ZkClient
from odradek.zk.errors import BrokerIdInUseError, NodeExistsError, NoNodeError, ZkError
from odradek.zk.paths import BrokerInfo, broker_path

__all__ = ["BrokerRegistrar"]

log = logging.getLogger(__name__)

# Each pass either creates the node, finds it ours, or waits for a deletion: a handful suffice
# even if the node flaps; the deadline is the real bound.
REGISTER_ATTEMPTS_MAX = 10
# How long a conflicting node may take to go, in session timeouts. The server expires a session
# between one timeout and one timeout plus a tick after its last heartbeat, and a tick is at most
# half the timeout (ZooKeeper's minimum session is two ticks).
CONFLICT_WAIT_SESSION_TIMEOUTS = 1.5


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerRegistrar:
    """Keeps ``/brokers/ids/<broker_id>`` registered while ``zk``'s sessions come and go."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        info: BrokerInfo,
        *,
        conflict_wait_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ms: Callable[[], int] = _wall_clock_ms,
        on_failure: Callable[[Exception], None] | None = None,
        on_registered: Callable[[int], None] | None = None,
    ) -> None:
        """``info.timestamp_ms`` is replaced by ``wall_clock_ms()`` at each registration.

        ``on_failure`` hears about a failed re-registration after a new session (a broker would
        usually shut down: it is invisible to the controller). ``on_registered`` hears the broker
        epoch of each registration. ``conflict_wait_s`` defaults to 1.5 session timeouts.
        """
        self.zk = zk
        self.broker_id = broker_id
        self.path = broker_path(broker_id)
        self._info = info
        if conflict_wait_s is None:
            conflict_wait_s = zk.session_timeout_s * CONFLICT_WAIT_SESSION_TIMEOUTS
        self._conflict_wait_s = conflict_wait_s
        self._clock = clock
        self._wall_clock_ms = wall_clock_ms
        self._on_failure = on_failure
        self._on_registered = on_registered
        self._lock = asyncio.Lock()
        self._active = False
        self._tasks: set[asyncio.Task] = set()
        self.registered_session_id: int | None = None
        self.broker_epoch: int | None = None  # the czxid of the node of the last registration

    @property
    def registered(self) -> bool:
        """True if the node was created by the client's current session."""
        return (
            self.registered_session_id is not None
            and self.registered_session_id == self.zk.session_id
        )

    async def register(self) -> None:
        """Create the node (see the module docstring) and keep it through new sessions.

        Raises ``BrokerIdInUseError`` if another session still holds the id after one session
        timeout, or ``ZkTimeoutError``/``ZkConnectionError`` if ZooKeeper cannot be reached.
        """
        if not self._active:
            self.zk.add_session_listener(self._on_session, loop=asyncio.get_running_loop())
            self._active = True
        try:
            await self._register_once()
        except BaseException:
            await self.deregister()
            raise

    async def deregister(self) -> None:
        """Stop re-registering and delete the node if this session owns it."""
        if self._active:
            self.zk.remove_session_listener(self._on_session)
            self._active = False
        for task in list(self._tasks):
            task.cancel()
        async with self._lock:
            if not self.registered:
                return
            self.registered_session_id = None
            with contextlib.suppress(NoNodeError):
                stat = await self.zk.aexists(self.path)
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    await self.zk.adelete(self.path, version=stat.version)

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:
        # On the loop. Only a NEW session needs the node again; after RECONNECTED it is there.
        if event is not SessionEvent.NEW_SESSION or not self._active:
            return
        task = asyncio.get_running_loop().create_task(self._reregister())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reregister(self) -> None:
        try:
            await self._register_once()
        except asyncio.CancelledError:
            raise
        except ZkError as exc:
            log.error("broker %d could not register again: %s", self.broker_id, exc)
            if self._on_failure is not None:
                self._on_failure(exc)

    async def _register_once(self) -> None:
        async with self._lock:
            deadline = self._clock() + self._conflict_wait_s
            for _ in range(REGISTER_ATTEMPTS_MAX):
                if await self._try_create():
                    return
                remaining_s = deadline - self._clock()
                if remaining_s <= 0:
                    break
                await self._wait_for_deletion(remaining_s)
            raise BrokerIdInUseError(
                f"broker id {self.broker_id} is registered by another live session "
                f"(waited {self._conflict_wait_s} s for it to expire)",
                path=self.path,
            )

    async def _try_create(self) -> bool:
        """True once the node exists and is ours."""
        info = dataclasses.replace(self._info, timestamp_ms=self._wall_clock_ms())
        session_id = self.zk.session_id
        with contextlib.suppress(NodeExistsError):  # maybe ours (a retried create): look
            await self.zk.acreate(self.path, info.encode(), ephemeral=True, make_parents=True)
        stat = await self.zk.aexists(self.path)
        if stat is None or stat.ephemeralOwner != session_id:
            return False  # gone meanwhile (try again) or someone else's
        self.registered_session_id = session_id
        self.broker_epoch = stat.czxid
        log.info(
            "broker %d registered at %s with broker epoch %d", self.broker_id, self.path, stat.czxid
        )
        if self._on_registered is not None:
            self._on_registered(stat.czxid)
        return True

    async def _wait_for_deletion(self, timeout_s: float) -> None:
        gone = asyncio.Event()

        def on_watch(event: WatchEvent) -> None:
            gone.set()  # deleted, changed or disconnected: look again in any case

        if await self.zk.aexists(self.path, watch=on_watch) is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await gone.wait()
