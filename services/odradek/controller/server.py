"""The controller's own Kafka-protocol listener: brokers send it AlterPartition and the requests
only the controller can decide here.

Kafka's ZooKeeper-mode controller lives inside a broker and receives AlterPartition on the
broker's listeners; Odradek's controller is its own process, so it listens on its own
(``listeners`` of ``odradek controller``, one endpoint; its host and port are published in
``/controller`` for brokers to find, see ``zk.election``). Brokers forward to it what clients
ask of "the controller" (ElectLeaders, the reassignment APIs). It serves:

- ApiVersions (v0-4), listing only what this listener serves (``supported_versions``); a version
  above ours gets the KIP-511 answer (error 35 in a v0 body), as the broker's listeners;
- the APIs of its ``handlers`` table (api key -> versions and an async handler), built by the
  controller (``Controller.handlers``): AlterPartition (v2-3, API 56) and the others; each is
  decided as an event in order with the controller's others (a controller that is not active
  answers NOT_CONTROLLER).

Anything else closes the connection, as Kafka closes one for an API or version its listener does
not serve: another API key, an unsupported version, a header or body that does not parse, a size
prefix out of bounds (``protocol.framing``: never allocated before its bytes arrive). A bad frame
costs its connection only; the controller never stops for one, and a handler that fails (a bug)
is logged and closes the connection too.

Framing and decoding are the protocol layer's (``FrameDecoder``, ``decode_request``,
``encode_response_parts``), shared with the broker; the connection handling is this module's,
small on purpose: a handful of brokers each keep one connection and send a request at a time, so
asyncio streams do, and none of the broker's budgets or sendfile paths are needed. Limits:
``MAX_CONNECTIONS`` connections (more are closed at once), ``MAX_FRAME_BYTES`` per request, and
``IDLE_TIMEOUT_S`` without a byte closes a connection (Kafka's ``connections.max.idle.ms``).

Runs on the controller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from odradek.errors import ErrorCode
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

log = logging.getLogger(__name__)

API_VERSIONS_RANGE = (0, 4)
MAX_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES  # socket.request.max.bytes, as the brokers'
MAX_CONNECTIONS = 1000  # max.connections: brokers need one each
IDLE_TIMEOUT_S = 600.0  # connections.max.idle.ms
READ_CHUNK_BYTES = 65_536
STOP_GRACE_S = 5.0

Handler = Callable[[Any], Awaitable[Any]]


class Served(NamedTuple):
    """One API the listener serves: its version range (inclusive) and its handler."""

    versions: tuple[int, int]
    handler: Handler


class _Close(Exception):
    """Close this connection: the request cannot be answered (see the module docstring)."""


class ControllerServer:
    def __init__(
        self,
        handlers: Mapping[int, Served],
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ):
        self.handlers = dict(handlers)
        self.supported_versions: Mapping[int, tuple[int, int]] = MappingProxyType(
            {ApiKey.API_VERSIONS: API_VERSIONS_RANGE}
            | {key: served.versions for key, served in handlers.items()}
        )
        self.max_frame_bytes = max_frame_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.connections: set[asyncio.Task[None]] = set()
        self.closed_connections = 0  # connections closed for a bad request (tests read it)
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port, ``listeners.bind_any_port``); returns the
        bound port."""
        if port == 0:
            self._server = await asyncio.start_server(self._accept, sock=bind_any_port(host))
        else:
            self._server = await asyncio.start_server(self._accept, host, port)
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
        if len(self.connections) >= self.max_connections:
            log.warning("refusing %s: %d connections already", peer, self.max_connections)
            writer.close()
            return
        if task is not None:
            self.connections.add(task)
        try:
            await self._serve(reader, writer, peer)
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
            if task is not None:
                self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        decoder = FrameDecoder(max_frame_bytes=self.max_frame_bytes)
        try:
            while True:
                async with asyncio.timeout(self.idle_timeout_s):
                    data = await reader.read(READ_CHUNK_BYTES)
                if not data:
                    return
                try:
                    frames = decoder.feed(data)
                except InvalidFrameError as e:
                    raise _Close(f"malformed frame: {e}") from e
                for frame in frames:
                    # Its responses are small and hold no file regions: one write each.
                    writer.write(b"".join(await self._handle(frame, peer)))
                    await writer.drain()
        finally:
            decoder.close()

    async def _handle(self, frame: memoryview, peer: str) -> list:
        """One request to its response's parts (size prefix included); ``_Close`` otherwise."""
        try:
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
            response = await self.handlers[header.api_key].handler(request)
        return encode_frame(encode_response_parts(header, response))
