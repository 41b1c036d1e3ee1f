"""The five codecs of Kafka record batches, by their attribute ids, with a bound on output size.

Compression uses ``cramjam`` (one wheel, no system libraries). Decompression streams, in pieces of
at most ``DECOMPRESSION_CHUNK_BYTES``, through the library that can stop after a given number of
output bytes for each codec, so that nothing ever allocates what a batch announces or what a bomb
would expand to:

- gzip: the standard library's ``zlib.decompressobj`` with ``max_length``. One gzip stream;
  concatenated members are read as one stream, as Java's ``GZIPInputStream`` reads them.
- snappy: the *xerial* framing of ``snappy-java``, which Kafka's Java client writes and
  librdkafka and kafka-python also write and read::

      b"\\x82SNAPPY\\x00"  int32 version (1)  int32 compatible version (1)
      then blocks: int32 length (big-endian), one raw snappy block of that length

  cramjam offers raw snappy and the framing format of the snappy project, but not xerial, so the
  few lines of ``_compress_xerial`` and ``_xerial_chunks`` below exist only for that. Reading
  also accepts a bare raw snappy block, as every Kafka client does (detected by the magic); it is
  what librdkafka writes. A raw block states its decompressed length first, and that length is
  checked against the bound before cramjam decompresses the block: a snappy block cannot be
  decompressed in pieces, so one block (its stated size, never more) is the unit of memory.
- lz4: the LZ4 *frame* format with independent blocks. Kafka's Java reader decodes each block on
  its own and refuses a frame without the block-independence flag (KIP-57), so such a frame is
  refused here too: the broker must not store what Java consumers cannot read. Since the blocks
  are independent, the frame is read block by block (a few lines below walk its headers and
  check its header checksum) and each block is decompressed by cramjam into one buffer of the
  frame's maximum block size (64 KiB for every Kafka client), releasing the GIL. ``lz4.frame``'s
  ``LZ4FrameDecompressor`` (with ``max_length``) reads the rare frame with block or content
  checksums, which it verifies; it holds the GIL and is about twice as slow. One frame per
  batch, as every Kafka client writes; bytes after it are refused. cramjam's one-shot
  ``lz4.compress`` links blocks; its ``Compressor`` can be told not to.
- zstd: ``zstandard``'s ``stream_reader``, reading across concatenated frames as zstd-jni does,
  with the decoder's window bounded by ``ZSTD_MAX_WINDOW_BYTES`` (a frame may ask for up to
  2 GiB of window, which the decoder would allocate before producing a byte).

Output beyond ``max_size`` bytes (``MAX_DECOMPRESSED_BYTES`` unless the caller says otherwise)
raises ``CorruptRecordError`` as soon as it is produced, naming the limit. Any codec failure is
``CorruptRecordError`` chained to the library's error. zlib, lz4, zstandard and cramjam release
the GIL while they work, so a validation thread decompresses beside the event loop.

All functions are pure and safe to call from any thread.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from odradek.errors import CorruptRecordError

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "DecompressionLimitError",
    "Compression",
    "compress",
    "decompress",
    "decompress_chunks",
]

# Largest records section a compressed batch may expand to. Kafka's largest default batch
# (message.max.bytes) is about 1 MiB compressed; 64 MiB leaves room for highly compressible data.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
# Decompressed bytes produced per step: what a reader of the stream holds at once. 128 KiB makes
# the per-step costs (a call, a walker feed) negligible and stays within the L2 cache.
DECOMPRESSION_CHUNK_BYTES = 128 * 1024
# Compressed bytes handed to the LZ4 decoder per call (it copies what it has not consumed).
LZ4_INPUT_BYTES = 64 * 1024
# Largest zstd window accepted: 8 MiB is what levels up to 19 use (librdkafka's and zstd-jni's
# defaults use 2 MiB or less); only the "ultra" levels 20-22 ask for more.
ZSTD_MAX_WINDOW_BYTES = 8 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with version 1
XERIAL_BLOCK_BYTES = 32 * 1024  # uncompressed bytes per block, as snappy-java and kafka-python
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
# LZ4's fast mode, as librdkafka and kafka-python use; cramjam's default is its slower
# high-compression mode (about 6 times slower for 10% smaller output on record data).
_LZ4_LEVEL = 0
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
# The LZ4 frame format (lz4's doc/lz4_Frame_format.md): FLG and BD bits, block size codes.
_LZ4_BLOCK_INDEPENDENCE = 0x20
_LZ4_BLOCK_CHECKSUM = 0x10
_LZ4_CONTENT_SIZE = 0x08
_LZ4_CONTENT_CHECKSUM = 0x04
_LZ4_RESERVED_FLAGS = 0x03  # bit 1 reserved, bit 0 dictionary id: Kafka's reader refuses both
_LZ4_BLOCK_MAX_BYTES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000  # the high bit of a block's size
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate data
_LE_U32 = struct.Struct("<I")
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50  # 16 values: 0x184D2A50 to 0x184D2A5F
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_RLE_BLOCK = 1  # one byte of content, repeated


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
_COMPRESSORS = {
    Compression.GZIP: cramjam.gzip,
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
    return bytes(_COMPRESSORS[codec].compress(data))


class DecompressionLimitError(CorruptRecordError):
    """Data that decompresses past the ``max_size`` it was given (CORRUPT_MESSAGE).

    A caller that tried a small bound first (validation on the event loop) catches it and tries
    again, elsewhere, with the real one.
    """


def decompress(
    codec: Compression, data: _BytesLike, *, max_size: int = MAX_DECOMPRESSED_BYTES
) -> bytes:
    """Decompress ``data`` whole; ``CorruptRecordError`` if it is damaged or exceeds ``max_size``.

    Holds at most ``max_size`` bytes (plus one chunk) whatever ``data`` claims or expands to.
    """
    return b"".join([bytes(piece) for piece in decompress_chunks(codec, data, max_size=max_size)])


def decompress_chunks(
    codec: Compression,
    data: _BytesLike,
    *,
    max_size: int = MAX_DECOMPRESSED_BYTES,
    chunk_bytes: int = DECOMPRESSION_CHUNK_BYTES,
) -> Iterator[bytes | memoryview]:
    """Yield the decompressed ``data`` in pieces of at most ``chunk_bytes`` (a snappy block may be
    larger), stopping with ``CorruptRecordError`` once more than ``max_size`` bytes came out.

    A piece is only valid until the next one is asked for (it may be a view into a buffer).
    """
    codec = Compression(codec)
    view = memoryview(data).cast("B")
    if codec is Compression.NONE:
        pieces: Iterator[bytes | memoryview] = iter((view,))
    else:
        pieces = _CHUNKERS[codec](view, max_size, chunk_bytes)
    total = 0
    try:
        for piece in pieces:
            total += len(piece)
            if total > max_size:
                raise DecompressionLimitError(
                    f"{codec.name} data decompresses to more than {max_size} bytes "
                    f"(the limit on a batch's records section)"
                )
            yield piece
    except (zlib.error, RuntimeError, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(f"{codec.name} data is corrupt: {exc}") from exc


def _gzip_chunks(view: memoryview, max_size: int, chunk_bytes: int) -> Iterator[bytes]:
    del max_size  # the caller counts the output
    remaining: bytes | memoryview = view
    while True:
        decompressor = zlib.decompressobj(_GZIP_WBITS)
        tail = remaining
        while not decompressor.eof:
            piece = decompressor.decompress(tail, chunk_bytes)
            tail = decompressor.unconsumed_tail
            if piece:
                yield piece
            elif not tail and not decompressor.eof:
                # All input taken, nothing more comes out and the stream has not ended.
                raise CorruptRecordError("gzip data is cut short")
        remaining = decompressor.unused_data
        if not remaining:
            return  # another member follows only if bytes do


def _lz4_chunks(view: memoryview, max_size: int, chunk_bytes: int) -> Iterator[bytes | memoryview]:
    del max_size
    if len(view) < 7 or view[:4] != _LZ4_FRAME_MAGIC:
        raise CorruptRecordError("lz4 data does not start with an LZ4 frame")
    flags, block_descriptor = view[4], view[5]
    if not flags & _LZ4_BLOCK_INDEPENDENCE:
        raise CorruptRecordError(
            "lz4 frame with linked blocks: Kafka's Java clients cannot read it (KIP-57), "
            "so it is refused; compress with independent blocks"
        )
    if flags & (_LZ4_BLOCK_CHECKSUM | _LZ4_CONTENT_CHECKSUM):
        # Rare (no Kafka client writes them): lz4.frame checks them, holding the GIL.
        yield from _lz4_checked_chunks(view, chunk_bytes)
        return
    yield from _lz4_blocks(view, flags, block_descriptor)


def _lz4_blocks(view: memoryview, flags: int, block_descriptor: int) -> Iterator[memoryview]:
    """Decompress an LZ4 frame block by block with cramjam, which releases the GIL.

    The frame's blocks are independent, so each decompresses alone into one buffer of the
    frame's maximum block size (64 KiB to 4 MiB, from its header). The header checksum is
    checked here, as Kafka's Java reader checks it; block and content checksums take the other
    path.
    """
    if flags >> 6 != 1 or flags & _LZ4_RESERVED_FLAGS or block_descriptor & 0x8F:
        raise CorruptRecordError(f"lz4 frame descriptor {flags:#04x} {block_descriptor:#04x}")
    max_block = _LZ4_BLOCK_MAX_BYTES.get(block_descriptor >> 4)
    if max_block is None:
        raise CorruptRecordError(f"lz4 frame block size code {block_descriptor >> 4}")
    position = 6 + (8 if flags & _LZ4_CONTENT_SIZE else 0)
    if len(view) <= position:
        raise CorruptRecordError("lz4 frame header cut short")
    if view[position] != (_xxh32_short(view[4:position]) >> 8) & 0xFF:
        raise CorruptRecordError("lz4 frame header checksum mismatch")
    position += 1
    output = bytearray(max_block)
    while True:
        if len(view) - position < 4:
            raise CorruptRecordError(f"lz4 block size cut short at byte {position}")
        (size,) = _LE_U32.unpack_from(view, position)
        position += 4
        if size == 0:  # the end mark
            break
        stored, size = size & _LZ4_UNCOMPRESSED_BLOCK, size & ~_LZ4_UNCOMPRESSED_BLOCK
        if size > max_block or size > len(view) - position:
            raise CorruptRecordError(
                f"lz4 block of {size} bytes at byte {position}: the frame allows {max_block}, "
                f"{len(view) - position} remain"
            )
        block = view[position : position + size]
        position += size
        if stored:
            yield block
        else:
            written = cramjam.lz4.decompress_block_into(block, output)
            yield memoryview(output)[:written]
    if position != len(view):
        raise CorruptRecordError("bytes after the end of the lz4 frame")


def _lz4_checked_chunks(view: memoryview, chunk_bytes: int) -> Iterator[bytes]:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    for start in range(0, len(view), LZ4_INPUT_BYTES):
        piece = decompressor.decompress(view[start : start + LZ4_INPUT_BYTES], chunk_bytes)
        while True:
            if piece:
                yield piece
            if decompressor.eof:
                if decompressor.unused_data or start + LZ4_INPUT_BYTES < len(view):
                    raise CorruptRecordError("bytes after the end of the lz4 frame")
                return
            if decompressor.needs_input:
                break
            if not piece:
                raise CorruptRecordError("lz4 frame: the decoder makes no progress")
            piece = decompressor.decompress(b"", chunk_bytes)
    raise CorruptRecordError("lz4 frame is cut short")


def _xxh32_short(data: memoryview) -> int:
    """XXH32 with seed 0 of fewer than 16 bytes: the LZ4 frame header checksum's hash."""
    if len(data) >= 16:
        raise ValueError("only the short form of XXH32 is implemented")
    mask = 0xFFFFFFFF
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    digest = (p5 + len(data)) & mask
    position = 0
    while position + 4 <= len(data):
        (word,) = _LE_U32.unpack_from(data, position)
        digest = (digest + word * p3) & mask
        digest = (((digest << 17) | (digest >> 15)) & mask) * p4 & mask
        position += 4
    for byte in data[position:]:
        digest = (digest + byte * p5) & mask
        digest = (((digest << 11) | (digest >> 21)) & mask) * p1 & mask
    digest ^= digest >> 15
    digest = digest * p2 & mask
    digest ^= digest >> 13
    digest = digest * p3 & mask
    return digest ^ (digest >> 16)


