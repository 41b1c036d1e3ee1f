"""The controller's own Kafka-protocol listener: brokers send it AlterPartition and the requests
only the controller can decide here.

Kafka's ZooKeeper-mode controller lives inside a broker and receives AlterPartition on the
broker's listeners; Odradek's controller is its own process, so it listens on its own
(``listeners`` of ``odradek controller``, one endpoint; its host and port are published in
``/controller`` for brokers to find, see ``zk.election``). Brokers forward to it what clients
ask of "the controller" (ElectLeaders, the reassignment APIs). It serves:

- ApiVersions (v0-4), listing only what this listener serves (``supported_versions``); a version
  above ours gets the KIP-511 answer (error 35 in a v0 body), as the broker's listeners;
- the APIs of its ``handlers`` table (api key -> versions and an async handler), built from the
  ``controller.handlers`` package (``handlers.served``): AlterPartition (v2-3, API 56) and the
  others; each is decided as an event in order with the controller's others (a controller that
  is not active answers NOT_CONTROLLER).

Anything else closes the connection, as Kafka closes one for an API or version its listener does
not serve: another API key, an unsupported version, a header or body that does not parse, a size
prefix out of bounds (``protocol.framing``: never allocated before its bytes arrive). A bad frame
costs its connection only; the controller never stops for one, and a handler that fails (a bug)
is logged and closes the connection too.

Who may ask (issue 22): the listener may be SSL (``tls``: mutual TLS, the peer's certificate
mapped to a principal as on the brokers' listeners), and with an ``authorize`` check every
request but ApiVersions needs CLUSTER_ACTION on the cluster, checked before anything in it is
looked at: a peer that is not a broker (or a controller) gets CLUSTER_AUTHORIZATION_FAILED in the
API's own error answer (``Served.refusal``) and learns nothing, no broker epoch in particular.
Without ``authorize`` (no ``authorizer.class.name``) everyone may, as in Kafka.

Framing and decoding are the protocol layer's (``FrameDecoder``, ``decode_request``,
``encode_response_parts``), shared with the broker; the connection handling is this module's,
small on purpose: a handful of brokers each keep one connection and send a request at a time, so
asyncio streams do, and none of the broker's budgets or sendfile paths are needed. Limits:
``MAX_FRAME_BYTES`` per request, ``IDLE_TIMEOUT_S`` without a byte closes a connection (Kafka's
``connections.max.idle.ms``), and the connection quotas (``odradek.connection_quotas``, the
brokers' one home for them, with the controller's keys ``max.connections``,
``max.connections.per.ip`` and its overrides, ``max.connection.creation.rate``). Brokers are
this listener's only legitimate clients, and they reach it as anyone else does, so the
protection is per connection: one served a request past the CLUSTER_ACTION check (any request
but ApiVersions, with no authorizer) is ``proven`` and never evicted; once ``max.connections``
is reached a new connection is admitted and the least recently active idle connection that is
not proven is closed (``evict_to_admit``). A flood of idle connections only evicts itself, and a
broker that (re)connects always gets in. Over the creation rate, a connection waits before it
is served (asyncio's server has accepted it already: unlike the brokers' accept loop, the
excess does not wait in the kernel's backlog).
A large request (``large_messages.OFF_LOOP_MIN_BYTES``) is decoded and answered on a codec
thread, and handlers work through long lists in time slices (``time_slices``), so no request a
broker forwards holds the loop that elects leaders (issue 23).

Runs on the controller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from odradek.config.connection_limits import INT_MAX
from odradek.connection_quotas import ConnectionQuotas
from odradek.errors import ErrorCode
from odradek.large_messages import full_collections_deferred, off_loop, should_offload
from odradek.listeners import bind_any_port
from odradek.protocol.apis import (
    ApiKey,
    api_versions_fallback,
    build_api_versions_response,
    client_software_is_valid,
)
from odradek.protocol.codec import decode_request, encode_response_parts
from odradek.protocol.errors import InvalidFrameError, InvalidRequestError, UnsupportedVersionError
from odradek.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.security.principal_mapping import NoMatchingRule
from odradek.security.tls import ListenerTls, peer_principal

log = logging.getLogger(__name__)

API_VERSIONS_RANGE = (0, 4)
MAX_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES  # socket.request.max.bytes, as the brokers'
MAX_CONNECTIONS = 1000  # max.connections' default (ControllerConfig): brokers need a few each
LISTENER = "CONTROLLER"  # the one listener, as connection_quotas names it
IDLE_TIMEOUT_S = 600.0  # connections.max.idle.ms
READ_CHUNK_BYTES = 65_536
STOP_GRACE_S = 5.0

Handler = Callable[[Any], Awaitable[Any]]


class Served(NamedTuple):
    """One API the listener serves: its version range (inclusive), its handler, and the answer
    that refuses a request of it whole with an error (Kafka's ``getErrorResponse``)."""

    versions: tuple[int, int]
    handler: Handler
    refusal: Callable[[Any, ErrorCode], Any]


# May this principal, from this host (an address), send the controller's requests?
Authorize = Callable[[KafkaPrincipal, str], bool]
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class _Peer(NamedTuple):
    address: str  # for the log
    principal: KafkaPrincipal
    host: str  # the address an ACL names ("127.0.0.1")


class _Close(Exception):
    """Close this connection: the request cannot be answered (see the module docstring)."""


class _Connection:
    """One connection as ``connection_quotas`` sees it (``Evictable``)."""

    def __init__(self, writer: asyncio.StreamWriter, peer: str, last_activity: float):
        self.writer = writer
        self.peer = peer
        self.busy = False  # a request is being handled
        self.closed = False
        self.last_activity = last_activity
        self.proven = False  # served a request past the CLUSTER_ACTION check: a broker's

    def evict(self) -> None:
        self.closed = True
        log.info("closing %s: max.connections reached, it is the least recently used", self.peer)
        self.writer.transport.abort()


class ControllerServer:
    def __init__(
        self,
        handlers: Mapping[int, Served],
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        quotas: ConnectionQuotas | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        tls: ListenerTls | None = None,
        authorize: Authorize | None = None,
    ):
        self.handlers = dict(handlers)
        self.tls = tls
        self.authorize = authorize
        self.refused_requests = 0  # refused for want of CLUSTER_ACTION (tests read it)
        self.supported_versions: Mapping[int, tuple[int, int]] = MappingProxyType(
            {ApiKey.API_VERSIONS: API_VERSIONS_RANGE}
            | {key: served.versions for key, served in handlers.items()}
        )
        self.max_frame_bytes = max_frame_bytes
        if quotas is None:
            quotas = ConnectionQuotas(max_connections=MAX_CONNECTIONS, evict_to_admit=True)
        self.quotas = quotas
        quotas.add_listener(LISTENER, quotas.max_connections, INT_MAX)
        self.idle_timeout_s = idle_timeout_s
        self.connections: set[asyncio.Task[None]] = set()
        self.closed_connections = 0  # connections closed for a bad request (tests read it)
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port, ``listeners.bind_any_port``); returns the
        bound port."""
        tls: dict[str, Any] = {}
        if self.tls is not None:
            tls = {"ssl": self.tls.context, "ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT_S}
        if port == 0:
            self._server = await asyncio.start_server(self._accept, sock=bind_any_port(host), **tls)
        else:
            self._server = await asyncio.start_server(self._accept, host, port, **tls)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self.connections):
            task.cancel()
        if self.connections:
            await asyncio.wait(set(self.connections), timeout=STOP_GRACE_S)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), STOP_GRACE_S)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        peer = str(writer.get_extra_info("peername"))
        address = writer.get_extra_info("peername")
        host = str(address[0]) if isinstance(address, tuple) and address else ""
        delay_s = self.quotas.accept_delay_s(LISTENER)
        if delay_s > 0:  # max.connection.creation.rate (KIP-612)
            await asyncio.sleep(delay_s)
        loop = asyncio.get_running_loop()
        connection = _Connection(writer, peer, loop.time())
        refusal = self.quotas.admit(LISTENER, host, connection)
        if refusal is not None:
            log.warning(
                "refusing %s: %s reached",
                peer,
                refusal.value.replace("_", ".").replace("listener.", "listener's "),
            )
            writer.transport.abort()
            return
        if task is not None:
            self.connections.add(task)
        try:
            principal = self._principal(writer)
            await self._serve(reader, writer, _Peer(peer, principal, host), connection)
        except _Close as e:
            self.closed_connections += 1
            log.warning("closing %s: %s", peer, e)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            self.closed_connections += 1
            log.exception("closing %s: serving it failed", peer)
        finally:
            self.quotas.release(LISTENER, host, connection)
            connection.closed = True
            if task is not None:
                self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _principal(self, writer: asyncio.StreamWriter) -> KafkaPrincipal:
        if self.tls is None:
            return ANONYMOUS
        try:
            return peer_principal(writer.get_extra_info("ssl_object"), self.tls.mapper)
        except NoMatchingRule as e:
            raise _Close(f"its certificate maps to no principal ({e})") from e

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: _Peer,
        connection: _Connection,
    ) -> None:
        decoder = FrameDecoder(max_frame_bytes=self.max_frame_bytes)
        loop = asyncio.get_running_loop()
        try:
            while True:
                async with asyncio.timeout(self.idle_timeout_s):
                    data = await reader.read(READ_CHUNK_BYTES)
                if not data:
                    return
                connection.last_activity = loop.time()
                try:
                    frames = decoder.feed(data)
                except InvalidFrameError as e:
                    raise _Close(f"malformed frame: {e}") from e
                for frame in frames:
                    connection.busy = True
                    try:
                        # Its responses are small and hold no file regions: one write each.
                        writer.write(b"".join(await self._handle(frame, peer, connection)))
                        await writer.drain()
                    finally:
                        connection.busy = False
                        connection.last_activity = loop.time()
        finally:
            decoder.close()

    async def _handle(self, frame: memoryview, peer: _Peer, connection: _Connection) -> list:
        """One request to its response's parts (size prefix included); ``_Close`` otherwise."""
        if not should_offload(frame, int.from_bytes(frame[:2], "big", signed=True)):
            return await self._answer(frame, peer, connection, offload=False)
        with full_collections_deferred():  # a large request (``large_messages``)
            return await self._answer(frame, peer, connection, offload=True)

    async def _answer(
        self, frame: memoryview, peer: _Peer, connection: _Connection, *, offload: bool
    ) -> list:
        try:
            if offload:  # a large request (``large_messages``): decoded on a codec thread
                header, request = await off_loop(decode_request, frame, self.supported_versions)
            else:
                header, request = decode_request(frame, self.supported_versions)
        except UnsupportedVersionError as e:
            if e.header.api_key == ApiKey.API_VERSIONS:
                return encode_frame(encode_response_parts(e.header, api_versions_fallback()))
            raise _Close(f"not served by the controller: {e}") from e
        except InvalidRequestError as e:
            raise _Close(f"malformed request: {e}") from e
        if header.api_key == ApiKey.API_VERSIONS:
            error = (
                ErrorCode.none if client_software_is_valid(request) else ErrorCode.invalid_request
            )
            response = build_api_versions_response(
                header.api_version, error, versions=self.supported_versions
            )
        else:
            served = self.handlers[header.api_key]
            if self.authorize is not None and not self.authorize(peer.principal, peer.host):
                self.refused_requests += 1
                log.warning(
                    "refusing %s from %s (%s): CLUSTER_ACTION on the cluster is not allowed",
                    ApiKey(header.api_key).name,
                    peer.principal,
                    peer.address,
                )
                response = served.refusal(request, ErrorCode.cluster_authorization_failed)
            else:
                connection.proven = True  # a broker's (or a controller's) connection
                response = await served.handler(request)
        if offload:
            return encode_frame(await off_loop(encode_response_parts, header, response))
        return encode_frame(encode_response_parts(header, response))
