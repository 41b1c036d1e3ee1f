"""Record sets for Produce requests: real batches from kafka-python's builder, and broken ones.

Valid batches come from ``kafka.record.default_records.DefaultRecordBatchBuilder`` (a builder we
did not write) with every codec (none, gzip, snappy, lz4, zstd), keys from a small pool (so the
compacted topic has something to compact), null values (tombstones), headers, producer ids and
sequences, and now and then a value past 64 KiB (the broker validates those on a worker thread).

Broken ones start from a valid batch and lie in one place, with the CRC recomputed where the
lie is inside the checksummed bytes, so that only a validator that looks past the CRC refuses
them: a header claiming 2^31-1 records (or another count) over the few it carries, a
``last_offset_delta`` past the records, inner offsets out of order, magic 0/1/3, a
``batch_length`` that disagrees with the bytes, a cut tail, a flipped byte under a stale CRC,
garbage or a decompression bomb behind a codec, the control or transactional bits, and message
sets of the old formats (magic 0 and 1).

``RecordSet.offsets_max`` is the most offsets an honest broker can give the set: the records it
really carries (for a lying count, the truth, not the claim); the invariants bound the growth of
a log end offset by it. ``RecordSet.kafka_refuses`` says whether Kafka 3.x refuses the set
whatever the topic's settings: a broker that accepts one accepts what it cannot honour.

Payload bytes come from ``random.Random(seed)`` with a drawn seed, and timestamps are
``base_time_ms`` plus a drawn delta, so a Hypothesis seed reproduces every byte.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from functools import cache

from crc32c import crc32c
from hypothesis import strategies as st
from kafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from support.kafka_batches import kafka_python_batch

__all__ = ["RecordSet", "record_sets", "CODECS"]

CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd
_ENCODERS = {1: gzip_encode, 2: snappy_encode, 3: lz4_encode, 4: zstd_encode}
KEYS = tuple(b"key-%d" % i for i in range(5))
BIG_VALUE_BYTES = (65 * 1024, 200 * 1024)  # past the broker's 64 KiB worker-thread threshold
BOMB_BYTES = (1 << 20, 16 << 20, 64 << 20)  # decompressed sizes behind a few KiB
INT32_MAX = 2**31 - 1

# Header offsets of a v2 batch (odradek.storage.batch has the table).
_LENGTH, _MAGIC, _CRC, _ATTRIBUTES, _LAST_OFFSET_DELTA, _COUNT, _HEADER = 8, 16, 17, 21, 23, 57, 61
_CONTROL, _TRANSACTIONAL = 0x20, 0x10


@dataclass(frozen=True)
class RecordSet:
    """A ``records`` value and what it really holds."""

    data: bytes | None
    offsets_max: int  # the most offsets an honest broker may assign to it
    kind: str  # what it is, for the report of a failing case
    kafka_refuses: bool  # Kafka 3.x refuses it whatever the topic (INVALID_RECORD & co.)

    def __repr__(self) -> str:  # short: Hypothesis and pytest print cases
        return f"RecordSet({self.kind!r}, {len(self.data or b'')} bytes)"


def _gzip_without_mtime(compressed: bytearray | bytes, at: int) -> bytearray:
    """Zero the MTIME of the gzip member at ``at`` (gzip writes the time there, which would
    make a seed's bytes differ between runs); its checksum covers the data, not the header."""
    data = bytearray(compressed)
    data[at + 4 : at + 8] = bytes(4)
    return data


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, _CRC, crc32c(memoryview(batch)[_ATTRIBUTES:]))
    return bytes(batch)


