"""Controller election through the ephemeral ``/controller`` node and ``/controller_epoch``.

Winning is one ZooKeeper transaction, as in Kafka's
``KafkaZkClient.registerControllerAndIncrementControllerEpoch``:

    create /controller (ephemeral, {"brokerid": id, "host": h, "port": p})
    set    /controller_epoch = epoch + 1   if its znode version is still the one just read
           (or create it as "1" when it does not exist yet)

Both happen or neither does, so every controller that ever won holds an epoch larger than all
before it, even when candidates race or a winner's reply is lost. A candidate that finds
``/controller`` taken watches it and tries again when it goes. The winner keeps the epoch's znode
version (``epoch_zk_version``): a controller fences its own writes with a ``CheckOp`` on
``/controller_epoch`` at that version, so a deposed controller cannot write.

Stepping down:

- SUSPENDED (connection lost): ``is_controller`` turns False at once, on kazoo's thread, and
  ``on_resign`` runs: the session may be expiring on the server and another controller may win
  at any moment. If the connection comes back with the same session and ``/controller`` is still
  ours, ``on_elect`` runs again with the same epoch (nobody else can have won meanwhile).
- LOST (session expired): the same, and the epoch is dead; the next session campaigns afresh.
- ``/controller`` deleted or owned by someone else: resign and campaign again.
- ``resign()``: delete ``/controller`` if ours, resign, stop campaigning.

The winner's ``/controller`` also names its listener (``endpoint``: host and port), where brokers
send it AlterPartition; ``zk.controller_locator`` finds it for them.

Every ``on_elect(epoch)`` is followed by exactly one ``on_resign(reason)`` before the next
``on_elect``. Both run on the event loop that called ``start()``; they must not block. The
campaign loop is loop-confined; ``is_controller``, ``epoch`` and ``epoch_zk_version`` may be read
from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable

from odradek.zk.client import (
    CreateOp,
    SessionEvent,
    SetDataOp,
    WatchCallback,
    WatchEvent,
    ZkClient,
    ZkState,
)
from odradek.zk.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    ZkConnectionError,
    ZkError,
    ZkTimeoutError,
)
from odradek.zk.paths import (
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    ControllerEpoch,
    ControllerInfo,
)

__all__ = ["ControllerElection", "read_controller"]

log = logging.getLogger(__name__)

# Immediate retries after losing a race on /controller_epoch; then back off.
RACE_ATTEMPTS_MAX = 5
# Back-off after a failed attempt (timeout, lost connection), doubling up to the maximum.
RETRY_DELAY_S_FIRST = 0.05
RETRY_DELAY_S_MAX = 2.0
# A wake-up is due at least this often even without a watch firing, to re-check /controller.
RECHECK_INTERVAL_S = 5.0
# resign() waits this long for the campaign task to finish (it only awaits bounded calls).
RESIGN_WAIT_S = 5.0


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def read_controller(
    zk: ZkClient, watch: WatchCallback | None = None
) -> tuple[ControllerInfo, int] | None:
    """The active controller (with its listener's host and port, ``ControllerInfo.endpoint``)
    and its epoch, or ``None`` if there is none right now. ``watch`` fires once when
    ``/controller`` is next created, changed or deleted (also when it is absent now)."""
    if watch is not None and await zk.aexists(CONTROLLER_PATH, watch=watch) is None:
        return None
    try:
        data, _ = await zk.aget(CONTROLLER_PATH)
        epoch_data, _ = await zk.aget(CONTROLLER_EPOCH_PATH)
    except NoNodeError:
        return None
    return ControllerInfo.decode(data), ControllerEpoch.decode(epoch_data).epoch


class ControllerElection:
    """One candidate for controller; see the module docstring for the rules."""

    def __init__(
        self,
        zk: ZkClient,
        controller_id: int,
        *,
        on_elect: Callable[[int], None] | None = None,
        on_resign: Callable[[str], None] | None = None,
        wall_clock_ms: Callable[[], int] = _wall_clock_ms,
        recheck_interval_s: float = RECHECK_INTERVAL_S,
        endpoint: tuple[str, int] | None = None,
    ) -> None:
        self.zk = zk
        self.controller_id = controller_id
        self.endpoint = endpoint  # the controller's listener, published in /controller
        self._on_elect = on_elect
        self._on_resign = on_resign
        self._wall_clock_ms = wall_clock_ms
        self._recheck_interval_s = recheck_interval_s
        # Written on the loop, and cleared from kazoo's thread on SUSPENDED/LOST.
        self._lock = threading.Lock()
        self._leading = False
        self._epoch: int | None = None
        self._epoch_zk_version: int | None = None
        self._generation = 0  # bumped on every session change, to void in-flight wins
        # Loop-side state.
        self._announced = False  # on_elect ran and on_resign has not yet
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- state readable from any thread --------------------------------------------------------

    @property
    def is_controller(self) -> bool:
        return self._leading

    @property
    def epoch(self) -> int | None:
        """The epoch this candidate won with while it is controller, else ``None``."""
        with self._lock:
            return self._epoch if self._leading else None

    @property
    def epoch_zk_version(self) -> int | None:
        """``/controller_epoch``'s znode version at the win: the fence for controller writes."""
        with self._lock:
            return self._epoch_zk_version if self._leading else None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start campaigning in a task on the running loop."""
        if self._task is not None:
            raise RuntimeError("the election is already running")
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = False
        self.zk.add_session_listener(self._on_session_thread)
        self._task = self._loop.create_task(self._campaign(), name=f"election-{self.controller_id}")

    async def resign(self) -> None:
        """Step down (deleting ``/controller`` if ours) and stop campaigning."""
        task, self._task = self._task, None
        self.zk.remove_session_listener(self._on_session_thread)
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=RESIGN_WAIT_S)
        self._clear_leadership(bump=True)  # stop acting before anything else
        # Also when SUSPENDED-then-back: the node may still be ours though we were not leading.
        if self.zk.connected:
            with contextlib.suppress(ZkError):
                stat = await self.zk.aexists(CONTROLLER_PATH)
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    await self.zk.adelete(CONTROLLER_PATH, version=stat.version)
        self._announce_resign("resigned")

    # --- session events ------------------------------------------------------------------------

    def _on_session_thread(self, event: SessionEvent, session_id: int | None) -> None:
        # kazoo's connection thread: drop leadership before anything else can happen.
        if event in (SessionEvent.SUSPENDED, SessionEvent.LOST):
            self._clear_leadership(bump=True)
        else:
            with self._lock:
                self._generation += 1
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # loop closed
                loop.call_soon_threadsafe(self._on_session_loop, event)

    def _on_session_loop(self, event: SessionEvent) -> None:
        if event is SessionEvent.SUSPENDED:
            self._announce_resign("ZooKeeper connection suspended")
        elif event is SessionEvent.LOST:
            self._announce_resign("ZooKeeper session lost")
        if self._wake is not None:
            self._wake.set()

    def _clear_leadership(self, *, bump: bool) -> bool:
        with self._lock:
            was_leading = self._leading
            self._leading = False
            if bump:
                self._generation += 1
            return was_leading

    # --- callbacks -----------------------------------------------------------------------------

    def _announce_elect(self, epoch: int) -> None:
        self._announced = True
        log.info("controller %d is the active controller, epoch %d", self.controller_id, epoch)
        if self._on_elect is not None:
            try:
                self._on_elect(epoch)
            except Exception:
                log.exception("on_elect failed")

    def _announce_resign(self, reason: str) -> None:
        if not self._announced:
            return
        self._announced = False
        log.info("controller %d resigns: %s", self.controller_id, reason)
        if self._on_resign is not None:
            try:
                self._on_resign(reason)
            except Exception:
                log.exception("on_resign failed")

    def _watch(self, event: WatchEvent) -> None:
        if self._wake is not None:
            self._wake.set()

    # --- the campaign --------------------------------------------------------------------------

    async def _campaign(self) -> None:
        wake = self._wake
        if wake is None:
            raise RuntimeError("start() sets up the campaign")
        delay_s = RETRY_DELAY_S_FIRST
        while not self._stopping:  # every pass ends waiting for a wake-up
            wake.clear()
            timeout_s = self._recheck_interval_s
            if self.zk.state is ZkState.CONNECTED:
                try:
                    await self._step()
                    delay_s = RETRY_DELAY_S_FIRST
                except (ZkTimeoutError, ZkConnectionError, BadVersionError) as exc:
                    log.info("controller %d: election attempt failed: %s", self.controller_id, exc)
                    timeout_s, delay_s = delay_s, min(delay_s * 2, RETRY_DELAY_S_MAX)
                except ZkError as exc:  # bad data in /controller or /controller_epoch
                    log.error("controller %d: election attempt failed: %s", self.controller_id, exc)
                    timeout_s, delay_s = delay_s, min(delay_s * 2, RETRY_DELAY_S_MAX)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await wake.wait()

    async def _step(self) -> None:
        """Look at /controller once (leaving a watch on it) and act on what is there."""
        with self._lock:
            generation = self._generation
        stat = await self.zk.aexists(CONTROLLER_PATH, watch=self._watch)
        if stat is not None and stat.ephemeralOwner == self.zk.session_id:
            # Ours: a win whose reply was lost, or the same session after SUSPENDED.
            if not self._announced:
                data, epoch_stat = await self.zk.aget(CONTROLLER_EPOCH_PATH)
                epoch = ControllerEpoch.decode(data).epoch
                self._become(epoch, epoch_stat.version, generation)
            return
        if self._announced or self._leading:
            self._clear_leadership(bump=False)
            self._announce_resign(
                "the controller node was deleted" if stat is None else "another controller won"
            )
        if stat is None:
            await self._race(generation)

    async def _race(self, generation: int) -> None:
        """Try to create /controller and bump the epoch in one transaction."""
        host, port = self.endpoint if self.endpoint is not None else (None, None)
        info = ControllerInfo(self.controller_id, self._wall_clock_ms(), host, port)
        for _ in range(RACE_ATTEMPTS_MAX):
            try:
                data, epoch_stat = await self.zk.aget(CONTROLLER_EPOCH_PATH)
            except NoNodeError:
                epoch, epoch_version = 1, 0
                bump = CreateOp(CONTROLLER_EPOCH_PATH, ControllerEpoch(epoch).encode())
            else:
                epoch = ControllerEpoch.decode(data).epoch + 1
                epoch_version = epoch_stat.version + 1
                bump = SetDataOp(
                    CONTROLLER_EPOCH_PATH,
                    ControllerEpoch(epoch).encode(),
                    version=epoch_stat.version,
                )
            try:
                await self.zk.atransaction(
                    [CreateOp(CONTROLLER_PATH, info.encode(), ephemeral=True), bump]
                )
            except NodeExistsError as exc:
                if exc.path == CONTROLLER_PATH:
                    return  # lost the race; the watch set by _step wakes us when it goes
                continue  # another candidate created /controller_epoch first: read it again
            except BadVersionError:
                continue  # the epoch moved under us: read it again
            self._become(epoch, epoch_version, generation)
            return
        raise BadVersionError(
            f"lost the epoch race {RACE_ATTEMPTS_MAX} times in a row", path=CONTROLLER_EPOCH_PATH
        )

    def _become(self, epoch: int, epoch_zk_version: int, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                # The session changed while we were winning: the loop looks again.
                if self._wake is not None:
                    self._wake.set()
                return
            self._leading = True
            self._epoch = epoch
            self._epoch_zk_version = epoch_zk_version
        self._announce_elect(epoch)
