"""The broker's TCP server: accepts connections, bounds them, and dispatches their requests.

Connections themselves (framing, order, back-pressure, responses) are ``connection``'s. The
server owns what connections share, each limit with Kafka's key where Kafka has one:

- the connection quotas (``connection_quotas``, the broker's, shared by its servers):
  ``max.connections`` and ``listener.name.<l>.max.connections``, ``max.connections.per.ip`` and
  its overrides refuse a connection at once; ``max.connection.creation.rate`` (broker-wide and per
  listener, KIP-612) paces the listener's accept loop, which waits before it hands a connection
  over and accepts the next, so the excess waits in the kernel's backlog, as Kafka's acceptor;
- ``queued.max.request.bytes``: the request memory budget that large frames reserve as their
  bytes arrive (``budget``); ``queued.max.requests``: requests read and not yet handled;
- ``socket.request.max.bytes``: the largest frame (a larger size prefix closes the connection);
- ``odradek.connection.max.inflight.requests``: whole requests one connection may queue;
- ``connections.max.idle.ms`` and ``odradek.socket.request.receive.timeout.ms``: a reaper task
  closes idle connections and requests that take too long to arrive, and finds the clients that
  went away while their connection was paused (a paused socket is not watched by asyncio).

``handle`` turns one frame into the response's parts: decode, call the API's handler, encode.
A frame of ``large_messages.OFF_LOOP_MIN_BYTES`` or more (Produce aside) is decoded and its
answer encoded on a codec thread, and handlers work through long arrays in time slices
(``time_slices``), so one request never holds the loop for long (docs/security.md, "Work per
request").
A Produce request's size is counted against the client's ``producer_byte_rate`` quota
(``broker.quotas``) before its handler runs, and every client request's handler time on the loop
against ``request_percentage`` after; any answer announcing a ``throttle_time_ms`` (that
one, or the Fetch handler's ``consumer_byte_rate``) mutes the connection for that long (KIP-219).
Requests that cannot be answered raise ``CloseConnection`` with the reason: a malformed frame or
header, an unsupported version of an API other than ApiVersions (which gets the KIP-511
answer), a handler or encoder that failed (a bug: logged with its traceback). The broker itself
never stops for a bad request.

One ``BrokerServer`` per listener (``config.endpoints.Listener``); it serves what its listener's
role serves (``handlers.served_versions``). A controller request (LeaderAndIsr, StopReplica,
UpdateMetadata) on a client listener is answered with CLUSTER_AUTHORIZATION_FAILED at the top and
for every partition (Kafka's answer to a client without ClusterAction), logged and counted; a
client API on the control-plane listener closes the connection, as Kafka does for an API its
listener does not enable. The request budgets are the broker's, shared by all its servers.

An SSL listener's server is given its ``ListenerTls`` (``security.tls``): asyncio does the
handshake before the connection sees a byte (within ``odradek.socket.request.receive.timeout.ms``),
and the connection takes its principal from the peer's certificate
(``KafkaConnection.connection_made``). A connection still in its handshake is not yet counted
against ``max.connections`` (asyncio hands it over only once the handshake is done).

A SASL listener's server is given its ``ListenerSasl``: until a connection has authenticated,
``handle`` lets only ApiVersions, SaslHandshake and SaslAuthenticate through
(``sasl_authenticator``; anything else closes it, reason ``unauthenticated``), or, after a
SaslHandshake v0, takes each frame as a raw SASL token and answers a raw frame. A failed
exchange is answered after ``connection.failed.authentication.delay.ms`` and the connection
closed (reason ``authentication_failed``); each outcome is counted in
``odradek_sasl_authentications_total`` (listener, mechanism, result) and logged without a
secret. Once authenticated the connection's principal is ``User:<name>``. KIP-368, as Kafka's
Processor: on an authenticated connection a SaslHandshake that begins a re-authentication
(``SaslAuthenticator.begin_reauthentication``) goes back to the authenticator, its frames bounded
as before the first; otherwise a request of a connection whose session has expired closes it
(reason ``session_expired``, Kafka's expired-connections-killed-count). Re-authentications are
counted with results ``reauthentication_succeeded`` and ``reauthentication_failed``.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import select
import socket
import time
from collections.abc import Awaitable
from typing import NoReturn

from odradek.broker.budget import UNBOUNDED, RequestBudgets
from odradek.broker.connection import CloseConnection, CloseReason, KafkaConnection
from odradek.broker.context import BrokerContext, DeferredAnswer, RequestContext
from odradek.broker.handlers import CONTROLLER_APIS, ERROR_RESPONSES, HANDLERS, served_versions
from odradek.broker.quotas import NANOS_TO_PERCENTAGE, QuotaType, TimedHandler
from odradek.broker.sasl_authenticator import AuthenticationFailed, ListenerSasl, UnexpectedRequest
from odradek.config.broker import BROKER_KEYS
from odradek.config.connection_limits import INT_MAX
from odradek.config.endpoints import Listener
from odradek.connection_quotas import ConnectionQuotas, Refusal
from odradek.errors import ErrorCode
from odradek.large_messages import full_collections_deferred, off_loop, should_offload
from odradek.listeners import bind_any_port
from odradek.protocol.apis import ApiKey, api_versions_fallback
from odradek.protocol.codec import decode_request, encode_response_parts
from odradek.protocol.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.framing import DEFAULT_MAX_FRAME_BYTES, DEFAULT_READ_BUFFER_BYTES
from odradek.protocol.header import REQUEST_HEADER_MIN_BYTES, RequestHeader
from odradek.security.principal import KafkaPrincipal
from odradek.security.tls import ListenerTls

log = logging.getLogger(__name__)

# The configuration keys' defaults, for a server built without a BrokerConfig (tests, tools).
MAX_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES  # socket.request.max.bytes
MAX_INFLIGHT_REQUESTS: int = BROKER_KEYS["odradek.connection.max.inflight.requests"].default
MAX_CONNECTIONS: int = BROKER_KEYS["max.connections"].default
QUEUED_MAX_REQUESTS: int = BROKER_KEYS["queued.max.requests"].default
QUEUED_MAX_REQUEST_BYTES = UNBOUNDED  # queued.max.request.bytes (the broker config sets one)
IDLE_TIMEOUT_MS: int = BROKER_KEYS["connections.max.idle.ms"].default
RECEIVE_TIMEOUT_MS: int = BROKER_KEYS["odradek.socket.request.receive.timeout.ms"].default
REAPER_INTERVAL_S_MAX = 1.0  # the reaper checks at least this often
LISTEN_BACKLOG = 100  # asyncio's servers' default (Kafka's socket.listen.backlog.size: 50)
ACCEPT_RETRY_S = 0.1  # after an accept failed (out of files)
STOP_GRACE_S = 5.0  # how long requests already received may take to finish at shutdown


# The cluster's own requests, exempt from request_percentage as Kafka's cluster actions are.
QUOTA_EXEMPT_APIS = CONTROLLER_APIS | {ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS}


def _exempt(api_key: int, request: object, response: object) -> bool:
    if api_key in QUOTA_EXEMPT_APIS:
        return True
    if api_key == ApiKey.FETCH:
        return getattr(request, "replica_id", -1) >= 0  # a follower
    return api_key == ApiKey.PRODUCE and response is None  # acks=0, as Kafka


def throttle_ms_of(response: object) -> int:
    """The ``throttle_time_ms`` an answer announces (0: none, or no such field)."""
    throttle = getattr(response, "throttle_time", None)
    return 0 if throttle is None else int(throttle.total_seconds() * 1000)


def with_throttle(response: object, throttle_ms: int) -> object:
    """The answer announcing at least ``throttle_ms`` (KIP-219), if it has the field."""
    if throttle_ms <= 0 or response is None or throttle_ms <= throttle_ms_of(response):
        return response
    if "throttle_time" not in getattr(response, "__dataclass_fields__", {}):
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))


def _departed(connections: set[KafkaConnection]) -> list[KafkaConnection]:
    """Paused connections whose client closed or reset its end.

    asyncio does not watch the socket of a paused transport, so a client that went away while
    its connection waited for memory (or for queue room) would hold what it has until a timeout;
    one ``poll`` of those sockets for hang-up and error, without reading, finds them.
    """
    poller = select.poll()
    paused: dict[int, KafkaConnection] = {}
    for connection in connections:
        transport = connection.transport
        if transport is None or transport.is_closing() or transport.is_reading():
            continue
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.fileno() >= 0:
            paused[sock.fileno()] = connection
            poller.register(sock.fileno(), _HANG_UP)
    if not paused:
        return []
    return [paused[fd] for fd, _ in poller.poll(0)]


_HANG_UP = select.POLLRDHUP | select.POLLHUP | select.POLLERR


class BrokerServer:
    """Accepts Kafka connections on one listener and dispatches their requests to the handlers."""

    def __init__(
        self,
        context: BrokerContext,
        listener: Listener,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_inflight: int = MAX_INFLIGHT_REQUESTS,
        max_connections: int = MAX_CONNECTIONS,
        budgets: RequestBudgets | None = None,
        queued_max_requests: int = QUEUED_MAX_REQUESTS,
        queued_max_request_bytes: int = QUEUED_MAX_REQUEST_BYTES,
        idle_timeout_ms: int = IDLE_TIMEOUT_MS,
        receive_timeout_ms: int = RECEIVE_TIMEOUT_MS,
        read_buffer_bytes: int = DEFAULT_READ_BUFFER_BYTES,
        tls: ListenerTls | None = None,
        sasl: ListenerSasl | None = None,
        quotas: ConnectionQuotas | None = None,
        max_connection_creation_rate: int = INT_MAX,
    ):
        self.context = context
        self.listener = listener
        self.tls = tls
        self.sasl = sasl
        self.served_versions = served_versions(listener.role)
        self.max_frame_bytes = max_frame_bytes
        self.max_inflight = max_inflight
        self.max_connections = max_connections
        if quotas is None:  # a server of its own (tests): quotas of its own
            metrics = context.metrics.connection_quotas if context.metrics else None
            quotas = ConnectionQuotas(max_connections=max_connections, metrics=metrics)
        quotas.add_listener(listener.name, max_connections, max_connection_creation_rate)
        self.quotas = quotas
        self.idle_timeout_s = idle_timeout_ms / 1000
        self.receive_timeout_s = receive_timeout_ms / 1000
        self.read_buffer_bytes = read_buffer_bytes
        if budgets is None:  # a server of its own (tests): budgets of its own
            budgets = RequestBudgets.of(
                queued_max_request_bytes=queued_max_request_bytes,
                queued_max_requests=queued_max_requests,
            )
        self.request_memory = budgets.memory
        self.request_slots = budgets.slots
        self.frame_buffers = budgets.frame_buffers
        self.connections: set[KafkaConnection] = set()
        self.workers: set[asyncio.Task[None]] = set()  # one per connection, until it finishes
        self._listening: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._handovers: set[asyncio.Task[None]] = set()  # TLS handshakes under way
        self._reaper: asyncio.Task[None] | None = None
        metrics = context.metrics
        if metrics is not None:  # read at scrape time (from the scraping thread: plain ints)
            connections = metrics.connections.labels(listener=listener.name)
            connections.set_function(lambda: len(self.connections))
            metrics.request_memory_used.set_function(lambda: self.request_memory.used)
            metrics.requests_queued.set_function(lambda: self.request_slots.used)

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port, ``listeners.bind_any_port``); returns the
        bound port."""
        if port == 0:
            listening = bind_any_port(host)
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            listening = socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG)
        listening.listen(LISTEN_BACKLOG)
        listening.setblocking(False)
        self._listening = listening
        self._acceptor = asyncio.ensure_future(self._accept_loop(listening))
        self._reaper = asyncio.ensure_future(self._reap())
        return listening.getsockname()[1]

    async def _accept_loop(self, listening: socket.socket) -> None:
        """Accept, wait what ``max.connection.creation.rate`` asks (the next connections wait
        in the backlog meanwhile), hand the socket to a ``KafkaConnection``."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listening)
            except OSError as e:  # EMFILE and the like: asyncio's server backs off likewise
                log.warning("accepting on listener %s failed: %s", self.listener.name, e)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            delay_s = self.quotas.accept_delay_s(self.listener.name)
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            handover = asyncio.ensure_future(self._hand_over(sock))
            self._handovers.add(handover)
            handover.add_done_callback(self._handovers.discard)

    async def _hand_over(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        tls: dict = {}
        if self.tls is not None:  # a handshake is a request arriving: the same time bound
            tls = {"ssl": self.tls.context, "ssl_handshake_timeout": self.receive_timeout_s}
        try:
            await loop.connect_accepted_socket(lambda: KafkaConnection(self), sock, **tls)
        except (OSError, ConnectionError, TimeoutError) as e:  # a failed TLS handshake
            log.info("connection on listener %s failed before it began: %r", self.listener.name, e)
            sock.close()

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self._acceptor is not None:
            self._acceptor.cancel()
        if self._listening is not None:
            self._listening.close()
        for handover in list(self._handovers):
            handover.cancel()
        for connection in list(self.connections):
            connection.close_for(CloseReason.SHUTDOWN, "the broker is stopping")
        if self.workers:  # requests already received finish; then nothing may touch the logs
            _, pending = await asyncio.wait(set(self.workers), timeout=STOP_GRACE_S)
            for worker in pending:
                worker.cancel()

    # -- connections ---------------------------------------------------------------------

    def accept(self, connection: KafkaConnection) -> Refusal | None:
        """Admit ``connection`` under the connection quotas, or say why not."""
        refusal = self.quotas.admit(self.listener.name, connection.ip, connection)
        if refusal is None:
            self.connections.add(connection)
        return refusal

    def release(self, connection: KafkaConnection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self.quotas.release(self.listener.name, connection.ip, connection)

    def track_worker(self, worker: asyncio.Task[None]) -> None:
        self.workers.add(worker)
        worker.add_done_callback(self.workers.discard)

    def connection_closed(self, reason: CloseReason) -> None:
        metrics = self.context.metrics
        if metrics is not None:
            metrics.connections_closed.labels(reason=reason.value).inc()

    async def _reap(self) -> None:
        """Close idle connections, requests that take too long to arrive, and paused
        connections whose client has gone."""
        interval_s = min(REAPER_INTERVAL_S_MAX, self.idle_timeout_s / 2, self.receive_timeout_s / 2)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            now = loop.time()
            for connection in list(self.connections):
                reason = connection.expired(now)
                if reason is not None:
                    connection.close_for(reason, "closed by the connection reaper")
            for connection in _departed(self.connections):
                connection.close_for(CloseReason.PEER_GONE, "the client went away while paused")

    # -- requests ------------------------------------------------------------------------

    async def handle(
        self, frame: memoryview, connection: KafkaConnection
    ) -> list | asyncio.Future[list | None] | None:
        """One request frame to the response's parts, or None for no answer (acks=0), or a
        future of them for an answer that waits (``DeferredAnswer``).

        Raises ``CloseConnection`` when the request cannot be answered; see the module.
        """
        started = time.perf_counter()
        sasl = connection.sasl
        if sasl is not None and sasl.expects_raw_token:  # after SaslHandshake v0: no header
            return await self._authenticate_raw(frame, connection)
        if not should_offload(frame, int.from_bytes(frame[:2], "big", signed=True)):
            return await self._handle(frame, connection, started, offload=False)
        with full_collections_deferred():  # a large request: see ``large_messages``
            return await self._handle(frame, connection, started, offload=True)

    async def _handle(
        self, frame: memoryview, connection: KafkaConnection, started: float, *, offload: bool
    ) -> list | asyncio.Future[list | None] | None:
        """``handle`` past SASL's raw tokens; ``offload``: a large request (``large_messages``)."""
        sasl = connection.sasl
        try:
            if offload:
                header, request = await off_loop(decode_request, frame)
            else:
                header, request = decode_request(frame)
        except UnsupportedVersionError as e:
            if e.header.api_key == ApiKey.API_VERSIONS:
                return encode_response_parts(e.header, api_versions_fallback())
            raise CloseConnection(CloseReason.UNSUPPORTED_VERSION, str(e)) from e
        except InvalidRequestError as e:
            raise CloseConnection(CloseReason.MALFORMED_REQUEST, str(e)) from e
        if sasl is not None and sasl.complete:
            if header.api_key == ApiKey.SASL_HANDSHAKE and sasl.begin_reauthentication():
                self._bound_frames_for_authentication(connection)
                log.info(
                    "SASL connection %s on listener %s (%s): re-authenticating",
                    connection.peer,
                    self.listener.name,
                    connection.principal,
                )
                return await self._authenticate(header, request, connection, started)
            if sasl.session_expired():  # Kafka's Processor: closed, and counted
                raise CloseConnection(
                    CloseReason.SESSION_EXPIRED,
                    f"the SASL session of {connection.principal} on listener "
                    f"{self.listener.name} expired without re-authentication "
                    f"(connections.max.reauth.ms, KIP-368)",
                )
        elif sasl is not None and header.api_key != ApiKey.API_VERSIONS:
            return await self._authenticate(header, request, connection, started)
        if sasl is not None and not sasl.complete:
            self._check_sasl_allows(header, connection)
        throttle_ms = handler_ns = 0
        quotas = self.context.client_quotas
        if quotas is not None and quotas.enabled and header.api_key == ApiKey.PRODUCE:
            # Kafka counts the whole request's size (request.sizeInBytes), throttled or not.
            throttle_ms = quotas.record(
                QuotaType.PRODUCE, connection.principal.name, header.client_id or "", len(frame)
            ).throttle_ms
        if header.api_key in self.served_versions:
            context = RequestContext(
                header,
                self.context,
                self.listener,
                self.served_versions,
                connection.client_host,
                connection.principal,
                f"{self.listener.name}/{connection.peer}#{connection.serial}",
            )
            handling = HANDLERS[header.api_key](context, request)
            try:
                if quotas is not None and quotas.enabled:  # timed only when it may matter
                    timed = TimedHandler(handling)
                    response = await timed
                    handler_ns = timed.elapsed_ns
                else:
                    response = await handling
            except Exception as e:
                raise _handler_failed(header.api_key, e) from e
        elif header.api_key in CONTROLLER_APIS:
            response = await self._refuse_controller_request(
                header.api_key, request, connection.peer, offload
            )
        else:
            raise CloseConnection(
                CloseReason.NOT_ON_LISTENER,
                f"api key {header.api_key} is not served on listener {self.listener.name}",
            )
        if quotas is not None and quotas.enabled and not _exempt(header.api_key, request, response):
            # request_percentage: the handler's own time on the loop (``broker.quotas``)
            request_throttle_ms = quotas.record(
                QuotaType.REQUEST,
                connection.principal.name,
                header.client_id or "",
                handler_ns * NANOS_TO_PERCENTAGE,
            ).throttle_ms
            throttle_ms = max(throttle_ms, request_throttle_ms)
        if isinstance(response, DeferredAnswer):
            connection.mute_for(throttle_ms)
            return asyncio.ensure_future(
                self._finish(header, response.response, started, throttle_ms, offload=offload)
            )
        response = with_throttle(response, throttle_ms)
        connection.mute_for(max(throttle_ms, throttle_ms_of(response)))
        if offload:
            return await self._encode_off_loop(header, response, started)
        return self._encode(header, response, started)

    def _check_sasl_allows(self, header: RequestHeader, connection: KafkaConnection) -> None:
        assert connection.sasl is not None
        try:
            connection.sasl.check_allowed(header)
        except UnexpectedRequest as e:
            raise CloseConnection(
                CloseReason.UNAUTHENTICATED, f"{e} on listener {self.listener.name}"
            ) from e

    async def _authenticate(
        self, header: RequestHeader, request: object, connection: KafkaConnection, started: float
    ) -> list | None:
        """A SaslHandshake or SaslAuthenticate of a connection not yet authenticated."""
        sasl = connection.sasl
        assert sasl is not None
        self._check_sasl_allows(header, connection)
        try:
            if header.api_key == ApiKey.SASL_HANDSHAKE:
                response = sasl.handshake(header, request)
            else:
                response = await sasl.authenticate(header, request)
        except AuthenticationFailed as e:
            await self._fail_authentication(
                e, connection, self._encode(header, e.response, started)
            )
        if sasl.complete:
            self._authenticated(connection)
        return self._encode(header, response, started)

    async def _authenticate_raw(self, token: memoryview, connection: KafkaConnection) -> list:
        """A raw SASL token after SaslHandshake v0: the server's token as a raw frame."""
        sasl = connection.sasl
        assert sasl is not None
        try:
            challenge = await sasl.authenticate_raw(bytes(token))
        except AuthenticationFailed as e:
            await self._fail_authentication(e, connection, None)  # Kafka answers nothing
        if sasl.complete:
            self._authenticated(connection)
        return [challenge]

    async def _fail_authentication(
        self, e: AuthenticationFailed, connection: KafkaConnection, answer: list | None
    ) -> NoReturn:
        """Count and log a failed exchange, wait Kafka's delay, then close after ``answer``."""
        reauthenticating = connection.sasl is not None and connection.sasl.reauthenticating
        self._count_authentication(
            e.mechanism, "reauthentication_failed" if reauthenticating else "failed"
        )
        log.warning(
            "%s of %s on listener %s failed (%s): %s",
            "re-authentication" if reauthenticating else "authentication",
            connection.peer,
            self.listener.name,
            e.mechanism,
            e,
        )
        delay_ms = self.sasl.failed_authentication_delay_ms if self.sasl else 0
        if delay_ms > 0:  # Kafka's connection.failed.authentication.delay.ms
            await asyncio.sleep(delay_ms / 1000)
        raise CloseConnection(
            CloseReason.AUTHENTICATION_FAILED, f"SASL authentication failed: {e}", answer
        ) from None

    def _authenticated(self, connection: KafkaConnection) -> None:
        """The exchange completed: the principal (the same one after a re-authentication),
        frames of any size again, and a count (Kafka's successful-(re)authentication)."""
        sasl = connection.sasl
        assert sasl is not None
        again = sasl.successful_authentications > 1
        connection.principal = KafkaPrincipal.user(sasl.user)
        connection.decoder.max_frame_bytes = self.max_frame_bytes
        connection.decoder.min_frame_bytes = REQUEST_HEADER_MIN_BYTES  # Kafka requests only
        self._count_authentication(
            sasl.mechanism or "", "reauthentication_succeeded" if again else "succeeded"
        )
        expires = sasl.session_expires_at_ms
        log.info(
            "SASL connection %s on listener %s: principal %s (%s)%s, session %s",
            connection.peer,
            self.listener.name,
            connection.principal,
            sasl.mechanism,
            " re-authenticated" if again else "",
            "without expiry"
            if expires is None
            else f"expires at {datetime.datetime.fromtimestamp(expires / 1000, datetime.UTC)}",
        )

    def _bound_frames_for_authentication(self, connection: KafkaConnection) -> None:
        """Frames during a re-authentication are bounded as before the first (Kafka reads
        them with ``sasl.server.max.receive.size``), and may be raw tokens."""
        if self.sasl is not None:
            connection.decoder.max_frame_bytes = min(
                self.max_frame_bytes, self.sasl.max_receive_bytes
            )
        connection.decoder.min_frame_bytes = 0

    def _count_authentication(self, mechanism: str, result: str) -> None:
        metrics = self.context.metrics
        if metrics is not None:  # mechanism: an enabled one or "unsupported" (bounded labels)
            metrics.sasl_authentications.labels(
                listener=self.listener.name, mechanism=mechanism, result=result
            ).inc()

    async def _finish(
        self,
        header: RequestHeader,
        deferred: Awaitable[object],
        started: float,
        throttle_ms: int = 0,
        *,
        offload: bool = False,
    ) -> list | None:
        """A deferred answer's parts, once it is complete (see ``DeferredAnswer``); a large
        request's (``offload``) built and encoded as in ``handle``."""
        with full_collections_deferred() if offload else contextlib.nullcontext():
            try:
                response = await deferred
            except Exception as e:
                raise _handler_failed(header.api_key, e) from e
            response = with_throttle(response, throttle_ms)
            if offload:
                return await self._encode_off_loop(header, response, started)
            return self._encode(header, response, started)

    def _observe(self, header: RequestHeader, response: object, started: float) -> None:
        metrics = self.context.metrics
        if metrics is not None:
            name = "".join(w.capitalize() for w in ApiKey(header.api_key).name.split("_"))
            error = getattr(response, "error_code", ErrorCode.none)
            metrics.observe_request(name, time.perf_counter() - started, error)

    def _encode(self, header: RequestHeader, response: object, started: float) -> list | None:
        self._observe(header, response, started)
        if response is None:
            return None
        try:
            return encode_response_parts(header, response)
        except Exception as e:
            log.exception("encoding the response to api key %d failed", header.api_key)
            raise CloseConnection(
                CloseReason.ENCODE_ERROR, f"response to api key {header.api_key}: {e!r}"
            ) from e

    async def _encode_off_loop(
        self, header: RequestHeader, response: object, started: float
    ) -> list | None:
        """``_encode`` of the answer to a large request, its encoding on a codec thread."""
        if response is None:
            return self._encode(header, response, started)
        try:
            parts = await off_loop(encode_response_parts, header, response)
        except Exception as e:
            log.exception("encoding the response to api key %d failed", header.api_key)
            raise CloseConnection(
                CloseReason.ENCODE_ERROR, f"response to api key {header.api_key}: {e!r}"
            ) from e
        self._observe(header, response, started)
        return parts

    async def _refuse_controller_request(
        self, api_key: int, request: object, peer: str, offload: bool
    ) -> object:
        """A controller request on a client listener: not this client's to send. Its answer
        names every partition (as Kafka's): a large one (``offload``: 100,000 partitions in
        1 MB) is built on a codec thread, as it was decoded."""
        api = "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
        log.warning(
            "refusing %s from %s on listener %s: the controller's requests are served only on "
            "the control-plane listener",
            api,
            peer,
            self.listener.name,
        )
        if self.context.metrics is not None:
            self.context.metrics.refused_controller_requests.labels(api=api).inc()
        refuse, error = ERROR_RESPONSES[api_key], ErrorCode.cluster_authorization_failed
        if offload:
            return await off_loop(refuse, request, error)
        return refuse(request, error)


def _handler_failed(api_key: int, error: Exception) -> CloseConnection:
    """A handler's unexpected exception, logged with its traceback: the connection is closed."""
    log.exception("handler for api key %d failed", api_key)
    return CloseConnection(
        CloseReason.HANDLER_ERROR, f"handler for api key {api_key} failed: {error!r}"
    )
