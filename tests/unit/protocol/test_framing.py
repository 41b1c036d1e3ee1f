"""Size-prefixed frames come out whole however the stream is cut; bad sizes close the stream;
memory follows the bytes that arrived, never the size a client announces."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.errors import InvalidFrameError, InvalidRequestError
from odradek.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    LARGE_FRAME_FIRST_BYTES,
    FrameBuffers,
    FrameDecoder,
    encode_frame,
)

# Small frames (several per read buffer) and large ones (received in place); the contents are
# drawn as a seed, so that Hypothesis does not have to generate 100 KiB of bytes.
frames_strategy = st.lists(
    st.tuples(st.integers(10, 300) | st.integers(70_000, 140_000), st.integers(0, 2**32)).map(
        lambda size_seed: random.Random(size_seed[1]).randbytes(size_seed[0])
    ),
    min_size=1,
    max_size=6,
)


def wire(frames: list[bytes]) -> bytes:
    return b"".join(b"".join(encode_frame([frame])) for frame in frames)


def test_byte_by_byte():
    frames = [b"a" * 10, b"b" * 200, bytes(range(256)) * 300]
    decoder = FrameDecoder(read_buffer_bytes=64)
    out = []
    for byte in wire(frames):
        out += decoder.feed(bytes([byte]))
    assert [bytes(f) for f in out] == frames
    assert decoder.buffered_bytes == 0


@given(frames=frames_strategy, data=st.data())
def test_random_chunks_fed(frames, data):
    stream = wire(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    decoder = FrameDecoder(read_buffer_bytes=data.draw(st.sampled_from([4, 100, 65536])))
    out = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += decoder.feed(stream[start:end])
    assert [bytes(f) for f in out] == frames
    assert all(f.readonly for f in out)


class Pool:
    """A memory budget like the broker's, with an exact account of what is held."""

    def __init__(self, capacity: int):
        self.capacity, self.used, self.peak = capacity, 0, 0

    def try_reserve(self, nbytes: int) -> bool:
        if self.used + nbytes > self.capacity:
            return False
        self.used += nbytes
        self.peak = max(self.peak, self.used)
        return True

    def release(self, nbytes: int) -> None:
        assert 0 < nbytes <= self.used
        self.used -= nbytes


def drive(decoder: FrameDecoder, stream: memoryview, reads, pool: Pool | None = None):
    """As asyncio.BufferedProtocol drives it: recv_into(get_buffer()), buffer_updated(n), then
    the connection takes whole frames (and releases their memory once handled)."""
    out, position = [], 0
    for _ in range(10_000_000):
        while (frame := decoder.next_frame()) is not None:
            out.append(bytes(frame.data))
            if pool is not None and frame.pooled_bytes:
                pool.release(frame.pooled_bytes)
        if position == len(stream):
            return out
        assert decoder.wants_input
        target = decoder.get_buffer()
        assert len(target) > 0
        count = min(next(reads, len(target)), len(target), len(stream) - position)
        target[:count] = stream[position : position + count]
        del target  # asyncio drops its view before the next get_buffer()
        position += count
        decoder.buffer_updated(count)
    raise AssertionError("the decoder made no progress")


@given(frames=frames_strategy, data=st.data())
def test_random_reads_into_the_decoders_buffer(frames, data):
    stream = memoryview(wire(frames))
    decoder = FrameDecoder(read_buffer_bytes=data.draw(st.sampled_from([4, 100, 65536])))
    reads = iter(data.draw(st.lists(st.integers(1, 100_000), max_size=40)))
    assert drive(decoder, stream, reads) == frames


@given(frames=frames_strategy, data=st.data())
def test_large_frames_hold_exactly_the_memory_reserved_and_give_it_back(frames, data):
    pool = Pool(capacity=1 << 30)
    stream = memoryview(wire(frames))
    decoder = FrameDecoder(
        read_buffer_bytes=data.draw(st.sampled_from([4, 100, 65536])), memory=pool
    )
    reads = iter(data.draw(st.lists(st.integers(1, 100_000), max_size=40)))
    assert drive(decoder, stream, reads, pool) == frames
    assert pool.used == 0
    # Capacity doubles up to the frame's size: never more than twice what the largest frame is.
    assert pool.peak <= 2 * max(len(f) for f in frames) + LARGE_FRAME_FIRST_BYTES


def test_an_announced_size_is_not_allocated_before_its_bytes_arrive():
    pool = Pool(capacity=1 << 30)
    decoder = FrameDecoder(memory=pool)
    decoder.feed(struct.pack(">i", 100 * 1024 * 1024) + b"x" * 10)
    assert decoder.pooled_bytes == pool.used == LARGE_FRAME_FIRST_BYTES
    decoder.close()
    assert pool.used == 0


