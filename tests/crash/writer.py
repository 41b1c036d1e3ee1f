"""A writer process for crash tests: appends batches to a LogManager until killed or done.

Run as ``python writer.py --log-dir D [--log-dir D2] --partitions N --seed S ...``. It opens a
``LogManager`` over the directories, creates partitions ``0..N-1`` of topic ``crash`` and appends
one batch at a time to a partition chosen by a seeded RNG. Batches are built with kafka-python's
``DefaultRecordBatchBuilder`` (varied record counts and sizes, all five codecs). After each
append returns it prints, and flushes, one line::

    ACK <partition> <first_offset> <last_offset> <digest>

``digest`` is ``batch_digest`` of the records appended, so a test that decodes the batch back can
check its contents. Records say which batch they belong to: the key is
``<partition>:<seq>:<index>``, where ``seq`` numbers a partition's batches from 0, and record
timestamps are ``start_ms + seq * 64 + index``, strictly increasing through a partition (a
resumed writer starts later, so they keep increasing).

With ``--large-value-bytes N`` every batch holds 1-3 records of N/2 to N random (incompressible)
bytes, which the writer's ``max.message.bytes`` admits: for tests of recovery with large batches.

Only one append is in flight at a time, so when the process dies at most one batch may be in the
log without its ACK. The process never shuts the manager down unless ``--clean-shutdown`` is
given: leaving without it is an unclean exit, like a kill at a quiet moment.

A kill lands wherever the process happens to be, and building batches in Python takes longer
than writing them, so most kills would miss the write. ``--pause-mid-write-ms`` injects a fault
that widens the window, through the ``FileOps`` the manager is given (``PausedWrites``): each
segment write is split at a seeded point (a quarter of the time, after the last byte) with a
pause between the two parts, so a kill in the pause leaves what a crash mid-write leaves, the
first bytes of a batch at the tail, or a whole batch not yet acknowledged.

Over directories a previous writer left, it resumes: numbering continues after the batches
already in each partition. Tests load this file as a module for ``batch_digest``,
``topic_config``, ``parse_key`` and ``build_batch``.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from collections.abc import Iterable, Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder

from odradek.config.topic import TopicConfig
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, OsFileOps
from odradek.storage.manager import LogManager

TOPIC = "crash"
CODECS = (0, 0, 1, 2, 3, 4)  # none (twice as likely), gzip, snappy, lz4, zstd
RECORDS_PER_BATCH_MAX = 40  # below the 64 timestamps each batch owns
TIMESTAMP_STRIDE_MS = 64
LARGE_VALUE_BYTES_MAX = 12_000  # keep below segment.bytes: a record set must fit a segment
# With --large-value-bytes N the writer's max.message.bytes admits 3 such records and overhead.
LARGE_BATCH_OVERHEAD_BYTES = 4096

Record = tuple[int, bytes, bytes]  # timestamp_ms, key, value


def batch_digest(records: Iterable[Record]) -> str:
    """A hash of a batch's records (timestamp, key, value), the same in writer and test."""
    h = hashlib.sha256()
    for timestamp_ms, key, value in records:
        h.update(timestamp_ms.to_bytes(8, "big", signed=True))
        h.update(len(key).to_bytes(4, "big"))
        h.update(key)
        h.update(len(value).to_bytes(4, "big"))
        h.update(value)
    return h.hexdigest()[:32]


def parse_key(key: bytes) -> tuple[int, int, int]:
    """``b"<partition>:<seq>:<index>"`` -> (partition, seq, index)."""
    partition, seq, index = key.decode().split(":")
    return int(partition), int(seq), int(index)


def topic_config(
    *,
    segment_bytes: int,
    index_interval_bytes: int,
    segment_index_bytes: int,
    flush_messages: int | None,
    max_message_bytes: int | None = None,
) -> TopicConfig:
    """The writer's topic configuration; None keeps Kafka's default for that setting."""
    config = TopicConfig(
        segment_bytes=segment_bytes,
        index_interval_bytes=index_interval_bytes,
        segment_index_bytes=segment_index_bytes,
    )
    overrides = {"flush.messages": flush_messages, "max.message.bytes": max_message_bytes}
    chosen = {key: value for key, value in overrides.items() if value is not None}
    return TopicConfig.from_properties(chosen, base=config) if chosen else config


