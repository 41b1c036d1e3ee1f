"""Kafka's framing: every request and response is a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` cuts a byte stream into frames, incrementally, without I/O. It lends its own
buffer to be read into (``get_buffer``/``buffer_updated``, the ``asyncio.BufferedProtocol``
pair) and hands out whole frames one at a time (``next_frame``), so its owner decides how many
requests it takes in; ``feed`` is the convenience for callers that have bytes in hand.

Memory, the point of this design (Kafka's ``socket.request.max.bytes`` and
``queued.max.request.bytes``):

- A fixed read buffer (``read_buffer_bytes``) takes whatever arrives. A frame that fits in it is
  decoded there and copied out (one small copy).
- A larger frame gets a buffer of its own in two steps: first ``LARGE_FRAME_FIRST_BYTES`` (or
  less), and once that is full, one of the frame's whole size, into which the first part is
  copied. What a client announces in its size prefix is thus never allocated before it sends
  anything: a 100 MiB prefix followed by a few bytes costs ``LARGE_FRAME_FIRST_BYTES``. The
  whole-size buffer of a frame above ``MAPPED_FRAME_MIN_BYTES`` is an anonymous memory map,
  whose pages the kernel provides only as received bytes land in them: its resident memory
  follows what arrived, and no single step faults in tens of megabytes at once (which took the
  event loop 80 ms for a 64 MiB frame). Smaller ones are ``bytearray`` objects recycled from
  earlier frames (``FrameBuffers``): a steady stream of 1 MB produce requests would otherwise
  make the allocator map, zero and fault in a fresh megabyte for each (a quarter of a broker's
  busy time, measured with py-spy).
- Memory is reserved from a ``MemoryBudget`` (the broker's memory pool) before it is used, in
  two steps: the first buffer, then, once it is full, the rest of the frame at once. A frame
  thus holds either a first buffer or everything it needs, never a part it cannot finish with,
  so frames waiting for memory cannot deadlock each other (each one holding half of what it
  needs while the others hold the rest); a frame that has its reservation always completes,
  and the cheap first step keeps a bare size prefix from claiming what it announces. When the
  budget refuses, the decoder stops asking for input (``wants_input`` is False,
  ``waiting_for_memory`` True) until its owner calls ``retry_memory`` after memory was released.
  A whole large frame is handed out with the bytes it holds in the budget
  (``Frame.pooled_bytes``), which the owner releases once the request is done with.
- The frame buffer is received into in place and handed out as a read-only ``memoryview``, so a
  Produce request's records reach ``Log.append`` without a copy.

A size below ``min_frame_bytes`` (the smallest header) or above ``max_frame_bytes`` raises
``InvalidFrameError`` and leaves the decoder failed: the connection must be closed, as Kafka
closes it.

``encode_frame`` puts the size in front of a message's parts (``parts``), without joining them: the
server writes buffers with one ``write`` and file regions with ``sendfile``.

A decoder belongs to one connection and is not thread-safe.
"""

from __future__ import annotations

import mmap
import struct
import sys
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from odradek.common.limits import INT32_MAX, SOCKET_REQUEST_MAX_BYTES_DEFAULT
from odradek.protocol.errors import InvalidFrameError
from odradek.protocol.header import REQUEST_HEADER_MIN_BYTES
from odradek.protocol.parts import Part, part_size

__all__ = [
    "SIZE_PREFIX_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_READ_BUFFER_BYTES",
    "LARGE_FRAME_FIRST_BYTES",
    "MAPPED_FRAME_MIN_BYTES",
    "Frame",
    "FrameDecoder",
    "MemoryBudget",
    "UNBOUNDED",
    "encode_frame",
]

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = _SIZE.size
DEFAULT_MAX_FRAME_BYTES = SOCKET_REQUEST_MAX_BYTES_DEFAULT
DEFAULT_READ_BUFFER_BYTES = 65_536
LARGE_FRAME_FIRST_BYTES = 131_072  # a large frame's first buffer, before its whole size
MAPPED_FRAME_MIN_BYTES = 1_048_577  # above 1 MiB (a producer's usual batch), a memory map


class MemoryBudget(Protocol):
    """Where a decoder reserves the memory of large frames (the broker's memory pool)."""

    def try_reserve(self, nbytes: int) -> bool:
        """Take ``nbytes`` if available; False (and nothing taken) if not."""
        ...

    def release(self, nbytes: int) -> None: ...


class _Unbounded:
    """A budget that always grants: for clients and tests, which bound frames otherwise."""

    def try_reserve(self, nbytes: int) -> bool:
        return True

    def release(self, nbytes: int) -> None:
        pass


UNBOUNDED: MemoryBudget = _Unbounded()


class Frame(NamedTuple):
    """One whole frame (size prefix removed) and the budget bytes it holds until released.

    ``buffer`` is the recycled buffer ``data`` is a view of, for ``FrameBuffers.give_back``
    once the request is done with (None for small frames and memory maps).
    """

    data: memoryview
    pooled_bytes: int = 0
    buffer: bytearray | None = None


