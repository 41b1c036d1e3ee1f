"""One client connection: bytes in, requests handled in order, responses out with sendfile.

Per connection, as Kafka's SocketServer does it:

- Bytes are received with ``asyncio.BufferedProtocol`` straight into the ``FrameDecoder``'s
  buffers (``protocol.framing``), so a Produce request's records reach ``Log.append`` as a view
  of the bytes the kernel wrote. Large frames take their memory from the broker's request memory
  budget (``queued.max.request.bytes``) as their bytes arrive, never what a size prefix announces.
- Requests are handled one at a time, in arrival order, and responses leave in request order.
  Requests pipelined on the connection are handled back to back, and most never wait (their
  answer is written at once), so the connection gives the loop a turn every
  ``time_slices.SLICE_S`` of its own work (``TimeSlices``, one request per element): a thousand
  tiny requests written at once hold the loop no longer than one slice each time. One
  kind of answer may wait while the next request is handled: an ``acks=all`` produce whose
  records are appended and wait for replication (the handler returns a future of the answer,
  ``DeferredAnswer``). Its answer joins the ordered ``answers`` queue, written by the
  ``_write_answers`` task as each completes; any later answer waits behind it. So a producer's
  requests are appended in the order sent while their replication overlaps, instead of each
  waiting for the previous one's replication (which would bound a connection's throughput to one
  request per replication round trip). At most ``MAX_WAITING_ANSWERS`` wait; then the connection
  handles nothing more until the oldest is written. At most ``max_inflight`` whole frames (and
  at most ``socket.request.max.bytes`` of large ones) wait behind the one being handled, and all
  connections together hold at most ``queued.max.requests``; past those limits the connection
  stops taking frames out of its read buffer, and once that is full, stops reading its socket
  (back-pressure, nothing dropped).
- A response is written as its parts: buffers with one ``transport.write``, record regions of
  segment files with ``loop.sendfile(..., fallback=False)``, so fetched records never enter
  Python. A sendfile that sends fewer bytes than the frame announced (the segment was truncated
  or deleted under it) leaves the stream unusable: the connection is closed. On a TLS
  connection the kernel cannot send a file (the records must be encrypted): regions are read
  with ``os.pread`` (never the file's shared position) in chunks of ``TLS_READ_CHUNK_BYTES``,
  each written once the transport has room, and a short read closes the connection the same
  way. asyncio's own sendfile fallback is not used: it seeks the file object, which every
  connection fetching from that segment shares.
- On an SSL listener the handshake is done before ``connection_made``; the connection's
  principal comes from the client's certificate (``security.tls.peer_principal``), logged
  when there is one. A certificate that no ``ssl.principal.mapping.rules`` rule maps closes the
  connection (Kafka fails its authentication).
- On a SASL listener (SASL_PLAINTEXT, SASL_SSL) the connection starts unauthenticated
  (``sasl``, a ``broker.sasl_authenticator.SaslAuthenticator``): the server lets only
  ApiVersions, SaslHandshake and SaslAuthenticate through until the exchange completes, and
  the frames are bounded by ``sasl.server.max.receive.size`` until then (and may be shorter
  than a request header: after SaslHandshake v0 they are raw tokens, which the server answers
  with raw frames). A failed exchange is answered (unless it was a raw token), then the
  connection is closed (``CloseConnection.answer``).
- Requests already received whole are still handled after the client goes away (their answers
  go nowhere), as Kafka handles what reached its request queue: a producer's retry then finds
  the first attempt in the log instead of racing it.
- Nothing a request does can hang the connection silently: any failure while decoding, handling
  or encoding closes it, with a log line and a count in ``odradek_connections_closed_total``
  labelled with the reason (``CloseReason``): once per connection, for the first reason. A
  request that closes the connection (one that does not parse, an unserved version, a handler
  failure) closes it only once the answers of the requests before it are written, waiting ones
  included: Kafka reads a connection's next request only after answering the previous one, so
  a request that was answerable is answered whatever follows it. A size prefix out of bounds
  likewise: nothing more is read, the frames received before it are handled and answered, then
  the connection is closed.
- A client over its quota (``broker.quotas``) is answered at once with ``throttle_time_ms`` and
  its next request is handled only once that time is over (KIP-219's muted channel,
  ``mute_for``); the bytes it sends meanwhile wait in the queue under the usual bounds.
- ``connections.max.idle.ms`` closes a connection with nothing to do and nothing received for
  that long (half-open ones included; TCP keepalive is on as well), and
  ``odradek.socket.request.receive.timeout.ms`` one whose request has been arriving for that
  long (a slowloris trickle). The server's reaper checks both (``expired``).

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import os
import socket
from collections import deque
from typing import TYPE_CHECKING

from odradek.broker.sasl_authenticator import SaslAuthenticator
from odradek.protocol.errors import InvalidFrameError
from odradek.protocol.framing import Frame, FrameDecoder, encode_frame
from odradek.protocol.header import REQUEST_HEADER_MIN_BYTES
from odradek.protocol.parts import FileRegion, is_buffer
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.security.principal_mapping import NoMatchingRule
from odradek.security.tls import ListenerTls, peer_principal
from odradek.time_slices import TimeSlices

if TYPE_CHECKING:
    from odradek.broker.server import BrokerServer

log = logging.getLogger(__name__)

# Answers of one connection that may wait for replication at once. The Java client and an
# idempotent librdkafka keep at most 5 requests in flight; a plain librdkafka producer keeps up
# to 1,000,000 and puts one partition in each ProduceRequest (librdkafka#1700), so with
# thousands of partitions its acks=all throughput is this many requests per replication round
# trip (8 made the first record to each of 3,000 partitions take 15 s, 64 takes 3-5 s:
# bench/scale_bench.py). Each waiting answer holds only its results: the records are appended.
MAX_WAITING_ANSWERS = 64
# Record bytes read per write on a TLS connection (no sendfile there); 16 TLS records.
TLS_READ_CHUNK_BYTES = 256 * 1024
_CONNECTION_SERIALS = itertools.count(1)


class CloseReason(enum.StrEnum):
    """Why the broker closed a connection: the label values of the closed-connections metric."""

    MALFORMED_FRAME = "malformed_frame"  # a size prefix out of bounds
    MALFORMED_REQUEST = "malformed_request"  # a header or body that does not parse
    UNSUPPORTED_VERSION = "unsupported_version"  # an API or version not served (not ApiVersions)
    HANDLER_ERROR = "handler_error"  # a handler raised: a bug, logged with its traceback
    ENCODE_ERROR = "encode_error"  # the response could not be encoded: a bug, logged
    SHORT_SENDFILE = "short_sendfile"  # fewer record bytes than the frame announced
    WRITE_ERROR = "write_error"  # an unexpected error while writing a response
    IDLE = "idle"  # connections.max.idle.ms
    RECEIVE_TIMEOUT = "receive_timeout"  # odradek.socket.request.receive.timeout.ms
    TOO_MANY_CONNECTIONS = "too_many_connections"  # connection_quotas: refused or evicted
    PEER_GONE = "peer_gone"  # the client closed or reset it: found while paused or writing
    NOT_ON_LISTENER = "not_on_listener"  # a client API on the control plane, as Kafka closes it
    AUTHENTICATION_FAILED = "authentication_failed"  # no principal mapping rule; SASL refused
    SESSION_EXPIRED = "session_expired"  # KIP-368: not re-authenticated in time (Kafka's
    # expired-connections-killed-count)
    UNAUTHENTICATED = "unauthenticated"  # a request SASL does not allow before authentication
    SHUTDOWN = "shutdown"  # the broker is stopping


class CloseConnection(Exception):
    """Raised while serving a request: close the connection for ``reason``, once ``answer``
    (the response's parts, if any) is written."""

    def __init__(self, reason: CloseReason, message: str, answer: list | None = None):
        super().__init__(message)
        self.reason = reason
        self.answer = answer


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection; see the module docstring."""

    proven = False  # connection_quotas: only the controller's connections are ever proven

    def __init__(self, server: BrokerServer):
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.sasl = None if server.sasl is None else SaslAuthenticator(server.sasl)
        max_frame_bytes = server.max_frame_bytes
        if server.sasl is not None:  # raised once authenticated (BrokerServer.handle)
            max_frame_bytes = min(max_frame_bytes, server.sasl.max_receive_bytes)
        self.decoder = FrameDecoder(
            max_frame_bytes=max_frame_bytes,
            # A raw SASL token (after SaslHandshake v0) may be shorter than a request header,
            # even empty; raised to a header's size once authenticated (BrokerServer).
            min_frame_bytes=0 if server.sasl is not None else REQUEST_HEADER_MIN_BYTES,
            read_buffer_bytes=server.read_buffer_bytes,
            memory=server.request_memory,
            buffers=server.frame_buffers,
        )
        self.queue: deque[Frame] = deque()
        self.queued_pooled_bytes = 0  # request memory held by the frames in ``queue``
        self.frame_ready = asyncio.Event()
        self.writable = asyncio.Event()
        self.writable.set()
        self.transport: asyncio.Transport | None = None
        self.worker: asyncio.Task[None] | None = None
        self.peer = "?"
        # Unique among this process's connections, as Kafka's connection id's index: what
        # per-connection bounds key on (a later connection may reuse the peer's address).
        self.serial = next(_CONNECTION_SERIALS)
        self.ip = ""  # the peer's IP address, as max.connections.per.ip counts it
        self.client_host = ""  # the client's address, as DescribeGroups reports a member's host
        self.principal: KafkaPrincipal = ANONYMOUS
        self.tls = False  # an SSL listener's connection: no sendfile
        self.closed = False
        self.close_reason: CloseReason | None = None  # counted once, by ``close_for``
        self.busy = False  # a request is being handled or its response written
        # Answers not yet written, in request order: each a future of the response's parts.
        self.answers: deque[asyncio.Future[list | None]] = deque()
        self.answers_written = asyncio.Event()
        self.answer_writer: asyncio.Task[None] | None = None
        self.last_activity = self.loop.time()
        self.receiving_since: float | None = None  # when the frame now arriving began
        self.frame_error: str | None = None  # the size prefix that failed: close once answered
        # KIP-219: a throttled client's next request is not handled before this (loop time).
        self.muted_until = 0.0

    # -- asyncio callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peername = transport.get_extra_info("peername")
        self.peer = str(peername)
        if isinstance(peername, tuple) and peername:
            self.ip = str(peername[0])
            self.client_host = f"/{self.ip}"
        if self.server.tls is not None and not self._authenticate(transport, self.server.tls):
            return
        refusal = self.server.accept(self)
        if refusal is not None:
            self.closed = True
            self.close_reason = CloseReason.TOO_MANY_CONNECTIONS
            self.server.connection_closed(self.close_reason)
            log.warning(
                "refusing %s on listener %s: %s reached",
                self.peer,
                self.server.listener.name,
                refusal.value.replace("_", ".").replace("listener.", "listener's "),
            )
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # half-open peers are found by the idle timeout, and by keepalive
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.worker = asyncio.ensure_future(self._serve())
        self.server.track_worker(self.worker)

    def _authenticate(self, transport: asyncio.Transport, tls: ListenerTls) -> bool:
        """The principal of a TLS connection; False (and closed) when none can be mapped."""
        self.tls = True
        try:
            self.principal = peer_principal(transport.get_extra_info("ssl_object"), tls.mapper)
        except NoMatchingRule as e:
            self.closed = True
            self.close_reason = CloseReason.AUTHENTICATION_FAILED
            self.server.connection_closed(self.close_reason)
            log.warning(
                "refusing %s on listener %s: its certificate maps to no principal (%s)",
                self.peer,
                tls.listener,
                e,
            )
            transport.abort()
            return False
        if self.principal is not ANONYMOUS:
            log.info(
                "TLS connection %s on listener %s: principal %s",
                self.peer,
                tls.listener,
                self.principal,
            )
        return True

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.decoder.buffer_updated(nbytes)
        except InvalidFrameError as e:  # the decoder failed earlier; we are closing
            self.close_for(CloseReason.MALFORMED_FRAME, str(e))
            return
        self.last_activity = self.loop.time()
        if self.receiving_since is None:
            self.receiving_since = self.last_activity
        self.take_frames()

    def eof_received(self) -> bool:
        return False  # close the transport; requests already received are still handled

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.release(self)
        self.decoder.close()  # gives back the memory of a partial frame
        self.server.request_memory.cancel(self._memory_released)
        self.server.request_slots.cancel(self._slots_released)
        self.writable.set()
        self.frame_ready.set()
        self.answers_written.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    # -- taking frames in ----------------------------------------------------------------

    def take_frames(self) -> None:
        """Move whole frames from the decoder to the queue, within every limit; then decide
        whether the socket may be read."""
        if self.closed:
            return
        server = self.server
        try:
            while (
                len(self.queue) < server.max_inflight
                and self.queued_pooled_bytes < server.max_frame_bytes
            ):
                if server.request_slots.available < 1:
                    server.request_slots.wait(self._slots_released)
                    break
                frame = self.decoder.next_frame()
                if frame is None:
                    break
                server.request_slots.try_reserve(1)  # cannot fail: one thread, checked above
                self.queue.append(frame)
                self.queued_pooled_bytes += frame.pooled_bytes
                self.frame_ready.set()
        except InvalidFrameError as e:
            # The decoder reads nothing more; the worker closes once the frames before this
            # one are answered (see the module docstring).
            self.frame_error = str(e)
            if self.sasl is not None and not self.sasl.complete:
                self.frame_error += (
                    " (sasl.server.max.receive.size bounds it before authentication)"
                )
            self.receiving_since = None
            self.frame_ready.set()
            self.apply_read_state()
            return
        if not self.decoder.receiving_frame:
            self.receiving_since = None
        if self.decoder.waiting_for_memory:
            server.request_memory.wait(self._memory_released)
        self.apply_read_state()

    def apply_read_state(self) -> None:
        """Read the socket exactly when the decoder has room (asyncio's sendfile resumes
        reading on its own when it ends, so this is applied again after every sendfile)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        wanted = self.decoder.wants_input
        if wanted and not transport.is_reading():
            transport.resume_reading()
        elif not wanted and transport.is_reading():
            transport.pause_reading()

    def _memory_released(self) -> None:
        if not self.closed and self.decoder.retry_memory():
            self.take_frames()
        elif not self.closed:
            self.server.request_memory.wait(self._memory_released)

    def _slots_released(self) -> None:
        self.take_frames()

    # -- serving -------------------------------------------------------------------------

    async def _serve(self) -> None:
        """Handle queued requests in order until the connection is closed and drained."""
        # Each request is an element: pipelined requests that never wait give the loop a turn
        # every slice of this connection's work (see the module docstring).
        slices = TimeSlices(check_every=1)
        try:
            while True:
                if not self.queue:
                    if self.frame_error is not None:
                        await self._answers_written()
                        self.close_for(CloseReason.MALFORMED_FRAME, self.frame_error)
                    if self.closed:
                        return
                    self.frame_ready.clear()
                    await self.frame_ready.wait()
                    slices.restart()
                    continue
                muted_s = self.muted_until - self.loop.time()
                if muted_s > 0 and not self.closed:
                    await asyncio.sleep(muted_s)  # bounded: a throttle never exceeds its max
                    slices.restart()
                    continue
                data, pooled_bytes, buffer = self.queue.popleft()
                self.queued_pooled_bytes -= pooled_bytes
                self.server.request_slots.release(1)
                self.busy = True
                try:
                    if self.decoder.buffered_bytes or not self.decoder.wants_input:
                        self.take_frames()  # room in the queue: take what waits, read again
                    await self._answer(data)
                finally:
                    self.busy = False
                    self.last_activity = self.loop.time()
                    self.server.request_memory.release(pooled_bytes)
                    # Every view of the frame must be gone for its buffer to be reused: ours
                    # here, and the request's (FrameBuffers checks that no other is alive).
                    del data
                    self.server.frame_buffers.give_back(buffer)
                    buffer = None
                await slices.tick()
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug in this loop itself: never leave the client hanging
            log.exception("closing %s: connection worker failed", self.peer)
            self.close_for(CloseReason.HANDLER_ERROR, "connection worker failed")
        finally:
            if self.closed and self.answer_writer is not None and not self.answer_writer.done():
                # Nothing can be written any more: what waits is dropped, not awaited.
                for answer in self.answers:
                    answer.cancel()
            for frame in self.queue:  # only when cancelled: give back what the queue held
                self.server.request_memory.release(frame.pooled_bytes)
                self.server.request_slots.release(1)
            self.queue.clear()

    async def _answer(self, frame: memoryview) -> None:
        try:
            parts = await self.server.handle(frame, self)
        except CloseConnection as e:
            # Kafka reads no request before it has answered the one before, so the requests
            # sent before this one are answered first; only then is the connection closed.
            await self._answers_written()
            if e.answer is not None:
                await self._send_answer(e.answer)
            self.close_for(e.reason, str(e))
            return
        if isinstance(parts, asyncio.Future):  # an answer that waits (acks=all): see the module
            await self._queue_answer(parts)
            return
        if self.answers:  # earlier answers still wait: this one leaves after them
            done: asyncio.Future[list | None] = self.loop.create_future()
            done.set_result(parts)
            await self._queue_answer(done)
            return
        await self._send_answer(parts)

    async def _queue_answer(self, answer: asyncio.Future[list | None]) -> None:
        self.answers.append(answer)
        if self.answer_writer is None or self.answer_writer.done():
            self.answer_writer = asyncio.ensure_future(self._write_answers())
        while len(self.answers) >= MAX_WAITING_ANSWERS and not self.closed:
            self.answers_written.clear()
            await self.answers_written.wait()

    async def _answers_written(self) -> None:
        """Until every queued answer has been written (or dropped, the connection closed)."""
        writer = self.answer_writer
        if writer is not None and not writer.done():
            await asyncio.wait([writer])  # a cancelled wait leaves the writer running

    async def _write_answers(self) -> None:
        """Write queued answers in request order, each once it is complete."""
        while self.answers:
            answer = self.answers[0]
            try:
                parts = await answer
            except CloseConnection as e:
                self.close_for(e.reason, str(e))
                parts = None
            except asyncio.CancelledError:
                parts = None
                if not answer.cancelled():
                    raise
            self.answers.popleft()
            await self._send_answer(parts)
            self.last_activity = self.loop.time()
            self.answers_written.set()
        self.answers_written.set()

    async def _send_answer(self, parts: list | None) -> None:
        try:
            if parts is None or self.closed:
                return
            await self._write(parts)
        except CloseConnection as e:
            self.close_for(e.reason, str(e))
        except (ConnectionError, OSError) as e:  # the client closed or reset it: not a bug
            self.close_for(CloseReason.PEER_GONE, f"the client went away while answered: {e}")
        except Exception as e:  # e.g. a response too large for a frame, sendfile unavailable
            log.exception("failed to write a response to %s", self.peer)
            self.close_for(CloseReason.WRITE_ERROR, f"{type(e).__name__}: {e}")

    async def _write(self, parts: list) -> None:
        """Write a response: consecutive buffers as one ``write`` (one send, one TCP segment
        with TCP_NODELAY), each file region with ``sendfile``, checked to send it all."""
        pending: list = []
        for part in [*encode_frame(parts), None]:
            if part is not None and is_buffer(part):
                pending.append(part)
                continue
            await self.writable.wait()
            transport = _open_transport(self.transport)
            if pending:
                transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
                pending = []
            if part is not None and self.tls:
                await self._write_region(part)
            elif part is not None:
                # A write that found the peer gone closes the transport at once (asyncio).
                transport = _open_transport(transport)
                try:
                    sent = await self.loop.sendfile(
                        transport, part.file, part.position, part.size, fallback=False
                    )
                except asyncio.SendfileNotAvailableError:
                    # asyncio reports any error of a sendfile's first call so, a reset peer's
                    # too (its errno is lost): gone if the socket has no peer any more.
                    if not _connected(transport):
                        raise ConnectionResetError("the peer reset the connection") from None
                    raise
                finally:
                    self.apply_read_state()
                if sent != part.size:
                    raise CloseConnection(
                        CloseReason.SHORT_SENDFILE,
                        f"sent {sent} of {part.size} record bytes announced at position "
                        f"{part.position} of {part.file.name}: the segment changed underneath",
                    )

    async def _write_region(self, part: FileRegion) -> None:
        """A file region on a TLS connection: read in chunks, each written when there is room."""
        fd = part.file.fileno()
        position, end = part.position, part.position + part.size
        while position < end:
            chunk = os.pread(fd, min(TLS_READ_CHUNK_BYTES, end - position), position)
            if not chunk:
                raise CloseConnection(
                    CloseReason.SHORT_SENDFILE,
                    f"read {position - part.position} of {part.size} record bytes announced at "
                    f"position {part.position} of {part.file.name}: the segment changed "
                    f"underneath",
                )
            await self.writable.wait()
            _open_transport(self.transport).write(chunk)
            position += len(chunk)

    # -- closing -------------------------------------------------------------------------

    def mute_for(self, throttle_ms: int) -> None:
        """KIP-219: the answer is sent at once; the next request waits ``throttle_ms``."""
        if throttle_ms > 0:
            self.muted_until = max(self.muted_until, self.loop.time() + throttle_ms / 1000)

    def expired(self, now: float) -> CloseReason | None:
        """Whether the reaper should close this connection now, and why."""
        if self.closed:
            return None
        since = self.receiving_since
        if since is not None and now - since > self.server.receive_timeout_s:
            return CloseReason.RECEIVE_TIMEOUT
        if (
            not self.busy
            and not self.answers
            and not self.queue
            and since is None
            and now - self.last_activity > self.server.idle_timeout_s
        ):
            return CloseReason.IDLE
        return None

    def evict(self) -> None:
        """Closed to admit a connection on a protected listener (KIP-402, ``connection_quotas``)."""
        self.close_for(
            CloseReason.TOO_MANY_CONNECTIONS,
            "max.connections reached: the least recently used client connection closed for an "
            "inter-broker one",
        )

    def close_for(self, reason: CloseReason, message: str) -> None:
        """Close, with a log line and a count of ``reason``, unless already closed for one.

        A failed decoder fails again each time frames are taken (after every request still
        queued), and a request may fail after its client left: the first reason is the one.
        """
        if self.close_reason is not None:
            return
        self.close_reason = reason
        level = (
            logging.ERROR
            if reason in _BUGS
            else logging.INFO
            if reason in _QUIET
            else logging.WARNING
        )
        log.log(level, "closing %s (%s): %s", self.peer, reason.value, message)
        self.server.connection_closed(reason)
        self.close()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def _open_transport(transport: asyncio.Transport | None) -> asyncio.Transport:
    """The transport a response is being written to; ``ConnectionResetError`` once it closed
    (the peer went away: a reset found by a read or a write, or the broker closed it)."""
    if transport is None or transport.is_closing():
        raise ConnectionResetError("the connection closed while its answer was written")
    return transport


def _connected(transport: asyncio.Transport) -> bool:
    """Whether the transport's TCP socket still has its peer (a reset one has none)."""
    sock = transport.get_extra_info("socket")
    try:
        return sock is not None and bool(sock.getpeername())
    except OSError:
        return False


_QUIET = frozenset({CloseReason.PEER_GONE, CloseReason.SHUTDOWN})
_BUGS = frozenset({CloseReason.HANDLER_ERROR, CloseReason.ENCODE_ERROR, CloseReason.WRITE_ERROR})
