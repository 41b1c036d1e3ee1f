"""``ZkClient``: kazoo with bounded waits, typed errors and session events, for threads and asyncio.

Every call goes through kazoo's ``*_async`` form and waits at most ``timeout_s`` (default
``request_timeout_s``): kazoo's synchronous calls block for as long as ZooKeeper is unreachable,
and the broker and controller must never hang on it. A timed-out write may still be applied
later if the connection comes back with the same session; read before retrying it.

Two forms of each call:

- ``get``/``exists``/``children``/``create``/``set``/``delete``/``transaction`` block the calling
  thread (never call them from kazoo's own callbacks or from an event loop);
- ``aget``/``aexists``/... are coroutines: kazoo's result is handed to the running loop with
  ``call_soon_threadsafe`` and awaited under ``asyncio.timeout``. Watch callbacks passed to
  them run on that loop too. (Not ``asyncio.wait_for``: before Python 3.12 it can swallow a
  cancellation that arrives together with the result.)

Sessions. ZooKeeper ties ephemeral nodes and watches to a session. ``add_session_listener``
tells its callback about every change, as a ``SessionEvent``:

- ``NEW_SESSION``: connected with a session never seen before (the first connection, or after a
  LOST). Ephemeral nodes of the old session are gone, or will be when the server expires it:
  their owners must create them again.
- ``RECONNECTED``: connected again with the same session; ephemerals are still there.
- ``SUSPENDED``: the connection dropped; the session may still be alive on the server.
- ``LOST``: the session expired (or the client closed). kazoo then connects with a NEW session.

kazoo drops every watch when the connection drops (SUSPENDED) and fires it once with a
``WatchKind.DISCONNECTED`` event: whoever watches must read and watch again after reconnecting.

TLS and ACLs. With ``tls`` (``ZkTls``, PEM files) every connection, the chroot's bootstrap one
too, is TLS, the server's certificate checked (and its host name, unless told not to) and the
client's own certificate presented: ZooKeeper's x509 provider then knows the session as
``x509:<DN>``. With ``secure_acls`` (``zookeeper.set.acl``; it needs a certificate) every znode
this client creates, by ``create``, a transaction or ``ensure_path`` (each missing parent with
its own path's ACLs), gets Kafka's secure ACLs (``odradek.zk.acls``): only this identity may
change it. Parents that ``create(make_parents=True)`` makes take the node's own ACLs.

Thread-safety: a ``ZkClient`` may be used from any thread and any number of event loops. Listener
callbacks without a loop run on kazoo's connection thread and must not block or call back into
the client synchronously.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import ACL

from odradek.zk.acls import default_acls
from odradek.zk.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZkConnectionError,
    ZkError,
    ZkTimeoutError,
)
from odradek.zk.paths import PERSISTENT_PATHS

if TYPE_CHECKING:
    from odradek.config.zookeeper_tls import ZkClientSettings

__all__ = [
    "CheckOp",
    "CreateOp",
    "DeleteOp",
    "SessionEvent",
    "SetDataOp",
    "WatchEvent",
    "WatchKind",
    "ZkClient",
    "ZkState",
    "ZkTls",
    "ZnodeStat",
]

log = logging.getLogger(__name__)

# Kafka's zookeeper.session.timeout.ms was 6000 until 2.5: a dead controller is replaced after
# about this long. ZooKeeper clamps it to [2, 20] x its tickTime.
SESSION_TIMEOUT_S_DEFAULT = 6.0
CONNECT_TIMEOUT_S_DEFAULT = 10.0
REQUEST_TIMEOUT_S_DEFAULT = 5.0
# kazoo reconnects forever (until close()); this caps the back-off between two attempts.
RECONNECT_DELAY_S_FIRST = 0.05
RECONNECT_DELAY_S_MAX = 1.0
TRANSACTION_OPS_MAX = 1000
ANY_VERSION = -1


class ZkState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"  # also the state before start()
    CLOSED = "CLOSED"


class SessionEvent(enum.Enum):
    NEW_SESSION = "NEW_SESSION"
    RECONNECTED = "RECONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"

    @property
    def session_state(self) -> str:
        """The session's state after this event, as the services' metric names it: "connected",
        "suspended" or "lost"."""
        if self in (SessionEvent.NEW_SESSION, SessionEvent.RECONNECTED):
            return "connected"
        return self.value.lower()


class WatchKind(enum.Enum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"
    DISCONNECTED = "DISCONNECTED"  # kazoo dropped the watch: read and watch again


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: WatchKind
    path: str


@dataclass(frozen=True, slots=True)
class ZkTls:
    """TLS to ZooKeeper: PEM files (``certfile``: the client's key and chain, its identity)."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile_password: str | None = None
    check_hostname: bool = True

    @classmethod
    def of(cls, settings: ZkClientSettings) -> ZkTls | None:
        """From the checked ``zookeeper.ssl.*`` keys; None when TLS is off."""
        if not settings.ssl_client_enable:
            return None
        return cls(
            cafile=settings.truststore_location,
            certfile=settings.keystore_location,
            keyfile_password=settings.keystore_password,
            check_hostname=settings.check_hostname,
        )


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


TransactionOp = CreateOp | SetDataOp | CheckOp | DeleteOp
SessionCallback = Callable[[SessionEvent, "int | None"], None]
WatchCallback = Callable[[WatchEvent], None]

_WATCH_KINDS = {
    EventType.CREATED: WatchKind.CREATED,
    EventType.DELETED: WatchKind.DELETED,
    EventType.CHANGED: WatchKind.CHANGED,
    EventType.CHILD: WatchKind.CHILD,
    EventType.NONE: WatchKind.DISCONNECTED,
}
_NODE_ERRORS: dict[type[Exception], tuple[type[ZkError], str]] = {
    kazoo_errors.NodeExistsError: (NodeExistsError, "the node already exists"),
    kazoo_errors.NoNodeError: (NoNodeError, "no such node (or no parent, for a create)"),
    kazoo_errors.BadVersionError: (BadVersionError, "the node is not at the expected version"),
    kazoo_errors.NotEmptyError: (NotEmptyError, "the node has children"),
}
_CONNECTION_ERRORS = (
    kazoo_errors.ConnectionLoss,
    kazoo_errors.SessionExpiredError,
    kazoo_errors.ConnectionClosedError,
    kazoo_errors.SessionMovedError,
)


def translate_error(exc: BaseException, op: str, path: str | None) -> ZkError:
    """The ``ZkError`` for a kazoo exception (the caller chains it with ``raise ... from``)."""
    for kazoo_type, (zk_type, meaning) in _NODE_ERRORS.items():
        if isinstance(exc, kazoo_type):
            return zk_type(f"{op}: {meaning}", path=path)
    if isinstance(exc, _CONNECTION_ERRORS):
        return ZkConnectionError(f"{op}: {type(exc).__name__} {exc}".rstrip(), path=path)
    if isinstance(exc, KazooTimeoutError | TimeoutError):
        return ZkTimeoutError(f"{op}: no answer from ZooKeeper in time", path=path)
    return ZkError(f"{op}: {type(exc).__name__} {exc}".rstrip(), path=path)


def _split_chroot(hosts: str) -> tuple[str, str | None]:
    servers, slash, chroot = hosts.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return servers, chroot or None


@dataclass(frozen=True, slots=True)
class _Listener:
    callback: SessionCallback
    loop: asyncio.AbstractEventLoop | None


def _call_on(loop: asyncio.AbstractEventLoop | None, callback: Callable, *args: Any) -> None:
    """Run ``callback(*args)`` here (kazoo's thread) or on ``loop``; never raise into kazoo."""
    if loop is None:
        try:
            callback(*args)
        except Exception:
            log.exception("ZooKeeper callback %r failed", callback)
        return
    with contextlib.suppress(RuntimeError):  # the loop is closed: its owner is gone
        loop.call_soon_threadsafe(callback, *args)


def _transfer(future: asyncio.Future, result: IAsyncResult) -> None:
    """On the event loop: copy kazoo's outcome into the future, unless it was cancelled."""
    if future.done():
        return
    try:
        value = result.get_nowait()
    except Exception as exc:
        future.set_exception(exc)
    else:
        future.set_result(value)


class ZkClient:
    """A ZooKeeper session for one owner (a broker, a controller, a CLI command).

    ``hosts`` is ZooKeeper's connect string, optionally with a chroot
    (``"127.0.0.1:2181/odradek"``); the chroot is created at start if missing, as Kafka does.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_s: float = SESSION_TIMEOUT_S_DEFAULT,
        connect_timeout_s: float = CONNECT_TIMEOUT_S_DEFAULT,
        request_timeout_s: float = REQUEST_TIMEOUT_S_DEFAULT,
        tls: ZkTls | None = None,
        secure_acls: bool = False,
    ) -> None:
        if secure_acls and (tls is None or tls.certfile is None):
            raise ValueError("secure ACLs need an authenticated connection: TLS with a certificate")
        self.hosts = hosts
        self.tls = tls
        self.secure_acls = secure_acls
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._servers, self.chroot = _split_chroot(hosts)
        self._kazoo = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            connection_retry=self._reconnect_policy(),
            default_acl=default_acls(secure_acls, "/"),
            **self._tls_options(),
        )
        self._lock = threading.Lock()
        self._listeners: list[_Listener] = []
        self._state = ZkState.LOST
        self._session_id: int | None = None
        self._last_session_id: int | None = None
        self._started = False
        self._kazoo.add_listener(self._on_kazoo_state)

    def _tls_options(self) -> dict[str, Any]:
        tls = self.tls
        if tls is None:
            return {}
        # A PEM key store holds the key and its chain: Python's ssl reads both from one file.
        return {
            "use_ssl": True,
            "ca": tls.cafile,
            "certfile": tls.certfile,
            "keyfile": tls.certfile,
            "keyfile_password": tls.keyfile_password,
            "verify_certs": True,
            "check_hostname": tls.check_hostname,
        }

    def _acls(self, path: str) -> list[ACL]:
        return default_acls(self.secure_acls, path)

    @staticmethod
    def _reconnect_policy() -> KazooRetry:
        return KazooRetry(
            max_tries=-1,
            delay=RECONNECT_DELAY_S_FIRST,
            backoff=2,
            max_delay=RECONNECT_DELAY_S_MAX,
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, waiting at most ``connect_timeout_s``; raises ``ZkTimeoutError``."""
        if self._started:
            raise ZkError("ZkClient.start() called twice")
        self._started = True
        if self.chroot is not None:
            self._ensure_chroot()
        try:
            self._kazoo.start(timeout=self.connect_timeout_s)
        except KazooTimeoutError as exc:
            self._set_closed()
            raise ZkTimeoutError(
                f"could not connect to ZooKeeper at {self.hosts} in {self.connect_timeout_s} s"
            ) from exc

    def _ensure_chroot(self) -> None:
        # kazoo prefixes every path with the chroot, so the chroot itself is made by a
        # short-lived client without one.
        bootstrap = KazooClient(
            hosts=self._servers, timeout=self.session_timeout_s, **self._tls_options()
        )
        try:
            bootstrap.start(timeout=self.connect_timeout_s)
            acl = self._acls(self.chroot or "/")
            bootstrap.ensure_path_async(self.chroot, acl=acl).get(timeout=self.request_timeout_s)
        except KazooTimeoutError as exc:
            raise ZkTimeoutError(
                f"could not create the chroot at {self._servers}", path=self.chroot
            ) from exc
        finally:
            bootstrap.stop()
            bootstrap.close()

    def close(self) -> None:
        """End the session (its ephemeral nodes go at once). Safe to call more than once."""
        with self._lock:
            if self._state is ZkState.CLOSED:
                return
        try:
            self._kazoo.stop()
            self._kazoo.close()
        except Exception:
            log.exception("closing the ZooKeeper client failed")
        self._set_closed()

    def _set_closed(self) -> None:
        with self._lock:
            self._state = ZkState.CLOSED
            self._session_id = None

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    # --- session -------------------------------------------------------------------------------

    @property
    def state(self) -> ZkState:
        return self._state

    @property
    def connected(self) -> bool:
        return self._state is ZkState.CONNECTED

    @property
    def session_id(self) -> int | None:
        """The session, kept while SUSPENDED; ``None`` before start and after LOST.

        Compare it with a node's ``ephemeralOwner`` to know whether the node is ours.
        """
        return self._session_id

    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) while connected: a test reuses them to expire the session."""
        return self._kazoo.client_id

    def add_session_listener(
        self, callback: SessionCallback, *, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """Call ``callback(event, session_id)`` on every session change.

        With ``loop`` the call is scheduled there; without, it runs on kazoo's connection thread
        and must return at once.
        """
        with self._lock:
            self._listeners.append(_Listener(callback, loop))

    def remove_session_listener(self, callback: SessionCallback) -> None:
        with self._lock:
            # ==, not `is`: each access to a bound method makes a new (equal) object.
            self._listeners = [lis for lis in self._listeners if lis.callback != callback]

    def _on_kazoo_state(self, state: str) -> None:
        # kazoo's connection thread. At CONNECTED kazoo has already stored the session id.
        with self._lock:
            if self._state is ZkState.CLOSED:
                return
            if state == KazooState.CONNECTED:
                client_id = self._kazoo.client_id
                session_id = None if client_id is None else client_id[0]
                seen_before = session_id is not None and session_id == self._last_session_id
                event = SessionEvent.RECONNECTED if seen_before else SessionEvent.NEW_SESSION
                self._state = ZkState.CONNECTED
                self._session_id = session_id
                self._last_session_id = session_id
            elif state == KazooState.SUSPENDED:
                event, self._state = SessionEvent.SUSPENDED, ZkState.SUSPENDED
                session_id = self._session_id
            else:
                event, self._state = SessionEvent.LOST, ZkState.LOST
                session_id, self._session_id = self._session_id, None
            listeners = list(self._listeners)
        log.info("ZooKeeper session %s: %s", _hex(session_id), event.name)
        for listener in listeners:
            _call_on(listener.loop, listener.callback, event, session_id)

    # --- waiting on kazoo ----------------------------------------------------------------------

    def _timeout(self, timeout_s: float | None) -> float:
        return self.request_timeout_s if timeout_s is None else timeout_s

    def _wait(self, op: str, path: str | None, result: IAsyncResult, timeout_s: float | None):
        try:
            return result.get(timeout=self._timeout(timeout_s))
        except Exception as exc:
            raise translate_error(exc, op, path) from exc

    async def _await(
        self, op: str, path: str | None, result: IAsyncResult, timeout_s: float | None
    ):
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def on_done(done: IAsyncResult) -> None:  # kazoo's callback thread
            _call_on(loop, _transfer, future, done)

        result.rawlink(on_done)
        try:
            async with asyncio.timeout(self._timeout(timeout_s)):
                return await future
        except Exception as exc:
            raise translate_error(exc, op, path) from exc

    def _watch(
        self,
        callback: WatchCallback | None,
        path: str,
        loop: asyncio.AbstractEventLoop | None,
    ) -> Callable[[WatchedEvent], None] | None:
        if callback is None:
            return None

        def on_event(event: WatchedEvent) -> None:  # kazoo's callback thread
            kind = _WATCH_KINDS.get(event.type, WatchKind.DISCONNECTED)
            _call_on(loop, callback, WatchEvent(kind, event.path or path))

        return on_event

    # --- the calls, as kazoo async results ----------------------------------------------------

    def _get(self, path: str, watch, loop) -> IAsyncResult:
        return self._kazoo.get_async(path, watch=self._watch(watch, path, loop))

    def _exists(self, path: str, watch, loop) -> IAsyncResult:
        return self._kazoo.exists_async(path, watch=self._watch(watch, path, loop))

    def _children(self, path: str, watch, loop) -> IAsyncResult:
        return self._kazoo.get_children_async(path, watch=self._watch(watch, path, loop))

    def _create(self, path, data, ephemeral, sequence, make_parents) -> IAsyncResult:
        # Parents made here (make_parents) take the node's own ACLs, as kazoo makes them.
        return self._kazoo.create_async(
            path,
            bytes(data),
            acl=self._acls(path),
            ephemeral=ephemeral,
            sequence=sequence,
            makepath=make_parents,
        )

    def _transaction(self, ops: Sequence[TransactionOp]) -> IAsyncResult:
        if not 0 < len(ops) <= TRANSACTION_OPS_MAX:
            raise ValueError(f"a transaction holds 1 to {TRANSACTION_OPS_MAX} operations")
        txn = self._kazoo.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                txn.create(
                    op.path,
                    bytes(op.data),
                    acl=self._acls(op.path),
                    ephemeral=op.ephemeral,
                    sequence=op.sequence,
                )
            elif isinstance(op, SetDataOp):
                txn.set_data(op.path, bytes(op.data), version=op.version)
            elif isinstance(op, CheckOp):
                txn.check(op.path, op.version)
            else:
                txn.delete(op.path, version=op.version)
        return txn.commit_async()

    @staticmethod
    def _transaction_outcome(ops: Sequence[TransactionOp], results: list[Any]) -> list[Any]:
        """kazoo reports a failed multi as a list holding exceptions; raise the first real one."""
        for op, result in zip(ops, results, strict=False):
            if isinstance(result, Exception) and not isinstance(
                result, kazoo_errors.RolledBackError
            ):
                raise translate_error(result, "transaction", op.path) from result
        return results

    # --- blocking form -------------------------------------------------------------------------

    def get(
        self, path: str, *, watch: WatchCallback | None = None, timeout_s: float | None = None
    ) -> tuple[bytes, ZnodeStat]:
        return self._wait("get", path, self._get(path, watch, None), timeout_s)

    def exists(
        self, path: str, *, watch: WatchCallback | None = None, timeout_s: float | None = None
    ) -> ZnodeStat | None:
        return self._wait("exists", path, self._exists(path, watch, None), timeout_s)

    def children(
        self, path: str, *, watch: WatchCallback | None = None, timeout_s: float | None = None
    ) -> list[str]:
        return self._wait("children", path, self._children(path, watch, None), timeout_s)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
        timeout_s: float | None = None,
    ) -> str:
        """Create a node; returns its path (with the number ZooKeeper added, for ``sequence``)."""
        result = self._create(path, data, ephemeral, sequence, make_parents)
        return self._wait("create", path, result, timeout_s)

    def set(
        self,
        path: str,
        data: bytes,
        *,
        version: int = ANY_VERSION,
        timeout_s: float | None = None,
    ) -> ZnodeStat:
        """Write data; with ``version`` only if the node is still at that version."""
        result = self._kazoo.set_async(path, bytes(data), version)
        return self._wait("set", path, result, timeout_s)

    def delete(
        self, path: str, *, version: int = ANY_VERSION, timeout_s: float | None = None
    ) -> None:
        self._wait("delete", path, self._kazoo.delete_async(path, version), timeout_s)

    def ensure_path(self, path: str, *, timeout_s: float | None = None) -> None:
        for prefix in _prefixes(path):  # each with its own ACLs
            result = self._kazoo.ensure_path_async(prefix, acl=self._acls(prefix))
            self._wait("ensure_path", prefix, result, timeout_s)

    def ensure_paths(
        self, paths: Iterable[str] = PERSISTENT_PATHS, *, timeout_s: float | None = None
    ) -> None:
        """Create Kafka's persistent top-level paths (each bounded by ``timeout_s``)."""
        for path in paths:
            self.ensure_path(path, timeout_s=timeout_s)

    def transaction(
        self, ops: Sequence[TransactionOp], *, timeout_s: float | None = None
    ) -> list[Any]:
        """Apply all ``ops`` or none; raises the error of the first op that failed."""
        results = self._wait(
            "transaction", ops[0].path if ops else None, self._transaction(ops), timeout_s
        )
        return self._transaction_outcome(ops, results)

    # --- asyncio form --------------------------------------------------------------------------

    async def aget(
        self, path: str, *, watch: WatchCallback | None = None, timeout_s: float | None = None
    ) -> tuple[bytes, ZnodeStat]:
        loop = asyncio.get_running_loop()
        return await self._await("get", path, self._get(path, watch, loop), timeout_s)

    async def aexists(
        self, path: str, *, watch: WatchCallback | None = None, timeout_s: float | None = None
    ) -> ZnodeStat | None:
        loop = asyncio.get_running_loop()
        return await self._await("exists", path, self._exists(path, watch, loop), timeout_s)

    async def achildren(
        self, path: str, *, watch: WatchCallback | None = None, timeout_s: float | None = None
    ) -> list[str]:
        loop = asyncio.get_running_loop()
        return await self._await("children", path, self._children(path, watch, loop), timeout_s)

    async def acreate(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
        timeout_s: float | None = None,
    ) -> str:
        result = self._create(path, data, ephemeral, sequence, make_parents)
        return await self._await("create", path, result, timeout_s)

    async def aset(
        self,
        path: str,
        data: bytes,
        *,
        version: int = ANY_VERSION,
        timeout_s: float | None = None,
    ) -> ZnodeStat:
        result = self._kazoo.set_async(path, bytes(data), version)
        return await self._await("set", path, result, timeout_s)

    async def adelete(
        self, path: str, *, version: int = ANY_VERSION, timeout_s: float | None = None
    ) -> None:
        await self._await("delete", path, self._kazoo.delete_async(path, version), timeout_s)

    async def aensure_path(self, path: str, *, timeout_s: float | None = None) -> None:
        for prefix in _prefixes(path):  # each with its own ACLs
            result = self._kazoo.ensure_path_async(prefix, acl=self._acls(prefix))
            await self._await("ensure_path", prefix, result, timeout_s)

    async def aensure_paths(
        self, paths: Iterable[str] = PERSISTENT_PATHS, *, timeout_s: float | None = None
    ) -> None:
        for path in paths:
            await self.aensure_path(path, timeout_s=timeout_s)

    async def atransaction(
        self, ops: Sequence[TransactionOp], *, timeout_s: float | None = None
    ) -> list[Any]:
        first_path = ops[0].path if ops else None
        results = await self._await("transaction", first_path, self._transaction(ops), timeout_s)
        return self._transaction_outcome(ops, results)

    def __repr__(self) -> str:
        return (
            f"ZkClient({self.hosts!r}, state={self._state.name}, session={_hex(self._session_id)})"
        )


def _prefixes(path: str) -> list[str]:
    """``/a/b/c`` -> ``/a``, ``/a/b``, ``/a/b/c``."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[: n + 1]) for n in range(len(parts))] or ["/"]


def _hex(session_id: int | None) -> str:
    return "none" if session_id is None else f"0x{session_id:x}"
