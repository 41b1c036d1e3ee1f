"""``odradek storage-demo``: the storage engine alone: write logs, read them back, tell what.

This demo drives the storage engine directly, without brokers: a log manager
over two log directories (JBOD), a topic of three partitions written with every compression
codec, reads and a lookup by time, a compacted topic cleaned down to its latest values, and a
clean restart. Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import shutil
import time
import zlib
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.storage.batch import iter_batches
from odradek.storage.compression import Compression
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.storage.records import Record, decode_records, encode_batch

TOPIC = "events"
COMPACTED_TOPIC = "users"
PARTITIONS = 3
RECORDS_PER_BATCH = 500
READ_MAX_BYTES = 1 << 20


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "storage-demo", help="the storage engine alone: write partition logs, read them back"
    )
    parser.add_argument("--data-dir", type=Path, default=Path("var/storage-demo"))
    parser.add_argument("--records", type=int, default=200_000, help="records to write")
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    shutil.rmtree(data_dir, ignore_errors=True)
    log_dirs = [data_dir / "disk-0", data_dir / "disk-1"]
    configs = {
        TOPIC: TopicConfig(segment_bytes=1 << 20),
        COMPACTED_TOPIC: TopicConfig(cleanup_policy=("compact",), segment_bytes=64 << 10),
    }
    manager = LogManager(log_dirs, topic_config=lambda topic: configs[topic])
    manager.load()
    say(f"log dirs (JBOD): {', '.join(str(d) for d in log_dirs)}")

    logs = [manager.get_or_create_log(TOPIC, p) for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        say(f"  {TOPIC}-{p} placed on {manager.log_dir_of(TOPIC, p).name}")

    base_ts = int(time.time() * 1000) - args.records
    written = produce(logs, args.records, args.value_bytes, base_ts)
    consumed = consume(logs)
    if consumed != written:
        say(f"MISMATCH: wrote {written[0]} records (crc {written[1]:#x}), read {consumed}")
        return 1
    say(f"  read back all {consumed[0]} records, content checksum {consumed[1]:#010x} matches")
    lookup_by_time(logs[0], base_ts)
    compaction(manager)
    restart(manager, log_dirs, configs)
    say(f"done: data left in {data_dir} for a look (`ls {log_dirs[0]}/{TOPIC}-0`)")
    return 0


def produce(logs: list[Log], count: int, value_bytes: int, base_ts: int) -> tuple[int, int]:
    """Append ``count`` records round-robin, one codec per batch; return (count, checksum)."""
    codecs = list(Compression)
    filler = bytes(range(256)) * (value_bytes // 256 + 1)
    checksum, produced, payload_bytes, batches = 0, 0, 0, []
    for n, first in enumerate(range(0, count, RECORDS_PER_BATCH)):
        records = []
        for i in range(first, min(first + RECORDS_PER_BATCH, count)):
            value = b"%d:" % i + filler[: value_bytes - 8]
            records.append(Record(i - first, base_ts + i, b"key-%d" % (i % 1000), value))
            checksum = zlib.crc32(value, checksum)
            payload_bytes += len(value)
        codec = codecs[n % len(codecs)]
        batches.append((n % len(logs), encode_batch(records, base_offset=0, compression=codec)))
        produced += len(records)
    started = time.perf_counter()
    for partition, batch in batches:
        logs[partition].append(batch)
    elapsed = time.perf_counter() - started
    for partition_log in logs:
        partition_log.update_high_watermark(partition_log.log_end_offset)
    stored = sum(len(b) for _, b in batches)
    say(
        f"wrote {produced} records ({payload_bytes / 1e6:.1f} MB of values, {stored / 1e6:.1f} MB "
        f"as batches with none/gzip/snappy/lz4/zstd) in {len(batches)} appends: "
        f"{stored / elapsed / 1e6:.0f} MB/s, {produced / elapsed / 1e3:.0f}k records/s"
    )
    for p, partition_log in enumerate(logs):
        segments = partition_log.segments()
        first, last = partition_log.log_start_offset, partition_log.log_end_offset - 1
        names = ", ".join(s.log_path.name for s in segments[:3])
        more = ", ..." if len(segments) > 3 else ""
        say(f"  {TOPIC}-{p}: offsets {first}..{last} in {len(segments)} segments ({names}{more})")
    return produced, checksum


def consume(logs: list[Log]) -> tuple[int, int]:
    """Read every partition from offset 0 the way a fetch does; decode and checksum values."""
    started = time.perf_counter()
    fetched: list[bytes] = []
    for partition_log in logs:
        offset = partition_log.log_start_offset
        while offset < partition_log.high_watermark:
            info = partition_log.read(
                offset, READ_MAX_BYTES, max_offset=partition_log.high_watermark
            )
            if info.records is None:
                break
            fetched.append(info.records.read_bytes())
            offset = _next_offset(fetched[-1])
    read_s = time.perf_counter() - started
    values: dict[int, bytes] = {}
    for data in fetched:
        for position, header in iter_batches(data):
            for record in decode_records(data[position : position + header.size_in_bytes]):
                values[int(record.value.split(b":", 1)[0])] = record.value
    decode_s = time.perf_counter() - started - read_s
    read_bytes = sum(len(data) for data in fetched)
    checksum = 0
    for index in sorted(values):
        checksum = zlib.crc32(values[index], checksum)
    say(
        f"read {read_bytes / 1e6:.1f} MB back in {len(fetched)} fetch-sized slices of whole "
        f"batches ({read_bytes / read_s / 1e6:.0f} MB/s), then decompressed and decoded "
        f"{len(values)} records client-side in {decode_s:.1f} s"
    )
    return len(values), checksum


def _next_offset(data: bytes) -> int:
    """The offset after the last batch of a fetched slice."""
    *_, (_, last) = iter_batches(data)
    return last.next_offset


def lookup_by_time(partition_log: Log, base_ts: int) -> None:
    target = base_ts + 100_000
    found = partition_log.offset_for_timestamp(target)
    if found is None:
        say(f"lookup by time {target}: no record at or after it in {TOPIC}-0")
    else:
        say(
            f"lookup by time: first record at/after ts {target} in {TOPIC}-0 is offset "
            f"{found.offset} (ts {found.timestamp}), found through the .timeindex"
        )


def compaction(manager: LogManager) -> None:
    """Five rounds of updates to 200 keys, then tombstones for 20; compact; show the result."""
    users = manager.get_or_create_log(COMPACTED_TOPIC, 0)
    now = int(time.time() * 1000)
    for round_ in range(5):
        for first in range(0, 200, 50):
            records = [
                Record(i, now, b"user-%03d" % (first + i), b"round %d" % round_) for i in range(50)
            ]
            users.append(encode_batch(records, base_offset=0, compression=Compression.LZ4))
    tombstones = [Record(i, now, b"user-%03d" % i, None) for i in range(20)]
    users.append(encode_batch(tombstones, base_offset=0))
    users.roll()
    users.update_high_watermark(users.log_end_offset)
    before = sum(1 for _ in _records(users))
    stats = manager.cleaner.clean(users)
    latest = {r.key: r.value for r in _records(users)}
    live = {k: v for k, v in latest.items() if v is not None}
    values = sorted({v.decode() for v in live.values()})
    say(
        f"compacted {COMPACTED_TOPIC}-0: {before} records -> {sum(1 for _ in _records(users))} "
        f"({stats.records_removed if stats else 0} removed): {len(live)} live keys, all at "
        f"{values}, and {len(latest) - len(live)} tombstones kept until delete.retention.ms "
        f"passes; offsets unchanged, reads step over the gaps"
    )


def _records(partition_log: Log):
    for _, batch in partition_log.batches():
        yield from decode_records(batch)


def restart(manager: LogManager, log_dirs: list[Path], configs: dict[str, TopicConfig]) -> None:
    before = {(each.directory.name): each.log_end_offset for each in manager.logs()}
    manager.shutdown()
    started = time.perf_counter()
    reopened = LogManager(log_dirs, topic_config=lambda topic: configs[topic])
    reopened.load()
    elapsed = time.perf_counter() - started
    after = {(each.directory.name): each.log_end_offset for each in reopened.logs()}
    state = "same log end offsets" if after == before else f"DIFFERENT: {before} vs {after}"
    say(
        f"clean shutdown (.kafka_cleanshutdown written) and restart in {elapsed * 1000:.0f} ms "
        f"without rescanning segments: {state}"
    )
    reopened.shutdown()


def say(message: str) -> None:
    print(f"odradek storage-demo: {message}", flush=True)
