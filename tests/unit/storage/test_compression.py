"""Our five codecs read what kafka-python writes, write what it reads, and bound their output."""

from __future__ import annotations

import contextlib
import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBase

from odradek.errors import CorruptRecordError
from odradek.storage.compression import (
    XERIAL_BLOCK_BYTES,
    XERIAL_HEADER,
    Compression,
    compress,
    decompress,
)

CODECS = list(Compression)
COMPRESSED = [codec for codec in Compression if codec is not Compression.NONE]

# Text-like data: compressible, but not trivially.
TEXT = b" ".join(b"record-%d payload %s" % (i, b"xyz" * (i % 7)) for i in range(20_000))

KAFKA_ENCODERS = {
    Compression.GZIP: kafka_codec.gzip_encode,
    Compression.SNAPPY: kafka_codec.snappy_encode,
    Compression.LZ4: kafka_codec.lz4_encode,
    Compression.ZSTD: kafka_codec.zstd_encode,
}
KAFKA_DECODERS = {
    Compression.GZIP: kafka_codec.gzip_decode,
    Compression.SNAPPY: kafka_codec.snappy_decode,
    Compression.LZ4: kafka_codec.lz4_decode,
    Compression.ZSTD: kafka_codec.zstd_decode,
}


def test_codec_ids_are_kafkas():
    assert Compression.NONE == DefaultRecordBase.CODEC_NONE
    assert Compression.GZIP == DefaultRecordBase.CODEC_GZIP
    assert Compression.SNAPPY == DefaultRecordBase.CODEC_SNAPPY
    assert Compression.LZ4 == DefaultRecordBase.CODEC_LZ4
    assert Compression.ZSTD == DefaultRecordBase.CODEC_ZSTD


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("uncompressed", Compression.NONE),
        ("none", Compression.NONE),
        ("gzip", Compression.GZIP),
        ("snappy", Compression.SNAPPY),
        ("lz4", Compression.LZ4),
        ("zstd", Compression.ZSTD),
        ("ZSTD", Compression.ZSTD),
    ],
)
def test_from_name_takes_kafkas_config_values(name, codec):
    assert Compression.from_name(name) is codec


@pytest.mark.parametrize("name", ["producer", "brotli", ""])
def test_from_name_rejects_what_is_not_a_codec(name):
    with pytest.raises(ValueError, match="unknown compression codec"):
        Compression.from_name(name)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", TEXT, os.urandom(70_000)], ids=len)
def test_round_trip(codec, data):
    compressed = compress(codec, data)
    assert decompress(codec, compressed) == data
    assert decompress(codec, compress(codec, memoryview(data))) == data
    assert decompress(codec, compress(codec, bytearray(data))) == data
    assert decompress(codec, memoryview(compressed)) == data
    assert decompress(codec, bytearray(compressed)) == data


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_of_arbitrary_bytes(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("data", [b"x", TEXT, os.urandom(70_000)], ids=len)
def test_kafka_python_reads_ours_and_we_read_kafka_pythons(codec, data):
    assert KAFKA_DECODERS[codec](compress(codec, data)) == data
    assert decompress(codec, KAFKA_ENCODERS[codec](data)) == data


def test_snappy_writes_xerial_blocks_of_32_kib():
    data = TEXT[: 3 * XERIAL_BLOCK_BYTES + 100]
    compressed = compress(Compression.SNAPPY, data)
    assert compressed.startswith(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    position, blocks = len(XERIAL_HEADER), []
    while position < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, position)
        blocks.append(snappy.uncompress(compressed[position + 4 : position + 4 + length]))
        position += 4 + length
    assert [len(block) for block in blocks] == [XERIAL_BLOCK_BYTES] * 3 + [100]
    assert b"".join(blocks) == data


def test_snappy_reads_a_bare_raw_block():
    assert decompress(Compression.SNAPPY, snappy.compress(TEXT)) == TEXT
    bare = kafka_codec.snappy_encode(TEXT, xerial_compatible=False)
    assert decompress(Compression.SNAPPY, bare) == TEXT


def test_snappy_ignores_xerial_version_fields_as_kafka_clients_do():
    # Redpanda has been seen writing the two version ints little-endian.
    framed = compress(Compression.SNAPPY, TEXT)
    little_endian = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert decompress(Compression.SNAPPY, little_endian) == TEXT


def test_lz4_frames_have_independent_blocks_as_kafkas_java_reader_requires():
    frame = compress(Compression.LZ4, TEXT)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian 0x184D2204
    flags = frame[4]
    assert flags >> 6 == 0b01  # frame version 1
    assert flags & 0b0010_0000  # block independence
    assert flags & 0b11 == 0  # reserved bit and dictionary id unset


def test_gzip_reads_concatenated_members():
    assert decompress(Compression.GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: b"not compressed at all",
        lambda data: data[: len(data) // 2],
        lambda data: data[:3] + bytes(64) + data[67:],
    ],
    ids=["empty", "garbage", "truncated", "zeroed"],
)
def test_damaged_input_is_a_corrupt_record_error(codec, damage):
    damaged = damage(compress(codec, TEXT))
    with pytest.raises(CorruptRecordError) as raised:
        decompress(codec, damaged)
    assert raised.value.error_code.name == "corrupt_message"


@pytest.mark.parametrize(
    ("codec", "library_error"),
    [
        (Compression.GZIP, zlib.error),
        (Compression.SNAPPY, cramjam.DecompressionError),
        (Compression.LZ4, RuntimeError),
        (Compression.ZSTD, zstandard.ZstdError),
    ],
)
def test_library_error_is_chained(codec, library_error):
    damaged = bytearray(compress(codec, TEXT))
    middle = len(damaged) // 2
    damaged[middle : middle + 64] = bytes(64)  # the framing stays, the data inside does not
    with pytest.raises(CorruptRecordError) as raised:
        decompress(codec, damaged)
    assert isinstance(raised.value.__cause__, library_error)


@pytest.mark.parametrize(
    "damaged",
    [
        XERIAL_HEADER[:12],
        XERIAL_HEADER + b"\x00\x00",
        XERIAL_HEADER + struct.pack(">i", 1000) + b"short",
        XERIAL_HEADER + struct.pack(">i", -5) + b"abcde",
        XERIAL_HEADER + struct.pack(">i", 0),
    ],
    ids=["header", "length", "overrun", "negative", "zero"],
)
def test_damaged_xerial_framing_is_a_corrupt_record_error(damaged):
    with pytest.raises(CorruptRecordError, match="xerial"):
        decompress(Compression.SNAPPY, damaged)


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), data=st.binary(max_size=300))
def test_arbitrary_bytes_decompress_or_raise_corrupt_record_error(codec, data):
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, data, max_size=1 << 20)


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), data=st.data())
def test_mutated_streams_decompress_or_raise_corrupt_record_error(codec, data):
    compressed = bytearray(compress(codec, TEXT[:5000]))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(compressed) - 1))
        compressed[index] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, compressed, max_size=1 << 20)