class FrameBuffers:
    """Buffers of large frames (up to ``MAPPED_FRAME_MIN_BYTES``), recycled between frames.

    ``take(size)`` gives a ``bytearray`` of at least ``size`` bytes, in power-of-two classes
    from ``LARGE_FRAME_FIRST_BYTES``; ``give_back`` keeps it for a later frame of its class if
    nothing refers to it any more (no view of it is alive: a memoryview holds a reference to
    its ``bytearray``, so the reference count tells) and fewer than ``idle_bytes_max`` bytes
    are kept idle. The memory of idle buffers is bounded by that, besides the request budget.
    Shared by the connections of one event loop; not thread-safe.
    """

    def __init__(self, idle_bytes_max: int = 0):
        self.idle_bytes_max = idle_bytes_max
        self.idle_bytes = 0
        self._idle: dict[int, list[bytearray]] = {}

    @staticmethod
    def capacity_for(size: int) -> int:
        """The power of two at or above ``size``, and at least ``LARGE_FRAME_FIRST_BYTES``."""
        return max(LARGE_FRAME_FIRST_BYTES, 1 << (size - 1).bit_length())

    def take(self, size: int) -> bytearray:
        capacity = self.capacity_for(size)
        idle = self._idle.get(capacity)
        if idle:
            self.idle_bytes -= capacity
            return idle.pop()
        return bytearray(capacity)

    def give_back(self, buffer: bytearray | None) -> None:
        if buffer is None:
            return
        capacity = len(buffer)
        # A free buffer has the caller's, this parameter's and getrefcount's argument's
        # references. More means a view of it (or another holder) is alive: never write to it.
        if sys.getrefcount(buffer) > _REFERENCES_OF_A_FREE_BUFFER:
            return
        if capacity != self.capacity_for(capacity) or capacity >= MAPPED_FRAME_MIN_BYTES:
            return
        if self.idle_bytes + capacity > self.idle_bytes_max:
            return
        self._idle.setdefault(capacity, []).append(buffer)
        self.idle_bytes += capacity


# Inside ``give_back``: the caller's one reference (a local variable, with every other holder
# gone: see ``KafkaConnection``), the parameter, and getrefcount's argument.
_REFERENCES_OF_A_FREE_BUFFER = 3