def _zstd_chunks(view: memoryview, max_size: int, chunk_bytes: int) -> Iterator[bytes]:
    del max_size
    # zstandard's reader ends quietly when its input stops inside a frame, so the frames'
    # structure is checked first: whole frames, nothing after them.
    _check_zstd_frames(view)
    decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
    with decompressor.stream_reader(view, read_across_frames=True) as reader:
        while piece := reader.read(chunk_bytes):
            yield piece


def _check_zstd_frames(view: memoryview) -> None:
    """Walk the frame and block headers of zstd data (RFC 8878, section 3.1); raise unless the
    data is one or more whole frames. Skippable frames are skipped, as zstd-jni does."""
    if not view:
        raise CorruptRecordError("zstd data is empty")
    position = 0
    while position < len(view):
        if len(view) - position < 4:
            raise CorruptRecordError(f"zstd frame cut short at byte {position}")
        (magic,) = _LE_U32.unpack_from(view, position)
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if len(view) - position < 8:
                raise CorruptRecordError(f"zstd skippable frame cut short at byte {position}")
            (size,) = _LE_U32.unpack_from(view, position + 4)
            position += 8 + size
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"no zstd frame at byte {position} (magic {magic:#010x})")
        position += 4
        if position >= len(view):
            raise CorruptRecordError("zstd frame header cut short")
        descriptor = view[position]
        single_segment = descriptor & 0x20
        position += 1 + (0 if single_segment else 1)  # the window descriptor
        position += (0, 1, 2, 4)[descriptor & 0x03]  # the dictionary id
        position += (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]  # the content size
        while True:
            if len(view) - position < 3:
                raise CorruptRecordError(f"zstd block header cut short at byte {position}")
            block = view[position] | view[position + 1] << 8 | view[position + 2] << 16
            block_type, size = (block >> 1) & 0x03, block >> 3
            position += 3 + (1 if block_type == _ZSTD_RLE_BLOCK else size)
            if block & 1:  # the last block of the frame
                break
        position += 4 if descriptor & 0x04 else 0  # the content checksum
    if position > len(view):
        raise CorruptRecordError(f"zstd frame cut short: it needs {position} bytes of {len(view)}")


