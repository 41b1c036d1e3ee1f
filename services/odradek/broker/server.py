"""The broker's TCP server: Kafka framing in, handlers in order, responses out with sendfile.

Per connection, as Kafka's SocketServer does it:

- Frames are read with ``asyncio.BufferedProtocol`` straight into the ``FrameDecoder``'s buffer,
  so a Produce request's records reach ``Log.append`` as a view of the bytes the kernel wrote.
- Requests are handled one at a time, in arrival order, so responses leave in request order. Up to
  ``max_inflight`` decoded frames may queue behind the one being handled; past that the server
  stops reading the socket (back-pressure) until the queue drains.
- A response is written as its parts: buffers with ``transport.write``, record regions of segment
  files with ``loop.sendfile`` (``os.sendfile`` underneath), so fetched records never enter
  Python. Writing waits while the transport's buffer is above its high-water mark.
- A malformed frame or request header closes the connection (nothing can be answered); an
  unsupported ApiVersions version gets the KIP-511 answer; an unsupported version of another API
  closes the connection, as Kafka does. A handler failure is logged and closes the connection;
  the broker itself never stops for a bad request.

One ``BrokerServer`` per listener (``config.endpoints.Listener``); it serves what its listener's
role serves (``handlers.served_versions``). A controller request (LeaderAndIsr, StopReplica,
UpdateMetadata) on a client listener is answered with CLUSTER_AUTHORIZATION_FAILED at the top and
for every partition (Kafka's answer to a client without ClusterAction), logged and counted; a
client API on the control-plane listener closes the connection, as Kafka does for an API its
listener does not enable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from odradek.broker.context import BrokerContext, RequestContext
from odradek.broker.handlers import CONTROLLER_APIS, ERROR_RESPONSES, HANDLERS, served_versions
from odradek.config.endpoints import Listener
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey, api_versions_fallback
from odradek.protocol.codec import decode_request, encode_response_parts
from odradek.protocol.errors import InvalidFrameError, InvalidRequestError, UnsupportedVersionError
from odradek.protocol.framing import FrameDecoder, encode_frame
from odradek.protocol.parts import is_buffer

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 104_857_600  # socket.request.max.bytes
MAX_INFLIGHT_REQUESTS = 100  # odradek.connection.max.inflight.requests
MAX_CONNECTIONS = 1000  # max.connections
STOP_GRACE_S = 5.0  # how long requests already received may take to finish at shutdown


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection; see the module docstring."""

    def __init__(self, server: BrokerServer):
        self.server = server
        self.decoder = FrameDecoder(max_frame_bytes=server.max_frame_bytes)
        self.frames: deque[memoryview] = deque()
        self.frame_ready = asyncio.Event()
        self.writable = asyncio.Event()
        self.writable.set()
        self.transport: asyncio.Transport | None = None
        self.reading_paused = False
        self.worker: asyncio.Task[None] | None = None
        self.peer = "?"

    # -- asyncio callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = str(transport.get_extra_info("peername"))
        if not self.server.accept(self):
            log.warning(
                "refusing %s: max.connections (%d) reached", self.peer, self.server.max_connections
            )
            transport.abort()
            return
        self.worker = asyncio.ensure_future(self._serve())
        self.server.workers.add(self.worker)
        self.worker.add_done_callback(self.server.workers.discard)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except InvalidFrameError as e:
            log.warning("closing %s: %s", self.peer, e)
            self.close()
            return
        if frames:
            self.frames.extend(frames)
            self.frame_ready.set()
            if len(self.frames) >= self.server.max_inflight and not self.reading_paused:
                self.transport.pause_reading()
                self.reading_paused = True

    def eof_received(self) -> bool:
        return False  # close the transport; queued requests are dropped with it

    def connection_lost(self, exc: Exception | None) -> None:
        # The worker is not cancelled: requests already received whole are still handled (their
        # answers go nowhere), as Kafka handles what reached its request queue. A producer's
        # retry then finds the first attempt in the log instead of racing it.
        self.server.release(self)
        self.writable.set()
        self.frame_ready.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # -- serving -------------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            while True:
                if not self.frames:
                    if self.transport is None or self.transport.is_closing():
                        return
                    self.frame_ready.clear()
                    await self.frame_ready.wait()
                    continue
                frame = self.frames.popleft()
                if self.reading_paused and len(self.frames) < self.server.max_inflight:
                    self.transport.resume_reading()
                    self.reading_paused = False
                parts = await self.server.handle(frame, self.peer)
                if parts is None or self.transport.is_closing():
                    continue
                if parts is CLOSE:
                    self.close()
                    return
                await self._write(parts)
        except asyncio.CancelledError:
            pass
        except (ConnectionError, OSError) as e:
            log.info("connection %s lost while writing: %s", self.peer, e)
            self.close()

    async def _write(self, parts: list) -> None:
        """Write a response: consecutive buffers as one ``write`` (one send, one TCP segment
        with TCP_NODELAY), each file region with ``sendfile``."""
        loop = asyncio.get_running_loop()
        pending: list = []
        for part in [*encode_frame(parts), None]:
            if part is not None and is_buffer(part):
                pending.append(part)
                continue
            await self.writable.wait()
            if self.transport.is_closing():
                return
            if pending:
                self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
                pending = []
            if part is not None:
                await loop.sendfile(self.transport, part.file, part.position, part.size)