def test_a_frame_waits_for_memory_and_completes_once_it_is_released():
    pool = Pool(capacity=LARGE_FRAME_FIRST_BYTES * 2)
    assert pool.try_reserve(LARGE_FRAME_FIRST_BYTES * 2)  # someone else holds it all
    frame = bytes(range(256)) * 1024  # 256 KiB
    stream = memoryview(wire([frame]))
    decoder = FrameDecoder(memory=pool)
    target = decoder.get_buffer()
    target[:1000] = stream[:1000]
    del target
    decoder.buffer_updated(1000)
    assert decoder.next_frame() is None
    assert decoder.waiting_for_memory and not decoder.wants_input
    assert not decoder.retry_memory()  # still nothing free
    pool.release(LARGE_FRAME_FIRST_BYTES * 2)
    assert decoder.retry_memory() and decoder.wants_input
    out = drive(decoder, stream[1000:], iter(()), pool)
    assert out == [frame] and pool.used == 0


def test_a_growing_frame_waits_when_the_budget_runs_out():
    pool = Pool(capacity=LARGE_FRAME_FIRST_BYTES)
    frame = b"z" * (LARGE_FRAME_FIRST_BYTES * 3)
    stream = memoryview(wire([frame]))
    decoder = FrameDecoder(memory=pool)
    position = 0
    for _ in range(1000):
        if not decoder.wants_input:
            break
        target = decoder.get_buffer()
        count = min(len(target), len(stream) - position)
        target[:count] = stream[position : position + count]
        del target
        position += count
        decoder.buffer_updated(count)
        assert decoder.next_frame() is None
    assert decoder.waiting_for_memory
    assert pool.used == LARGE_FRAME_FIRST_BYTES  # what arrived, not the 384 KiB announced
    pool.capacity = 1 << 30
    assert decoder.retry_memory()
    assert drive(decoder, stream[position:], iter(()), pool) == [frame]
    assert pool.used == 0


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 9, DEFAULT_MAX_FRAME_BYTES + 1, 2**31 - 1])
def test_sizes_out_of_bounds_are_refused_and_the_decoder_stays_failed(size):
    decoder = FrameDecoder()
    with pytest.raises(InvalidFrameError) as raised:
        decoder.feed(struct.pack(">i", size))
    assert isinstance(raised.value, InvalidRequestError)  # so the server closes the connection
    with pytest.raises(InvalidFrameError):
        decoder.feed(b"\x00" * 20)


def test_a_configured_limit_is_inclusive():
    decoder = FrameDecoder(max_frame_bytes=1000)
    assert [bytes(f) for f in decoder.feed(wire([b"x" * 1000]))] == [b"x" * 1000]
    with pytest.raises(InvalidFrameError, match="1001"):
        decoder.feed(struct.pack(">i", 1001))


def test_a_client_reading_responses_accepts_small_frames():
    decoder = FrameDecoder(min_frame_bytes=4)
    assert [bytes(f) for f in decoder.feed(wire([b"\x00\x00\x00\x07"]))] == [b"\x00\x00\x00\x07"]


@dataclass
class Region:
    file: Any
    position: int
    size: int


def test_encode_frame_counts_file_regions_and_copies_nothing():
    body = b"head"
    region = Region(file=None, position=100, size=4096)
    parts = encode_frame([body, region, b"tail"])
    assert parts[0] == struct.pack(">i", 4 + 4096 + 4)
    assert parts[1] is body and parts[2] is region


def test_frame_buffers_are_recycled_only_when_no_view_of_them_is_alive():
    buffers = FrameBuffers(idle_bytes_max=4 << 20)
    first = buffers.take(600_000)
    assert len(first) == 1 << 20  # power-of-two classes
    view = memoryview(first)[:10]
    buffers.give_back(first)
    assert buffers.idle_bytes == 0  # a view is alive: kept out of the pool
    del view
    buffers.give_back(first)
    assert buffers.idle_bytes == 1 << 20
    again = buffers.take(700_000)
    assert again is first and buffers.idle_bytes == 0
    buffers.give_back(bytearray(1000))  # not of a class: never pooled
    assert buffers.idle_bytes == 0


def test_idle_frame_buffers_are_bounded():
    buffers = FrameBuffers(idle_bytes_max=LARGE_FRAME_FIRST_BYTES)
    held = [buffers.take(LARGE_FRAME_FIRST_BYTES) for _ in range(3)]
    for _ in range(3):
        buffer = held.pop()
        buffers.give_back(buffer)
        del buffer
    assert buffers.idle_bytes == LARGE_FRAME_FIRST_BYTES


def test_a_steady_stream_of_large_frames_reuses_one_buffer():
    buffers = FrameBuffers(idle_bytes_max=8 << 20)
    decoder = FrameDecoder(buffers=buffers)
    payload = bytes(range(256)) * 3000  # 768,000 bytes: a produce request's size
    seen = set()
    for _ in range(5):
        [frame] = drive_frames(decoder, wire([payload]))
        assert bytes(frame.data) == payload
        seen.add(id(frame.buffer))
        data, _, buffer = frame
        del frame, data
        buffers.give_back(buffer)
        del buffer
    assert len(seen) == 1


def drive_frames(decoder: FrameDecoder, stream: bytes) -> list:
    frames, position = [], 0
    view = memoryview(stream)
    for _ in range(100_000):
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
        if position == len(view):
            return frames
        target = decoder.get_buffer()
        count = min(len(target), len(view) - position)
        target[:count] = view[position : position + count]
        del target
        position += count
        decoder.buffer_updated(count)
    raise AssertionError("no progress")