def make_records(
    rng: random.Random, partition: int, seq: int, start_ms: int, large_value_bytes: int = 0
) -> list[Record]:
    """The records of a partition's batch ``seq``: mostly small, sometimes many or large.

    With ``large_value_bytes``, every batch holds 1-3 records of about that many random bytes.
    """
    shape = rng.random()
    if large_value_bytes:
        count, value_bytes_max = rng.randint(1, 3), large_value_bytes
    elif shape < 0.1:
        count, value_bytes_max = rng.randint(1, 3), LARGE_VALUE_BYTES_MAX // 3
    elif shape < 0.3:
        count, value_bytes_max = rng.randint(20, RECORDS_PER_BATCH_MAX), 200
    else:
        count, value_bytes_max = rng.randint(1, 8), 400
    records = []
    for index in range(count):
        key = f"{partition}:{seq}:{index}".encode()
        filler_bytes = rng.randint(
            value_bytes_max // 2 if large_value_bytes else 0, value_bytes_max
        )
        # Half text (compresses well), half random bytes (does not); large values stay large.
        filler = (
            (key * (filler_bytes // len(key) + 1))[:filler_bytes]
            if rng.random() < 0.5 and not large_value_bytes
            else rng.randbytes(filler_bytes)
        )
        value = b"value of " + key + b"|" + filler
        records.append((start_ms + seq * TIMESTAMP_STRIDE_MS + index, key, value))
    return records


def build_batch(records: Sequence[Record], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset_delta, (timestamp_ms, key, value) in enumerate(records):
        builder.append(offset_delta, timestamp_ms, key, value, [])
    return bytes(builder.build())


class PausedWrites(OsFileOps):
    """Fault injection: every segment write (``pwritev``) split in two, pausing between the
    parts; every other operation is the real one."""

    def __init__(self, pause_s: float, rng: random.Random):
        self.pause_s = pause_s
        self.rng = rng

    def pwritev(self, fd: int, buffers: Sequence[bytes | memoryview], position: int, /) -> int:
        data = b"".join(buffers)
        cut = len(data) if self.rng.random() < 0.25 else self.rng.randrange(1, len(data))
        _pwrite_all(fd, data[:cut], position)
        time.sleep(self.pause_s)
        if cut < len(data):
            _pwrite_all(fd, data[cut:], position + cut)
        return len(data)


def _pwrite_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = OS_FILE_OPS.pwrite(fd, view, position)
        view, position = view[written:], position + written


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-dir", action="append", required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flush-messages", type=int, help="default: Kafka's, page cache only")
    parser.add_argument("--segment-bytes", type=int, default=32 * 1024)
    parser.add_argument("--index-interval-bytes", type=int, default=256)
    parser.add_argument("--segment-index-bytes", type=int, default=10 * 1024 * 1024)
    parser.add_argument(
        "--large-value-bytes", type=int, default=0, help="if set: batches of 1-3 such records"
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=0, help="appends between checkpoints; 0: never"
    )
    parser.add_argument("--max-appends", type=int, default=100_000)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--pause-mid-write-ms", type=float, default=0.0)
    parser.add_argument("--clean-shutdown", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    file_ops: FileOps = OS_FILE_OPS
    if args.pause_mid_write_ms > 0:
        file_ops = PausedWrites(args.pause_mid_write_ms / 1000, random.Random(args.seed + 1))
    config = topic_config(
        segment_bytes=args.segment_bytes,
        index_interval_bytes=args.index_interval_bytes,
        segment_index_bytes=args.segment_index_bytes,
        flush_messages=args.flush_messages,
        max_message_bytes=(
            3 * args.large_value_bytes + LARGE_BATCH_OVERHEAD_BYTES
            if args.large_value_bytes
            else None
        ),
    )
    # Upkeep never runs on its own thread here: flushes and checkpoints happen at known points.
    manager = LogManager(args.log_dir, topic_config=lambda topic: config, file_ops=file_ops)
    manager.load()
    logs = [manager.get_or_create_log(TOPIC, p) for p in range(args.partitions)]
    # Over an existing log, numbering resumes after the batches already there.
    next_seq = [sum(1 for _ in log.batches()) for log in logs]
    start_ms = int(time.time() * 1000)
    deadline = time.monotonic() + args.max_seconds
    out = sys.stdout
    for appended in range(1, args.max_appends + 1):
        if time.monotonic() >= deadline:
            break
        partition = rng.randrange(args.partitions)
        seq = next_seq[partition]
        records = make_records(rng, partition, seq, start_ms, args.large_value_bytes)
        info = logs[partition].append(build_batch(records, rng.choice(CODECS)))
        next_seq[partition] = seq + 1
        out.write(
            f"ACK {partition} {info.first_offset} {info.last_offset} {batch_digest(records)}\n"
        )
        out.flush()
        if args.checkpoint_every and appended % args.checkpoint_every == 0:
            manager.flush_due()  # fsyncs rolled segments, moving recovery points
            manager.write_checkpoints()
    if args.clean_shutdown:
        manager.shutdown()
    out.write("DONE\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