@pytest.mark.parametrize("codec", CODECS)
def test_max_size_is_exact(codec):
    compressed = compress(codec, TEXT)
    assert decompress(codec, compressed, max_size=len(TEXT)) == TEXT
    with pytest.raises(CorruptRecordError, match=str(len(TEXT) - 1)):
        decompress(codec, compressed, max_size=len(TEXT) - 1)


@pytest.mark.parametrize("codec", CODECS)
def test_output_far_beyond_the_first_buffer_guess_decompresses(codec):
    zeros = bytes(8 << 20)  # compresses about a thousandfold: past the first guess
    assert decompress(codec, compress(codec, zeros)) == zeros


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_compression_bomb_stops_at_max_size(codec):
    bomb = compress(codec, bytes(16 << 20))
    assert len(bomb) < (1 << 20)
    with pytest.raises(CorruptRecordError, match="more than 1048576 bytes"):
        decompress(codec, bomb, max_size=1 << 20)


# -- LZ4 frames, block by block ------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"block_size": lz4.frame.BLOCKSIZE_MAX256KB},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"store_size": True},
        {"block_checksum": True},
        {"content_checksum": True},
        {"compression_level": 12},
    ],
    ids=[
        "default",
        "256k-blocks",
        "4m-blocks",
        "content-size",
        "block-checksum",
        "content-checksum",
        "high-compression",
    ],
)
@pytest.mark.parametrize("data", [b"", TEXT, os.urandom(300_000)], ids=len)
def test_lz4_frames_written_by_python_lz4_decompress(options, data):
    frame = lz4.frame.compress(data, block_linked=False, **options)
    assert decompress(Compression.LZ4, frame) == data


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200_000), block_size=st.sampled_from([4, 5, 6, 7]))
def test_lz4_block_path_agrees_with_lz4_frame(data, block_size):
    frame = lz4.frame.compress(data, block_linked=False, block_size=block_size)
    assert decompress(Compression.LZ4, frame) == lz4.frame.decompress(frame)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda frame: frame[:6] + bytes([frame[6] ^ 1]) + frame[7:], "header checksum"),
        (lambda frame: frame[:4] + bytes([frame[4] | 0x01]) + frame[5:], "descriptor"),
        (lambda frame: frame + b"\x00", "after the end"),
        (lambda frame: frame[:-4], "cut short"),
        (lambda frame: frame[:15] + struct.pack("<I", 70_000) + frame[19:], "the frame allows"),
    ],
    ids=["header-checksum", "dictionary-id", "trailing", "no-end-mark", "block-too-large"],
)
def test_damaged_lz4_frames_are_refused(damage, match):
    frame = lz4.frame.compress(TEXT, block_linked=False, store_size=True)  # a 15-byte header
    with pytest.raises(CorruptRecordError, match=match):
        decompress(Compression.LZ4, damage(frame))
