"""Kafka's framing: every request and response is a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` cuts a byte stream into frames, incrementally, without I/O. It can be fed chunks
(``feed``, for ``asyncio.Protocol.data_received`` and tests) or lend its own buffer to be read into
(``get_buffer``/``buffer_updated``, the ``asyncio.BufferedProtocol`` pair): then a large frame is
received straight into the one ``bytearray`` it lives in, and handed out as a read-only
``memoryview`` of it, so a Produce request's records are never copied between the socket and
``Log.append``. Small frames that arrive whole in the read buffer are copied out (one small copy).

A size below the smallest header (``min_frame_bytes``) or above ``max_frame_bytes``
(``socket.request.max.bytes``, 100 MiB by default, as in Kafka) raises ``InvalidFrameError`` and
leaves the decoder failed: the connection must be closed, as Kafka closes it. The largest frame a
decoder ever allocates is ``max_frame_bytes``.

``encode_frame`` puts the size in front of a message's parts (``parts``), without joining them: the
server writes buffers with ``writelines`` and file regions with ``sendfile``.

A decoder belongs to one connection and is not thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from odradek.protocol.errors import InvalidFrameError
from odradek.protocol.header import REQUEST_HEADER_MIN_BYTES
from odradek.protocol.parts import Part, part_size

__all__ = [
    "SIZE_PREFIX_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_READ_BUFFER_BYTES",
    "FrameDecoder",
    "encode_frame",
]

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = _SIZE.size
DEFAULT_MAX_FRAME_BYTES = 104_857_600  # socket.request.max.bytes
DEFAULT_READ_BUFFER_BYTES = 65_536
_INT32_MAX = 2**31 - 1


class FrameDecoder:
    """Bytes in, whole frames (without their size prefix) out."""

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        min_frame_bytes: int = REQUEST_HEADER_MIN_BYTES,
        read_buffer_bytes: int = DEFAULT_READ_BUFFER_BYTES,
    ):
        if not 0 <= min_frame_bytes <= max_frame_bytes <= _INT32_MAX:
            raise ValueError("need 0 <= min_frame_bytes <= max_frame_bytes < 2**31")
        if read_buffer_bytes < SIZE_PREFIX_BYTES:
            raise ValueError(f"read_buffer_bytes must be at least {SIZE_PREFIX_BYTES}")
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._scratch = bytearray(read_buffer_bytes)
        self._scratch_used = 0  # fewer than 4 bytes (a partial size) between calls
        self._frame: bytearray | None = None  # a frame being received, allocated at its size
        self._frame_filled = 0
        self._failed: InvalidFrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that are not yet part of a returned frame."""
        return self._scratch_used + (self._frame_filled if self._frame is not None else 0)

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes should be received (never empty)."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled :]
        return memoryview(self._scratch)[self._scratch_used :]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were written at the start of ``get_buffer()``: the frames now complete."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled < len(self._frame):
                return []
            frame = memoryview(self._frame).toreadonly()
            self._frame = None
            return [frame]
        self._scratch_used += nbytes
        return self._cut_scratch()

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add received bytes; returns the frames they complete, in order."""
        view = memoryview(data).cast("B")
        frames: list[memoryview] = []
        offset = 0
        while offset < len(view):
            target = self.get_buffer()
            count = min(len(target), len(view) - offset)
            target[:count] = view[offset : offset + count]
            offset += count
            frames.extend(self.buffer_updated(count))
        return frames

    def _cut_scratch(self) -> list[memoryview]:
        scratch, used = self._scratch, self._scratch_used
        frames: list[memoryview] = []
        pos = 0
        while used - pos >= SIZE_PREFIX_BYTES:
            (size,) = _SIZE.unpack_from(scratch, pos)
            self._check_size(size)
            start = pos + SIZE_PREFIX_BYTES
            if used - start >= size:
                frames.append(memoryview(bytes(scratch[start : start + size])))
                pos = start + size
                continue
            # Incomplete: give it a buffer of its own, so the rest is received in place.
            frame = bytearray(size)
            frame[: used - start] = scratch[start:used]
            self._frame, self._frame_filled = frame, used - start
            pos = used
            break
        leftover = used - pos
        if leftover:
            scratch[:leftover] = scratch[pos:used]
        self._scratch_used = leftover
        return frames

    def _check_size(self, size: int) -> None:
        if size < self.min_frame_bytes or size > self.max_frame_bytes:
            self._failed = InvalidFrameError(
                f"frame size {size} is outside [{self.min_frame_bytes}, {self.max_frame_bytes}]"
            )
            raise self._failed


def encode_frame(parts: Sequence[Part]) -> list[Part]:
    """The size prefix followed by ``parts``, which are not copied."""
    total = sum(part_size(part) for part in parts)
    if total > _INT32_MAX:
        raise ValueError(f"a frame of {total} bytes does not fit Kafka's int32 size")
    return [_SIZE.pack(total), *parts]