class FrameDecoder:
    """Bytes in, whole frames (without their size prefix) out; see the module docstring."""

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        min_frame_bytes: int = REQUEST_HEADER_MIN_BYTES,
        read_buffer_bytes: int = DEFAULT_READ_BUFFER_BYTES,
        memory: MemoryBudget = UNBOUNDED,
        buffers: FrameBuffers | None = None,
    ):
        if not 0 <= min_frame_bytes <= max_frame_bytes <= INT32_MAX:
            raise ValueError("need 0 <= min_frame_bytes <= max_frame_bytes < 2**31")
        if read_buffer_bytes < SIZE_PREFIX_BYTES:
            raise ValueError(f"read_buffer_bytes must be at least {SIZE_PREFIX_BYTES}")
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self.memory = memory
        self.buffers = buffers if buffers is not None else FrameBuffers()
        self._scratch = bytearray(read_buffer_bytes)
        self._start = 0  # first byte of the scratch buffer not yet cut into a frame
        self._end = 0  # end of the bytes received into the scratch buffer
        # A large frame being received: its buffer (the capacity reserved so far), its size,
        # how much of it has arrived, and the capacity it waits to be granted (0: none).
        self._frame: bytearray | mmap.mmap | None = None
        self._frame_size = 0
        self._frame_filled = 0
        self._frame_limit = 0  # how far into the buffer this frame may be received for now
        self._reserved = 0  # budget bytes held for that frame: its first buffer, or all of it
        self._waiting_for_memory = False
        self._failed: InvalidFrameError | None = None
        self._closed = False

    # -- state -----------------------------------------------------------------------------

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that are not yet part of a returned frame."""
        return self._end - self._start + self._frame_filled

    @property
    def pooled_bytes(self) -> int:
        """Budget bytes held by the frame being received (released by ``close``)."""
        return self._reserved

    @property
    def receiving_frame(self) -> bool:
        """True between the first byte of a frame and its last."""
        return self._frame is not None or self._end > self._start

    @property
    def waiting_for_memory(self) -> bool:
        """A large frame needs more memory than the budget granted: call ``retry_memory``."""
        return self._waiting_for_memory

    @property
    def wants_input(self) -> bool:
        """Whether ``get_buffer`` has room: False until frames are taken or memory granted."""
        if self._failed is not None or self._closed or self._waiting_for_memory:
            return False
        if self._frame is not None:
            return True
        return self._end < len(self._scratch) or self._start > 0

    # -- receiving ---------------------------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes should be received; empty only when ``wants_input`` is False."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            if self._frame_filled == self._frame_limit < self._frame_size == self._reserved:
                self._grow_to_whole_frame()  # the first part is in and the rest is reserved
            return memoryview(self._frame)[self._frame_filled : self._frame_limit]
        if self._end == len(self._scratch) and self._start > 0:
            self._compact()
        return memoryview(self._scratch)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of ``get_buffer()``."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == self._frame_limit and self._reserved < self._frame_size:
                self._reserve_rest()
        else:
            self._end += nbytes

    def retry_memory(self) -> bool:
        """Try again for the memory a large frame waits for; True once granted."""
        if self._waiting_for_memory:
            if self._frame is None:
                self._start_large_frame()
            else:
                self._reserve_rest()
        return not self._waiting_for_memory

    def next_frame(self) -> Frame | None:
        """The next whole frame, or None until more bytes (or memory) arrive."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            if self._frame_filled < self._frame_size:
                return None
            buffer, size = self._frame, self._frame_size
            data = memoryview(buffer)[:size].toreadonly()
            recycled = buffer if isinstance(buffer, bytearray) else None
            frame = Frame(data, self._reserved, recycled)
            self._frame, self._frame_size, self._frame_filled, self._reserved = None, 0, 0, 0
            return frame
        available = self._end - self._start
        if available < SIZE_PREFIX_BYTES:
            return None
        (size,) = _SIZE.unpack_from(self._scratch, self._start)
        self._check_size(size)
        if available - SIZE_PREFIX_BYTES >= size:
            start = self._start + SIZE_PREFIX_BYTES
            self._start = start + size
            if self._start == self._end:
                self._start = self._end = 0
            return Frame(memoryview(bytes(self._scratch[start : start + size])))
        if SIZE_PREFIX_BYTES + size <= len(self._scratch):
            return None  # it will fit here: wait for the rest
        if not self._waiting_for_memory:
            self._start_large_frame()
        return None

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add received bytes; returns the frames they complete, in order.

        For callers without a memory budget (clients, tests): with one, use ``next_frame``.
        """
        view = memoryview(data).cast("B")
        frames: list[memoryview] = []
        offset = 0
        while True:
            while (frame := self.next_frame()) is not None:
                frames.append(frame.data)
            if offset == len(view):
                return frames
            if not self.wants_input:
                raise RuntimeError("feed() needs an unbounded memory budget")
            target = self.get_buffer()
            count = min(len(target), len(view) - offset)
            target[:count] = view[offset : offset + count]
            offset += count
            self.buffer_updated(count)

    def close(self) -> None:
        """Give back the budget held by a partial frame; the decoder takes nothing more."""
        if self._reserved:
            self.memory.release(self._reserved)
            self._reserved = 0
        buffer, self._frame = self._frame, None
        if isinstance(buffer, bytearray):
            self.buffers.give_back(buffer)
        self._waiting_for_memory = False
        self._closed = True

    # -- internals -------------------------------------------------------------------------

    def _start_large_frame(self) -> None:
        """Move the frame at the scratch buffer's start, too large for it, to its own buffer."""
        (size,) = _SIZE.unpack_from(self._scratch, self._start)
        received = self._end - self._start - SIZE_PREFIX_BYTES
        first = min(size, max(LARGE_FRAME_FIRST_BYTES, received))
        if not self.memory.try_reserve(first):
            self._waiting_for_memory = True
            return
        self._waiting_for_memory = False
        self._reserved = first
        frame = self.buffers.take(first)
        begin = self._start + SIZE_PREFIX_BYTES
        frame[:received] = self._scratch[begin : self._end]
        self._frame, self._frame_size, self._frame_filled = frame, size, received
        self._frame_limit = first  # what is reserved so far: receive no further
        self._start = self._end = 0
        if received == first < size:
            self._reserve_rest()

    def _reserve_rest(self) -> None:
        """Reserve everything the frame still needs, or nothing (see the module docstring)."""
        rest = self._frame_size - self._reserved
        if self.memory.try_reserve(rest):
            self._reserved += rest
            self._waiting_for_memory = False
        else:
            self._waiting_for_memory = True

    def _grow_to_whole_frame(self) -> None:
        """Move the first part of a reserved frame into a buffer of its whole size."""
        size, filled = self._frame_size, self._frame_filled
        whole: bytearray | mmap.mmap = (
            mmap.mmap(-1, size) if size >= MAPPED_FRAME_MIN_BYTES else self.buffers.take(size)
        )
        whole[:filled] = memoryview(self._frame)[:filled]
        first, self._frame, self._frame_limit = self._frame, whole, size
        self.buffers.give_back(first)

    def _compact(self) -> None:
        remaining = self._end - self._start
        self._scratch[:remaining] = self._scratch[self._start : self._end]
        self._start, self._end = 0, remaining

    def _check_size(self, size: int) -> None:
        if size < self.min_frame_bytes or size > self.max_frame_bytes:
            self._failed = InvalidFrameError(
                f"frame size {size} is outside [{self.min_frame_bytes}, {self.max_frame_bytes}]"
            )
            raise self._failed


def encode_frame(parts: Sequence[Part]) -> list[Part]:
    """The size prefix followed by ``parts``, which are not copied."""
    total = sum(part_size(part) for part in parts)
    if total > INT32_MAX:
        raise ValueError(f"a frame of {total} bytes does not fit Kafka's int32 size")
    return [_SIZE.pack(total), *parts]