CLOSE: list = []  # a sentinel: close the connection instead of answering


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
    ):
        self.context = context
        self.listener = listener
        self.served_versions = served_versions(listener.role)
        self.max_frame_bytes = max_frame_bytes
        self.max_inflight = max_inflight
        self.max_connections = max_connections
        self.connections: set[KafkaConnection] = set()
        self.workers: set[asyncio.Task[None]] = set()  # one per connection, until it finishes
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port); returns the bound port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: KafkaConnection(self), host, port)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close()
        if self.workers:  # requests already received finish; then nothing may touch the logs
            _, pending = await asyncio.wait(set(self.workers), timeout=STOP_GRACE_S)
            for worker in pending:
                worker.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    def accept(self, connection: KafkaConnection) -> bool:
        if len(self.connections) >= self.max_connections:
            return False
        self.connections.add(connection)
        self._set_connection_gauge()
        return True

    def release(self, connection: KafkaConnection) -> None:
        self.connections.discard(connection)
        self._set_connection_gauge()

    def _set_connection_gauge(self) -> None:
        if self.context.metrics is not None:
            self.context.metrics.connections.set(len(self.connections))

    async def handle(self, frame: memoryview, peer: str) -> list | None:
        """One request frame to the response's parts, None for no answer, or ``CLOSE``."""
        started = time.perf_counter()
        try:
            decoded = decode_request(frame)
        except UnsupportedVersionError as e:
            if e.header.api_key == ApiKey.API_VERSIONS:
                return encode_response_parts(e.header, api_versions_fallback())
            log.warning("closing %s: %s", peer, e)
            return CLOSE
        except InvalidRequestError as e:
            log.warning("closing %s: malformed request: %s", peer, e)
            return CLOSE
        header, request = decoded
        if header.api_key in self.served_versions:
            context = RequestContext(header, self.context, self.listener, self.served_versions)
            try:
                response = await HANDLERS[header.api_key](context, request)
            except Exception:
                log.exception("closing %s: handler for api key %d failed", peer, header.api_key)
                return CLOSE
        elif header.api_key in CONTROLLER_APIS:
            response = self._refuse_controller_request(header.api_key, request, peer)
        else:
            log.warning(
                "closing %s: api key %d is not served on listener %s",
                peer,
                header.api_key,
                self.listener.name,
            )
            return CLOSE
        metrics = self.context.metrics
        if metrics is not None:
            name = "".join(w.capitalize() for w in ApiKey(header.api_key).name.split("_"))
            error = getattr(response, "error_code", ErrorCode.none)
            metrics.observe_request(name, time.perf_counter() - started, error)
        if response is None:
            return None
        return encode_response_parts(header, response)

    def _refuse_controller_request(self, api_key: int, request: object, peer: str) -> object:
        """A controller request on a client listener: not this client's to send."""
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
        return ERROR_RESPONSES[api_key](request, ErrorCode.cluster_authorization_failed)
