"""Size-prefixed frames come out whole however the stream is cut; bad sizes close the stream."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.errors import InvalidFrameError, InvalidRequestError
from odradek.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame

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


@given(frames=frames_strategy, data=st.data())
def test_random_reads_into_the_decoders_buffer(frames, data):
    """As asyncio.BufferedProtocol drives it: recv_into(get_buffer()), then buffer_updated(n)."""
    stream = memoryview(wire(frames))
    decoder = FrameDecoder(read_buffer_bytes=data.draw(st.sampled_from([4, 100, 65536])))
    reads = iter(data.draw(st.lists(st.integers(1, 100_000), max_size=40)))
    out, position = [], 0
    while position < len(stream):
        target = decoder.get_buffer()
        assert len(target) > 0
        count = min(next(reads, len(target)), len(target), len(stream) - position)
        target[:count] = stream[position : position + count]
        position += count
        out += decoder.buffer_updated(count)
    assert [bytes(f) for f in out] == frames


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
