"""The five codecs of Kafka record batches, by their attribute ids, with a bound on output size.

Every codec comes from ``cramjam`` (one wheel, no system libraries). What Kafka puts on the wire:

- gzip: one gzip stream (several concatenated members are accepted on read).
- snappy: the *xerial* framing of ``snappy-java``, which Kafka's Java client writes and
  librdkafka and kafka-python also write and read::

      b"\\x82SNAPPY\\x00"  int32 version (1)  int32 compatible version (1)
      then blocks: int32 length (big-endian), one raw snappy block of that length

  cramjam offers raw snappy and the framing format of the snappy project, but not xerial, so the
  few lines of ``_compress_xerial`` and ``_decompress_xerial`` below exist only for that. Reading
  also accepts a bare raw snappy block, as every Kafka client does (detected by the magic).
- lz4: the LZ4 *frame* format with independent blocks. Kafka's Java reader decodes each block on
  its own and rejects a frame without the block-independence flag, which cramjam's one-shot
  ``lz4.compress`` leaves unset (it links blocks); its ``Compressor`` can be told not to.
- zstd: one zstd frame (concatenated frames are accepted on read).

Decompression is bounded: output beyond ``max_size`` bytes (``MAX_DECOMPRESSED_BYTES`` unless the
caller says otherwise) raises ``CorruptRecordError`` instead of exhausting memory: cramjam
decompresses into a buffer we allocate and fails when it is full, so the bound is exact. Any
codec failure is ``CorruptRecordError`` chained to the library's error.

All functions are pure and safe to call from any thread.
"""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum
from types import ModuleType

import cramjam

from odradek.errors import CorruptRecordError

__all__ = ["MAX_DECOMPRESSED_BYTES", "Compression", "compress", "decompress"]

# Largest records section a compressed batch may expand to. Kafka's largest default batch
# (message.max.bytes) is about 1 MiB compressed; 64 MiB leaves room for highly compressible data.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with version 1
XERIAL_BLOCK_BYTES = 32 * 1024  # uncompressed bytes per block, as snappy-java and kafka-python
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
# LZ4's fast mode, as librdkafka and kafka-python use; cramjam's default is its slower
# high-compression mode (about 6 times slower for 10% smaller output on record data).
_LZ4_LEVEL = 0
# The first output buffer tried: compressed size times the usual ratio of record data.
_FIRST_GUESS_RATIO = 4
_FIRST_GUESS_BYTES = 64 * 1024


class Compression(IntEnum):
    """Codec ids as stored in bits 0-2 of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """The codec for a Kafka ``compression.type`` value (``uncompressed`` or ``none``, ...).

        ``producer`` is not a codec (it means "keep the producer's"), so it raises like any
        unknown name.
        """
        try:
            return _BY_NAME[name.strip().lower()]
        except KeyError:
            raise ValueError(
                f"unknown compression codec {name!r}; expected one of {sorted(_BY_NAME)}"
            ) from None


_BY_NAME = {
    "none": Compression.NONE,
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
_MODULES = {
    Compression.GZIP: cramjam.gzip,
    Compression.LZ4: cramjam.lz4,
    Compression.ZSTD: cramjam.zstd,
}

_BytesLike = bytes | bytearray | memoryview


def compress(codec: Compression, data: _BytesLike) -> bytes:
    """Compress ``data`` the way Kafka clients do for ``codec``."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.SNAPPY:
        return _compress_xerial(data)
    if codec is Compression.LZ4:
        compressor = cramjam.lz4.Compressor(level=_LZ4_LEVEL, block_linked=False)
        compressor.compress(bytes(data))  # it takes bytes only; bytes(bytes) is no copy
        return bytes(compressor.finish())
    return bytes(_MODULES[codec].compress(data))


def decompress(
    codec: Compression, data: _BytesLike, *, max_size: int = MAX_DECOMPRESSED_BYTES
) -> bytes:
    """Decompress ``data``; ``CorruptRecordError`` if it is damaged or exceeds ``max_size``."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        if len(data) > max_size:
            raise CorruptRecordError(f"{len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    try:
        if codec is Compression.SNAPPY:
            if bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _decompress_xerial(memoryview(data), max_size)
            return _decompress_snappy_block(data, max_size)
        return _decompress_bounded(_MODULES[codec], data, max_size)
    except cramjam.DecompressionError as exc:
        # Output longer than the buffer given also lands here ("failed to write whole buffer").
        raise CorruptRecordError(
            f"{codec.name} data is corrupt or decompresses to more than {max_size} bytes: {exc}"
        ) from exc


def _decompress_bounded(module: ModuleType, data: _BytesLike, max_size: int) -> bytes:
    # cramjam stops with an error when the output buffer is full, so the buffer is the bound.
    # First a buffer for the usual ratio (cheap, and reused by the allocator); if the data does
    # not fit (or is corrupt), once more into an anonymous map of the whole bound, whose pages
    # cost nothing until written. The map has one spare byte, so that filling it means "over".
    guess = min(max_size, _FIRST_GUESS_RATIO * len(data) + _FIRST_GUESS_BYTES)
    output = bytearray(guess)
    try:
        size = module.decompress_into(data, output)
        return memoryview(output)[:size].tobytes()
    except cramjam.DecompressionError:
        if guess == max_size:
            raise
    with mmap.mmap(-1, max_size + 1) as mapped:
        size = module.decompress_into(data, mapped)
        if size > max_size:
            raise CorruptRecordError(f"data decompresses to more than {max_size} bytes")
        return mapped[:size]


def _compress_xerial(data: _BytesLike) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_BYTES]))
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _decompress_xerial(view: memoryview, max_size: int) -> bytes:
    # The version fields are not checked: only version 1 exists, and some writers (Redpanda)
    # have been seen storing them little-endian.
    if len(view) < len(XERIAL_HEADER):
        raise CorruptRecordError(f"xerial snappy header cut short at {len(view)} bytes")
    blocks = []
    total = 0
    position = len(XERIAL_HEADER)
    while position < len(view):
        if len(view) - position < _XERIAL_BLOCK_LENGTH.size:
            raise CorruptRecordError(f"xerial snappy block length cut short at {position}")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, position)
        position += _XERIAL_BLOCK_LENGTH.size
        if not 0 < length <= len(view) - position:
            raise CorruptRecordError(
                f"xerial snappy block of {length} bytes at {position}, "
                f"{len(view) - position} remain"
            )
        block = view[position : position + length]
        position += length
        total += cramjam.snappy.decompress_raw_len(block)
        if total > max_size:
            raise CorruptRecordError(f"snappy data decompresses to more than {max_size} bytes")
        blocks.append(block)
    return b"".join([bytes(cramjam.snappy.decompress_raw(block)) for block in blocks])


def _decompress_snappy_block(data: _BytesLike, max_size: int) -> bytes:
    # A raw block starts with its uncompressed length, so the bound is checked before any work.
    size = cramjam.snappy.decompress_raw_len(data)
    if size > max_size:
        raise CorruptRecordError(f"snappy data decompresses to {size} bytes, over {max_size}")
    return bytes(cramjam.snappy.decompress_raw(data))
