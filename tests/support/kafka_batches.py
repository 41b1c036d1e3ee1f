"""Record batches built by a Kafka client library we did not write: kafka-python's
``DefaultRecordBatchBuilder``, the one home of the tests' builder settings (magic 2, no size
limit), so a batch our storage and protocol tests read is one a real producer could have sent.

``kafka_python_batch`` takes each record's offset delta and timestamp as given; the callers decide
them (``conftest.build_batch``: offsets 0..n-1 and one timestamp; the fuzzers: drawn deltas).
Stateless: any number of tests and threads may build at once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder

__all__ = ["KafkaPythonRecord", "kafka_python_batch"]

# offset delta, timestamp_ms, key, value, headers
KafkaPythonRecord = tuple[int, int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


def kafka_python_batch(
    records: Iterable[KafkaPythonRecord],
    *,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytearray:
    """One magic-2 batch of ``records`` as kafka-python builds it (``codec``: 0 none, 1 gzip,
    2 snappy, 3 lz4, 4 zstd; kafka-python may keep a batch uncompressed that would not shrink)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset_delta, timestamp_ms, key, value, headers in records:
        builder.append(offset_delta, timestamp_ms, key, value, list(headers))
    return builder.build()