def _payload(seed: int, size: int) -> bytes:
    """Compressible bytes (a short random phrase repeated), reproducible from ``seed``."""
    phrase = random.Random(seed).randbytes(16)
    return (phrase * (size // 16 + 1))[:size]


@dataclass(frozen=True)
class _Record:
    offset_delta: int
    timestamp_delta_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _build(
    records: list[_Record],
    codec: int,
    base_time_ms: int,
    producer: tuple[int, int, int],
    transactional: bool,
) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    batch = kafka_python_batch(
        (
            (r.offset_delta, base_time_ms + r.timestamp_delta_ms, r.key, r.value, r.headers)
            for r in records
        ),
        codec=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    if struct.unpack_from(">h", batch, _ATTRIBUTES)[0] & 0x07 == 1:  # gzip
        return _with_crc(_gzip_without_mtime(batch, _HEADER))
    return bytes(batch)


@st.composite
def _records(draw: st.DrawFn, *, count: int) -> list[_Record]:
    out = []
    for index in range(count):
        key = draw(st.sampled_from((None, *KEYS)))
        kind = draw(st.sampled_from(("small", "small", "small", "null", "big")))
        if kind == "null":
            value = None  # a tombstone when it has a key
        elif kind == "big" and index == 0:
            value = _payload(draw(st.integers(0, 2**16)), draw(st.sampled_from(BIG_VALUE_BYTES)))
        else:
            value = _payload(draw(st.integers(0, 2**16)), draw(st.integers(0, 200)))
        headers = tuple(
            (
                draw(st.sampled_from(("h", "trace-id", "ü", ""))),
                draw(st.none() | st.binary(max_size=8)),
            )
            for _ in range(draw(st.integers(0, 2)))
        )
        delta = draw(st.sampled_from((0, 1, 1000, -1000, 2**40)))
        out.append(_Record(index, delta, key, value, headers))
    return out


_PRODUCERS = st.one_of(
    st.just((-1, -1, -1)),
    st.tuples(
        st.sampled_from((0, 1, 1000, 2**63 - 1)),
        st.sampled_from((0, 1, 32767, -1)),
        st.sampled_from((0, 1, 5, INT32_MAX, -1)),
    ),
)


@st.composite
def valid_batches(draw: st.DrawFn, base_time_ms: int) -> RecordSet:
    """One batch as a producer builds it."""
    count = draw(st.integers(1, 20))
    records = draw(_records(count=count))
    codec = draw(st.sampled_from(CODECS))
    producer = draw(st.sampled_from(((-1, -1, -1),) * 3) | _PRODUCERS)
    data = _build(records, codec, base_time_ms, producer, transactional=False)
    refused = producer[0] >= 0 and producer[2] < 0  # a producer id needs a sequence
    kind = f"batch codec={codec} records={count} producer={producer}"
    return RecordSet(data, count, kind, refused)


@cache
def _bomb(codec: int, size: int, base_time_ms: int, structured: bool) -> bytes:
    """A batch of one record whose value is ``size`` zero bytes, compressed with ``codec``; or,
    unstructured, ``size`` zero bytes behind the header (not records at all), CRC correct."""
    if structured:
        record = _Record(0, 0, KEYS[0], bytes(size), ())
        return _build([record], codec, base_time_ms, (-1, -1, -1), False)
    template = bytearray(
        _build([_Record(0, 0, None, b"x", ())], 0, base_time_ms, (-1, -1, -1), False)
    )
    compressed = _ENCODERS[codec](bytes(size))
    if codec == 1:
        compressed = _gzip_without_mtime(compressed, 0)
    batch = template[:_HEADER] + compressed
    struct.pack_into(">i", batch, _LENGTH, len(batch) - 12)
    struct.pack_into(">h", batch, _ATTRIBUTES, codec)
    return _with_crc(batch)


@st.composite
def broken_batches(draw: st.DrawFn, base_time_ms: int) -> RecordSet:
    """A batch that lies in one way; see the module docstring."""
    count = draw(st.integers(1, 5))
    codec = draw(st.sampled_from(CODECS))
    good = _build(draw(_records(count=count)), codec, base_time_ms, (-1, -1, -1), False)
    batch = bytearray(good)
    kind = draw(
        st.sampled_from(
            (
                "lying-count",
                "lying-last-offset-delta",
                "lying-both",
                "lying-both",
                "lying-both",
                "offset-deltas-out-of-order",
                "magic",
                "batch-length",
                "truncated",
                "stale-crc",
                "garbage-behind-codec",
                "bomb",
                "control",
                "transactional",
                "empty",
                "legacy",
            )
        )
    )
    offsets = count
    # Kafka refuses all of these (LogValidator.validateBatch, ProduceRequest.validateRecords)
    # except a transactional batch, which it judges by the producer's transaction state.
    refused = kind != "transactional"
    if kind in ("lying-count", "lying-both"):
        claimed = draw(st.sampled_from((INT32_MAX, INT32_MAX, INT32_MAX, count + 1, 1000, 0, -1)))
        struct.pack_into(">i", batch, _COUNT, claimed)
        if kind == "lying-both":
            struct.pack_into(">i", batch, _LAST_OFFSET_DELTA, claimed - 1)
        data = _with_crc(batch)
    elif kind == "lying-last-offset-delta":
        claimed = draw(st.sampled_from((INT32_MAX, count, count + 7, -1, -(2**31))))
        struct.pack_into(">i", batch, _LAST_OFFSET_DELTA, claimed)
        data = _with_crc(batch)
    elif kind == "offset-deltas-out-of-order":
        # Compressed, so Kafka checks the inner offsets (it does not for uncompressed batches);
        # the header's count and last offset delta agree with each other.
        count = max(count, 2)
        deltas = [*range(count)]
        deltas[0], deltas[-1] = deltas[-1], deltas[0]
        records = [_Record(d, 0, KEYS[0], _payload(d, 100), ()) for d in deltas]
        codec = draw(st.sampled_from(CODECS[1:]))
        batch = bytearray(_build(records, codec, base_time_ms, (-1, -1, -1), False))
        struct.pack_into(">i", batch, _LAST_OFFSET_DELTA, count - 1)
        data = _with_crc(batch)
    elif kind == "magic":
        batch[_MAGIC] = draw(st.sampled_from((0, 1, 3, 255)))
        data = bytes(batch)  # the magic byte is outside the CRC
    elif kind == "batch-length":
        delta = draw(st.sampled_from((-1, 1, -40, 1000, INT32_MAX - len(batch))))
        struct.pack_into(">i", batch, _LENGTH, len(batch) - 12 + delta)
        data = bytes(batch)
    elif kind == "truncated":
        data = bytes(batch[: draw(st.integers(1, len(batch) - 1))])
    elif kind == "stale-crc":
        position = draw(st.integers(_ATTRIBUTES, len(batch) - 1))
        batch[position] ^= draw(st.integers(1, 255))
        data = bytes(batch)
    elif kind == "garbage-behind-codec":
        garbage = random.Random(draw(st.integers(0, 2**16))).randbytes(draw(st.integers(0, 300)))
        batch = batch[:_HEADER] + garbage
        struct.pack_into(">i", batch, _LENGTH, len(batch) - 12)
        struct.pack_into(">h", batch, _ATTRIBUTES, draw(st.sampled_from(CODECS[1:])))
        data = _with_crc(batch)
    elif kind == "bomb":
        structured = draw(st.booleans())
        data = _bomb(
            draw(st.sampled_from(CODECS[1:])),
            draw(st.sampled_from(BOMB_BYTES)),
            base_time_ms,
            structured,
        )
        offsets = 1
        refused = not structured  # a record of 64 MiB of zeros is a record, to Kafka
    elif kind in ("control", "transactional"):
        attributes = struct.unpack_from(">h", batch, _ATTRIBUTES)[0]
        mask = _CONTROL if kind == "control" else _TRANSACTIONAL
        struct.pack_into(">h", batch, _ATTRIBUTES, attributes | mask)
        data = _with_crc(batch)
    elif kind == "empty":  # a header and no records, claiming none
        batch = batch[:_HEADER]
        struct.pack_into(">i", batch, _LENGTH, _HEADER - 12)
        struct.pack_into(">i", batch, _COUNT, 0)
        struct.pack_into(">i", batch, _LAST_OFFSET_DELTA, draw(st.sampled_from((-1, 0))))
        data = _with_crc(batch)
    else:  # legacy: a magic 0 or 1 message set, which Produce v3+ may not carry
        magic = draw(st.sampled_from((0, 1)))
        codec = draw(st.sampled_from((0, 2)))  # gzip holds the time; lz4 v0 needs xxhash
        builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
        for index in range(count):
            builder.append(index, base_time_ms if magic else None, KEYS[0], b"legacy %d" % index)
        data = bytes(builder.build())
    return RecordSet(
        data, offsets, f"broken batch: {kind} (codec={codec}, records={count})", refused
    )


@st.composite
def record_sets(draw: st.DrawFn, base_time_ms: int) -> RecordSet:
    """What a ``records`` field holds: one batch, valid or broken, most of the time; sometimes
    several (Kafka refuses more than one per partition), null, empty or random bytes."""
    shape = draw(
        st.sampled_from(
            ("valid",) * 6 + ("broken",) * 4 + ("several", "several", "null", "empty", "random")
        )
    )
    if shape == "null":
        return RecordSet(None, 0, "null records", True)
    if shape == "empty":
        return RecordSet(b"", 0, "empty records", True)
    if shape == "random":
        data = random.Random(draw(st.integers(0, 2**16))).randbytes(draw(st.integers(1, 200)))
        return RecordSet(data, 0, "random bytes as records", True)
    if shape != "several":
        return draw(
            broken_batches(base_time_ms) if shape == "broken" else valid_batches(base_time_ms)
        )
    parts = [
        draw(broken_batches(base_time_ms) if broken else valid_batches(base_time_ms))
        for broken in draw(st.lists(st.booleans(), min_size=2, max_size=3))
    ]
    # Produce v3+ carries exactly one batch per partition (ProduceRequest.validateRecords).
    return RecordSet(
        b"".join(p.data or b"" for p in parts),
        sum(p.offsets_max for p in parts),
        " + ".join(p.kind for p in parts),
        True,
    )
