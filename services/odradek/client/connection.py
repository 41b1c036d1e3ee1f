"""One client connection to one broker: requests pipelined, responses matched by correlation id.

What Kafka guarantees, and this class relies on: a broker answers the requests of one connection
in the order they arrived (Produce with acks=0 gets no answer at all). So responses are matched
to requests by position, and the correlation id only checks it: each request takes the next id
(0, 1, 2, ..., wrapping at 2**31 - 1), joins a FIFO of pending requests, and each response must
carry the id at the head of that FIFO. One that does not (or that answers nothing, or whose size
prefix is outside [4, ``max_response_bytes``], or whose body does not parse) is a
``ProtocolError``: the connection closes and every pending request fails with it.

Invariants:

- Every request sent completes: with its response, or with an error once the connection closes
  (whatever closes it: the broker, ``close()``, a timeout, a protocol error). Nothing waits on a
  closed connection.
- At most ``max_in_flight`` requests await a response (``MAX_IN_FLIGHT_REQUESTS``, the number the
  broker queues per connection); one more waits for a slot. A slot is freed when the response
  arrives, not when its caller stops waiting: a cancelled request is still on the wire, and its
  response is read and dropped.
- A request that times out (``request_timeout_s``, or ``timeout_s`` per call; it covers waiting
  for a slot, writing and waiting for the response) fails with ``RequestTimeoutError`` and closes
  the connection, as Kafka's clients do: the response may still come, and nothing could tell it
  from the next one's. The others fail with ``ConnectionClosedError``. A timeout while waiting
  for a slot sent nothing and leaves the connection open.
- Frames are read with ``StreamReader.readexactly``: 4-byte size, then the body, bounded by
  ``max_response_bytes``. Requests above ``max_request_bytes`` are refused before sending.

Responses are decoded by the task that reads them (``odradek.protocol.codec.decode_response``):
a Fetch response's ``records`` are read-only ``memoryview`` slices of the frame's ``bytes``, not
copies. With ``offload_codec`` (a broker's link to the controller, which forwards clients'
requests of up to megabytes) every request is encoded, and every response of
``large_messages.OFF_LOOP_MIN_BYTES`` or more decoded, on a codec thread (``large_messages``),
so a large one does not hold the caller's event loop; the reader still takes responses in order.

``negotiate_versions()`` sends ApiVersions at the highest version kio knows and, as KIP-511
clients do, retries at the version the broker names when it answers UNSUPPORTED_VERSION (v0 if it
names none); ``pick_version`` then chooses the highest version of an API both sides speak.

A connection belongs to one event loop; any number of its tasks may call ``send`` concurrently.
It is not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import odradek
from odradek.client.errors import (
    ClientError,
    ConnectionClosedError,
    ErrorResponseError,
    NoCommonVersionError,
    ProtocolError,
    RequestTimeoutError,
    RequestTooLargeError,
)
from odradek.common.limits import SOCKET_REQUEST_MAX_BYTES_DEFAULT
from odradek.errors import ErrorCode
from odradek.large_messages import OFF_LOOP_MIN_BYTES, off_loop
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.errors import InvalidResponseError

__all__ = [
    "MAX_IN_FLIGHT_REQUESTS",
    "MAX_RESPONSE_BYTES",
    "MAX_REQUEST_BYTES",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "CLIENT_SOFTWARE_NAME",
    "BrokerConnection",
]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT_REQUESTS = 100  # the broker's queue per connection (server.MAX_INFLIGHT_REQUESTS)
# A Fetch response can exceed fetch.max.bytes by a little (a first batch larger than the budget,
# per-partition overhead); Kafka's clients do not bound it at all. Ample, but not unbounded.
MAX_RESPONSE_BYTES = 134_217_728  # 128 MiB
MAX_REQUEST_BYTES = SOCKET_REQUEST_MAX_BYTES_DEFAULT  # the broker closes on more
DEFAULT_CONNECT_TIMEOUT_S = 10.0  # socket.connection.setup.timeout.ms
DEFAULT_REQUEST_TIMEOUT_S = 30.0  # request.timeout.ms
CLIENT_SOFTWARE_NAME = "odradek"  # ApiVersions v3+; must match Kafka's [a-zA-Z0-9.-] rule

_SIZE = struct.Struct(">i")
_CORRELATION_ID = struct.Struct(">i")  # the first field of every response header
_MAX_CORRELATION_ID = 2**31 - 1


class _Pending:
    """A request written and not yet answered."""

    __slots__ = ("correlation_id", "api_key", "api_version", "future")

    def __init__(self, correlation_id: int, api_key: int, api_version: int, future: Any):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.future: asyncio.Future[Any] = future


class BrokerConnection:
    """A client connection to one broker; see the module docstring. Open with ``open()``."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str | None = CLIENT_SOFTWARE_NAME,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        max_in_flight: int = MAX_IN_FLIGHT_REQUESTS,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        offload_codec: bool = False,
    ):
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.offload_codec = offload_codec
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._reader = reader
        self._writer = writer
        self._pending: deque[_Pending] = deque()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._next_correlation_id = 0
        self._closed = False
        self._api_versions: Mapping[int, tuple[int, int]] | None = None
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_responses(), name=f"odradek-client-read-{self.peer}"
        )

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = CLIENT_SOFTWARE_NAME,
        connect_timeout_s: float | None = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        max_in_flight: int = MAX_IN_FLIGHT_REQUESTS,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        tls: ssl.SSLContext | None = None,
        offload_codec: bool = False,
    ) -> BrokerConnection:
        """Connect (over TLS with ``tls``, the peer's certificate checked for ``host``); raises
        ``ConnectionClosedError`` if that fails, its handshake included, or takes too long."""
        try:
            async with asyncio.timeout(connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls is not None else None
                )
        except (OSError, ssl.SSLError) as e:  # TimeoutError included
            reason = str(e) or f"no connection within {connect_timeout_s} s"
            raise ConnectionClosedError(f"cannot connect to {host}:{port}: {reason}") from e
        return cls(
            reader,
            writer,
            client_id=client_id,
            request_timeout_s=request_timeout_s,
            max_in_flight=max_in_flight,
            max_response_bytes=max_response_bytes,
            offload_codec=offload_codec,
        )

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests written whose response has not been read."""
        return len(self._pending)

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]] | None:
        """The broker's (min, max) per api key, once ``negotiate_versions()`` has run."""
        return self._api_versions

    # -- requests --------------------------------------------------------------------------

    async def send(self, request: Any, *, timeout_s: float | None = None) -> Any:
        """Send a kio request dataclass; returns the broker's response dataclass.

        ``timeout_s`` overrides the connection's ``request_timeout_s`` (a long-polling Fetch needs
        its ``max_wait`` on top). Raises ``ClientError``s; a cancelled call leaves the connection
        open and its response is dropped when it comes.
        """
        self._check_open()
        limit = self.request_timeout_s if timeout_s is None else timeout_s
        entry: _Pending | None = None
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                encoded = None
                if self.offload_codec:  # under any correlation id: ``_encode`` sets its own
                    encoded = await off_loop(encode_request, request, 0, self.client_id)
                await self._slots.acquire()
                try:
                    entry = self._queue(request, encoded)
                except BaseException:
                    self._slots.release()
                    raise
                try:
                    await self._drain()
                    return await entry.future
                finally:
                    # Leaving without the response (cancelled, timed out): nobody will await the
                    # future, so it must not be failed later (asyncio would log it as unretrieved).
                    entry.future.cancel()
        except TimeoutError as e:
            if not deadline.expired():
                raise
            what = f"{type(request).__name__} v{request.__version__} to {self.peer}"
            if entry is None:
                raise RequestTimeoutError(
                    f"{what}: no in-flight slot within {limit} s; not sent"
                ) from e
            self._fail_all(
                ConnectionClosedError,
                f"closed: request {entry.correlation_id} ({what}) timed out after {limit} s",
            )
            raise RequestTimeoutError(
                f"{what}: no response to request {entry.correlation_id} within {limit} s; "
                "connection closed"
            ) from e

    async def send_no_response(self, request: Any) -> None:
        """Send a request the broker does not answer: Produce with acks=0 (else ``ValueError``).

        Returns once written to the socket's buffer; there is no way to know it was appended.
        """
        if request.__api_key__ != ApiKey.PRODUCE or request.acks != 0:
            raise ValueError("only a Produce request with acks=0 goes unanswered")
        self._writer.write(self._encode(request)[1])
        await self._drain()
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionClosedError(f"connection to {self.peer} is closed")

    def _encode(self, request: Any, encoded: bytes | None = None) -> tuple[int, bytes]:
        """(correlation id, the request with its size prefix) under the next correlation id;
        ``encoded``: the request already encoded under another id, which is replaced."""
        self._check_open()
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        if encoded is None:
            frame = encode_request(request, correlation_id, self.client_id)
        else:  # every request header: api_key (2 bytes), api_version (2), correlation_id (4)
            frame = encoded[:4] + _CORRELATION_ID.pack(correlation_id) + encoded[8:]
        if len(frame) > self.max_request_bytes:
            raise RequestTooLargeError(
                f"{type(request).__name__} of {len(frame)} bytes is above "
                f"{self.max_request_bytes}; not sent"
            )
        return correlation_id, _SIZE.pack(len(frame)) + frame

    def _queue(self, request: Any, encoded: bytes | None = None) -> _Pending:
        """Encode, join the FIFO and write, with no ``await`` between: FIFO and stream agree."""
        correlation_id, frame = self._encode(request, encoded)
        entry = _Pending(
            correlation_id,
            int(request.__api_key__),
            int(request.__version__),
            asyncio.get_running_loop().create_future(),
        )
        self._pending.append(entry)
        self._writer.write(frame)
        return entry

    async def _drain(self) -> None:
        """Wait while the socket's buffer is above its high-water mark; a failure closes."""
        try:
            await self._writer.drain()
        except OSError as e:  # ConnectionResetError, BrokenPipeError
            self._fail_all(ConnectionClosedError, f"connection to {self.peer} lost: {e}")

    # -- versions ----------------------------------------------------------------------------

    async def negotiate_versions(self) -> Mapping[int, tuple[int, int]]:
        """Ask the broker which versions it serves (KIP-511 fallback), store and return them."""
        ours = schemas.known_versions(ApiKey.API_VERSIONS)
        version: int | None = max(ours)
        while version is not None:
            response = await self.send(self._api_versions_request(version))
            ranges = {
                int(entry.api_key): (int(entry.min_version), int(entry.max_version))
                for entry in response.api_keys
            }
            if response.error_code == ErrorCode.unsupported_version:
                # The broker names its highest ApiVersions version; a pre-KIP-511 one names none.
                highest = ranges.get(ApiKey.API_VERSIONS, (0, 0))[1]
                version = max((v for v in ours if v <= highest and v < version), default=None)
                continue
            if response.error_code != ErrorCode.none:
                raise ErrorResponseError(
                    f"ApiVersions v{version} to {self.peer}: {response.error_code.name}",
                    response.error_code,
                )
            self._api_versions = MappingProxyType(ranges)
            return self._api_versions
        raise NoCommonVersionError(f"{self.peer} refuses every ApiVersions version we know")

    @staticmethod
    def _api_versions_request(version: int) -> Any:
        request_type = schemas.request_schema(ApiKey.API_VERSIONS, version)
        if "client_software_name" not in request_type.__dataclass_fields__:
            return request_type()
        return request_type(
            client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=odradek.__version__
        )

    def pick_version(self, api_key: int, wanted_max: int) -> int:
        """The highest version of ``api_key`` at most ``wanted_max`` that the broker serves and
        this client has a schema for. Raises ``NoCommonVersionError``."""
        if self._api_versions is None:
            raise RuntimeError("pick_version() needs negotiate_versions() first")
        broker = self._api_versions.get(api_key)
        ours = schemas.known_versions(api_key)
        common = [v for v in ours if v <= wanted_max and broker and broker[0] <= v <= broker[1]]
        if common:
            return max(common)
        name = ApiKey(api_key).name if api_key in set(ApiKey) else f"api key {api_key}"
        served = f"v{broker[0]}-{broker[1]}" if broker else "no version"
        known = f"v{min(ours)}-{max(ours)}" if ours else "no version"
        raise NoCommonVersionError(
            f"{name}: {self.peer} serves {served}; this client knows {known}, "
            f"wants at most v{wanted_max}"
        )

    # -- responses ---------------------------------------------------------------------------

    async def _read_responses(self) -> None:
        """The one reader: frames off the socket, each to the request at the head of the FIFO."""
        try:
            while True:
                (size,) = _SIZE.unpack(await self._reader.readexactly(_SIZE.size))
                if not _CORRELATION_ID.size <= size <= self.max_response_bytes:
                    raise ProtocolError(
                        f"response size {size} is outside "
                        f"[{_CORRELATION_ID.size}, {self.max_response_bytes}]"
                    )
                frame = await self._reader.readexactly(size)
                entry = self._dispatch(frame)
                if entry is not None:
                    await self._answer(entry, frame)
        except (asyncio.IncompleteReadError, OSError) as e:
            reason = "closed by the broker" if isinstance(e, asyncio.IncompleteReadError) else e
            self._fail_all(ConnectionClosedError, f"connection to {self.peer}: {reason}")
        except ProtocolError as e:
            log.warning("closing the connection to %s: %s", self.peer, e)
            self._fail_all(ProtocolError, f"connection to {self.peer} closed: {e}", cause=e)
        except Exception as e:  # a bug here must not leave requests waiting forever
            log.exception("closing the connection to %s", self.peer)
            self._fail_all(ConnectionClosedError, f"connection to {self.peer} failed: {e!r}")

    def _dispatch(self, frame: bytes) -> _Pending | None:
        """The request ``frame`` answers, taken off the FIFO; None if nobody waits for it."""
        (correlation_id,) = _CORRELATION_ID.unpack_from(frame)
        if not self._pending:
            raise ProtocolError(f"a response (correlation id {correlation_id}) to no request")
        entry = self._pending[0]
        if correlation_id != entry.correlation_id:
            raise ProtocolError(
                f"correlation id {correlation_id} where {entry.correlation_id} was expected"
            )
        self._pending.popleft()
        self._slots.release()
        if entry.future.done():  # its caller stopped waiting: the response is dropped
            return None
        return entry

    async def _answer(self, entry: _Pending, frame: bytes) -> None:
        """``entry``'s response decoded (off the loop, for a large one with ``offload_codec``)."""
        try:
            if self.offload_codec and len(frame) >= OFF_LOOP_MIN_BYTES:
                try:
                    response = await off_loop(
                        decode_response, entry.api_key, entry.api_version, frame
                    )
                except asyncio.CancelledError:  # closed meanwhile: it left the FIFO already
                    if not entry.future.done():
                        entry.future.set_exception(
                            ConnectionClosedError(f"connection to {self.peer} closed")
                        )
                    raise
            else:
                response = decode_response(entry.api_key, entry.api_version, frame)
        except InvalidResponseError as e:
            error = ProtocolError(
                f"response {entry.correlation_id} (api key {entry.api_key} "
                f"v{entry.api_version}): {e}"
            )
            error.__cause__ = e
            if not entry.future.done():
                entry.future.set_exception(error)  # it left the FIFO: closing would not fail it
            raise error from e
        if not entry.future.done():  # its caller may have stopped waiting meanwhile
            entry.future.set_result(response.body)

    # -- closing -----------------------------------------------------------------------------

    def _fail_all(
        self,
        error: Callable[[str], ClientError],
        message: str,
        *,
        cause: BaseException | None = None,
    ) -> None:
        """Close now, and fail every pending request with its own ``error(message)``."""
        if self._closed:
            return
        self._closed = True
        while self._pending:
            entry = self._pending.popleft()
            self._slots.release()  # wakes senders waiting for a slot: they find it closed
            if not entry.future.done():
                exc = error(message)
                exc.__cause__ = cause
                entry.future.set_exception(exc)
        self._writer.close()
        if self._read_task is not asyncio.current_task():
            self._read_task.cancel()

    async def close(self) -> None:
        """Close; pending requests fail with ``ConnectionClosedError``. Idempotent."""
        self._fail_all(ConnectionClosedError, f"connection to {self.peer} closed by the client")
        await asyncio.wait([self._read_task])  # cancelled; a cancel of our caller still raises
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> BrokerConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