def _snappy_chunks(view: memoryview, max_size: int, chunk_bytes: int) -> Iterator[bytes]:
    del chunk_bytes  # a raw snappy block is decompressed whole (see the module docstring)
    if view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
        yield from _xerial_chunks(view, max_size)
    else:
        yield _decompress_snappy_block(view, max_size)


def _compress_xerial(data: _BytesLike) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_BYTES]))
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_chunks(view: memoryview, max_size: int) -> Iterator[bytes]:
    # The version fields are not checked: only version 1 exists, and some writers (Redpanda)
    # have been seen storing them little-endian.
    if len(view) < len(XERIAL_HEADER):
        raise CorruptRecordError(f"xerial snappy header cut short at {len(view)} bytes")
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
        block = _decompress_snappy_block(view[position : position + length], max_size, total)
        total += len(block)
        position += length
        yield block


def _decompress_snappy_block(data: _BytesLike, max_size: int, before: int = 0) -> bytes:
    # A raw block starts with its uncompressed length, so the bound is checked before any work
    # (and cramjam fails if the block decompresses to anything but that length). ``before``:
    # bytes the blocks before this one decompressed to.
    size = cramjam.snappy.decompress_raw_len(data)
    if before + size > max_size:
        raise DecompressionLimitError(
            f"snappy data decompresses to more than {max_size} bytes (a block states {size})"
        )
    return bytes(cramjam.snappy.decompress_raw(data))


_CHUNKERS = {
    Compression.GZIP: _gzip_chunks,
    Compression.SNAPPY: _snappy_chunks,
    Compression.LZ4: _lz4_chunks,
    Compression.ZSTD: _zstd_chunks,
}
