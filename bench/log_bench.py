"""Log benchmark: ``Log.append`` and ``Log.read`` throughput next to the raw speed of the same disk.

What is measured, each phase on the same filesystem, in one run:

- raw write: ``os.write`` of the very batch buffers the log will get, in the same order, to a
  new file, no fsync. This is the page cache's sequential write speed for that buffer size and
  the yardstick for appends (the issue's target: appends of 1 MiB batches at >= 60% of it);
- raw sendfile: that file sent to a TCP loopback socket in 1 MiB ``os.sendfile`` calls; the
  yardstick for the fetch path;
- append: ``Log.append`` of every batch into a fresh partition log with the default topic
  configuration (segment.bytes 1 GiB, no fsync: flush.messages and flush.ms unset);
- read, slice only: ``Log.read`` from offset 0 with max_bytes 1 MiB, following the returned
  slices to the log end offset. This is what the broker does before ``sendfile``: no record
  bytes enter Python;
- read + sendfile: the same loop, each slice sent with ``os.sendfile`` to a TCP loopback socket
  that a thread drains with ``recv_into``. The clock stops when the reader has every byte. TCP
  rather than a pipe or /dev/null because that is where a broker's fetch bytes go.

Batches are built before any timing with kafka-python's ``DefaultRecordBatchBuilder`` (values of
1 KiB of random hex text, so they compress about 2:1 with gzip or zstd): 15 records make a
16 KiB batch and 1013 records a 1 MiB one. A pool of ``--pool-mb`` of distinct batches is built
once per size and cycled until ``--total-mb`` is reached; each copy is then stamped 1 ms after
the previous batch (CRC recomputed), so the time index sees increasing timestamps as it would
from a producer. All copies exist before timing starts and are far larger than the CPU caches,
so every write reads its source from memory, as a fresh producer batch would.

One untimed warm-up run comes first (on a VM the first touch of guest memory costs host page
faults). Each figure is then the best of ``--repeat`` runs, with the median and the worst
printed beside it: on a shared 2-core VM, noise (steal time, other processes) only ever slows a
run down, so the best run is the steadiest estimate of what the code can do; the median shows
what a busy machine gives. A ratio divides best by best (and median by median). Files are
deleted after each run, so dirty pages never exceed ``--total-mb`` and writeback does not start.
MB is 10**6 bytes.

Usage: ``.venv/bin/python bench/log_bench.py [--total-mb 1024] [--repeat 5] [--codec none]
[--sizes 16k,1m,16kx64] [--json PATH]``. ``--profile 1m`` (or ``16k``, ``16kx64``) instead runs
one append pass under cProfile and prints the top costs.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import json
import os
import platform
import pstats
import random
import shlex
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from odradek.config.topic import TopicConfig
from odradek.storage.log import Log

REPO_ROOT = Path(__file__).resolve().parent.parent
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
VALUE_BYTES = 1024
FETCH_MAX_BYTES = 1 << 20  # a consumer's max.partition.fetch.bytes default
RECEIVE_BUFFER_BYTES = 4 << 20
TARGET_RATIO = 0.60  # issue 2: appends of 1 MiB batches at >= 60% of raw page-cache writes
TIMESTAMP_MS = 1_763_769_600_000  # T0; all records of a built batch share it (same length)
# Batch header fields rewritten when a pooled batch is copied (see odradek.storage.batch).
CRC_OFFSET, ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET = 17, 21, 27
_TIMESTAMPS = struct.Struct(">qq")  # base_timestamp, max_timestamp: adjacent in the header
_CRC = struct.Struct(">I")


@dataclass(frozen=True)
class BatchSize:
    name: str  # what --sizes and --profile take
    label: str
    records_per_batch: int
    batches_per_append: int = 1  # > 1: that many batches form one record set per append call

    @property
    def title(self) -> str:
        if self.batches_per_append == 1:
            return f"{self.label} batches"
        return f"{self.label} batches, {self.batches_per_append} per append call"


BATCH_SIZES = (
    BatchSize("16k", "16 KiB", 15),  # 15 x ~1.03 KiB records + 61-byte header < 16384
    BatchSize("1m", "1 MiB", 1013),  # < 1048576 and below max.message.bytes (1048588)
    # Optional: what coalescing queued produce requests of a partition into one append buys.
    BatchSize("16kx64", "16 KiB", 15, batches_per_append=64),
)


@dataclass
class Run:
    """One repetition for one batch size; times in seconds."""

    bytes_total: int
    records_total: int
    segments: int
    raw_write_s: float
    append_s: float
    raw_write_cpu_s: float  # this thread's CPU time: excludes steal and other processes' turns
    append_cpu_s: float
    raw_sendfile_s: float
    read_slice_s: float
    read_sendfile_s: float


# -- building (never timed) ----------------------------------------------------------------


def build_batch(records_count: int, codec: int, rng: random.Random) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i in range(records_count):
        value = rng.randbytes(VALUE_BYTES // 2).hex().encode()
        builder.append(i, TIMESTAMP_MS, None, value, [])
    return bytes(builder.build())


def build_pool(size: BatchSize, codec: int, pool_bytes: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    pool = [build_batch(size.records_per_batch, codec, rng)]
    count = max(1, pool_bytes // len(pool[0]))
    pool.extend(build_batch(size.records_per_batch, codec, rng) for _ in range(count - 1))
    return pool


def batches_for(pool: list[bytes], total_bytes: int) -> list[bytes]:
    """The pool cycled until ``total_bytes`` (whole batches), batch ``i`` stamped ``T0 + i`` ms.

    A producer's batches carry increasing timestamps, and the time index only takes an entry
    when the timestamp grows; so each copy gets its own (records keep their deltas) and a fresh
    CRC, as the broker itself does for LogAppendTime.
    """
    average = sum(map(len, pool)) / len(pool)
    count = max(1, round(total_bytes / average))
    return [_shift_timestamps(pool[i % len(pool)], i) for i in range(count)]


def record_sets(batches: list[bytes], batches_per_append: int) -> list[bytes]:
    """Consecutive batches joined into the record sets given to one ``append`` each."""
    if batches_per_append == 1:
        return batches
    return [
        b"".join(batches[i : i + batches_per_append])
        for i in range(0, len(batches), batches_per_append)
    ]


def _shift_timestamps(batch: bytes, delta_ms: int) -> bytes:
    copy = bytearray(batch)
    base_timestamp, max_timestamp = _TIMESTAMPS.unpack_from(copy, BASE_TIMESTAMP_OFFSET)
    _TIMESTAMPS.pack_into(
        copy, BASE_TIMESTAMP_OFFSET, base_timestamp + delta_ms, max_timestamp + delta_ms
    )
    _CRC.pack_into(copy, CRC_OFFSET, crc32c.crc32c(memoryview(copy)[ATTRIBUTES_OFFSET:]))
    return bytes(copy)


# -- the timed phases ----------------------------------------------------------------------


def raw_write(path: Path, batches: list[bytes]) -> tuple[float, float]:
    """Seconds of wall time and of this thread's CPU time."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        gc.collect()
        start, start_cpu = time.perf_counter(), time.thread_time()
        for buffer in batches:
            if os.write(fd, buffer) != len(buffer):
                raise OSError(f"short write to {path}")
        return time.perf_counter() - start, time.thread_time() - start_cpu
    finally:
        os.close(fd)


def log_append(log: Log, batches: list[bytes]) -> tuple[float, float]:
    """Seconds of wall time and of this thread's CPU time."""
    gc.collect()
    start, start_cpu = time.perf_counter(), time.thread_time()
    for buffer in batches:
        log.append(buffer)
    return time.perf_counter() - start, time.thread_time() - start_cpu


def slice_ends(log: Log) -> dict[tuple[int, int], int]:
    """(file descriptor, end position of a batch) -> next offset: where a consumer goes next."""
    ends = {}
    for segment in log.segments():
        for position, header in segment.batches_from(0):
            ends[(segment.file.fileno(), position + header.size_in_bytes)] = header.next_offset
    return ends


def read_log(log: Log, ends: dict[tuple[int, int], int], sink: socket.socket | None) -> int:
    """Follow ``Log.read`` slices from offset 0 to the LEO; sendfile each if ``sink``."""
    offset, sent = 0, 0
    while offset < log.log_end_offset:
        records = log.read(offset, FETCH_MAX_BYTES).records
        fd = records.file.fileno()
        if sink is not None:
            _sendfile_all(sink, fd, records.position, records.size)
        sent += records.size
        offset = ends[(fd, records.position + records.size)]
    return sent


def _sendfile_all(sink: socket.socket, fd: int, position: int, size: int) -> None:
    while size:
        n = os.sendfile(sink.fileno(), fd, position, size)
        position += n
        size -= n


class LoopbackSink:
    """A connected TCP loopback pair; a thread drains the far end, as a consumer would."""

    def __init__(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            self.sender = socket.create_connection(listener.getsockname())
            self.receiver, _ = listener.accept()
        self.sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def timed(self, send: Callable[[socket.socket], object], expected_bytes: int) -> float:
        """Time ``send(sender)`` until the reader has received ``expected_bytes``."""
        received = [0]

        def drain() -> None:
            buffer = bytearray(RECEIVE_BUFFER_BYTES)
            while received[0] < expected_bytes:
                n = self.receiver.recv_into(buffer)
                if n == 0:
                    return
                received[0] += n

        reader = threading.Thread(target=drain, daemon=True)
        gc.collect()
        start = time.perf_counter()
        reader.start()
        send(self.sender)
        reader.join()
        elapsed = time.perf_counter() - start
        if received[0] != expected_bytes:
            raise RuntimeError(f"reader got {received[0]} bytes, expected {expected_bytes}")
        return elapsed

    def close(self) -> None:
        self.sender.close()
        self.receiver.close()


def raw_sendfile(path: Path, sink: socket.socket) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for position in range(0, size, FETCH_MAX_BYTES):
            _sendfile_all(sink, fd, position, min(FETCH_MAX_BYTES, size - position))
    finally:
        os.close(fd)


def run_once(work_dir: Path, batches: list[bytes], sink: LoopbackSink) -> Run:
    bytes_total = sum(map(len, batches))
    raw_path = work_dir / "raw.bin"
    raw_write_s, raw_write_cpu_s = raw_write(raw_path, batches)
    raw_sendfile_s = sink.timed(lambda s: raw_sendfile(raw_path, s), bytes_total)
    raw_path.unlink()

    log = Log(work_dir / "bench-0", TopicConfig())
    try:
        append_s, append_cpu_s = log_append(log, batches)
        ends = slice_ends(log)
        gc.collect()
        start = time.perf_counter()
        if read_log(log, ends, None) != bytes_total:
            raise RuntimeError("slice-only read did not cover the log")
        read_slice_s = time.perf_counter() - start
        read_sendfile_s = sink.timed(lambda s: read_log(log, ends, s), bytes_total)
        return Run(
            bytes_total=bytes_total,
            records_total=log.log_end_offset,
            segments=len(log.segments()),
            raw_write_s=raw_write_s,
            append_s=append_s,
            raw_write_cpu_s=raw_write_cpu_s,
            append_cpu_s=append_cpu_s,
            raw_sendfile_s=raw_sendfile_s,
            read_slice_s=read_slice_s,
            read_sendfile_s=read_sendfile_s,
        )
    finally:
        log.delete()  # no close(): that would fsync a gigabyte we never meant to make durable


# -- reporting -----------------------------------------------------------------------------


def machine_facts(directory: Path) -> dict[str, object]:
    facts: dict[str, object] = {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": _first_line_value("/proc/cpuinfo", "model name"),
        "memory_gib": round(
            int(_first_line_value("/proc/meminfo", "MemTotal").split()[0]) / (1 << 20), 1
        ),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "crc32c_hardware": bool(crc32c.hardware_based),
    }
    facts.update(_filesystem_of(directory))
    return facts


def source_state() -> str:
    """The commit measured, and the storage files that differ from it (others' work)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
        ).stdout.strip()

    changed = git("status", "--porcelain", "--", "services/odradek/storage").splitlines()
    names = ", ".join(line[3:].rsplit("/", 1)[-1] for line in changed)
    return git("rev-parse", "--short", "HEAD") + (f" + uncommitted {names}" if names else "")


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _first_line_value(path: str, key: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def _filesystem_of(directory: Path) -> dict[str, str]:
    """The mount holding ``directory`` (longest mount point prefix in /proc/self/mounts)."""
    best = ("", "?", "?", "?")
    target = str(directory.resolve())
    with open("/proc/self/mounts") as f:
        for line in f:
            source, mount_point, fs_type, options = line.split()[:4]
            inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best[0]):
                best = (mount_point, source, fs_type, options)
    return {
        "mount_point": best[0],
        "device": best[1],
        "filesystem": best[2],
        "mount_options": best[3],
    }


def summarise(size: BatchSize, batch_bytes: int, runs: list[Run]) -> dict[str, object]:
    """Rates per phase (best and median of the runs) and the ratios to the raw phases."""
    bytes_total, records_total = runs[0].bytes_total, runs[0].records_total

    def phase(seconds: list[float]) -> dict[str, object]:
        rates = [bytes_total / s / 1e6 for s in seconds]
        return {
            "best_mb_s": max(rates),
            "median_mb_s": statistics.median(rates),
            "worst_mb_s": min(rates),
            "runs_mb_s": rates,
        }

    phases = {
        name: phase([getattr(r, f"{name}_s") for r in runs])
        for name in (
            "raw_write",
            "append",
            "raw_sendfile",
            "read_slice",
            "read_sendfile",
            "raw_write_cpu",
            "append_cpu",
        )
    }
    records_per_byte = records_total / bytes_total
    for figures in phases.values():
        figures["best_records_s"] = figures["best_mb_s"] * 1e6 * records_per_byte
        figures["median_records_s"] = figures["median_mb_s"] * 1e6 * records_per_byte
    batches_total = records_total / size.records_per_batch
    phases["append"]["best_us_per_batch"] = min(r.append_s for r in runs) / batches_total * 1e6
    phases["append"]["best_us_per_call"] = (
        phases["append"]["best_us_per_batch"] * size.batches_per_append
    )

    def ratio(name: str, raw: str) -> dict[str, float]:
        return {
            stat: phases[name][f"{stat}_mb_s"] / phases[raw][f"{stat}_mb_s"]
            for stat in ("best", "median")
        }

    return {
        "batch": size.title,
        "batches_per_append": size.batches_per_append,
        "batch_bytes": batch_bytes,
        "records_per_batch": size.records_per_batch,
        "bytes_total": bytes_total,
        "records_total": records_total,
        "segments": runs[0].segments,
        "phases": phases,
        "append_to_raw_write": ratio("append", "raw_write"),
        "append_to_raw_write_cpu": ratio("append_cpu", "raw_write_cpu"),
        "read_sendfile_to_raw_sendfile": ratio("read_sendfile", "raw_sendfile"),
        "runs_s": [asdict(r) for r in runs],
    }


def _rate(figures: dict[str, object], records: bool = False) -> str:
    text = f"{figures['best_mb_s']:>7,.0f} MB/s"
    if records:
        text += f" {figures['best_records_s'] / 1e6:5.2f}M rec/s"
    return f"{text}   (median {figures['median_mb_s']:,.0f}, worst {figures['worst_mb_s']:,.0f})"


def _ratio(figures: dict[str, float]) -> str:
    return f"{figures['best']:.0%} (median {figures['median']:.0%})"


def print_report(header: dict[str, object], results: list[dict[str, object]]) -> None:
    facts = header["machine"]
    print(f"odradek log benchmark, {header['date']}")
    print(f"command: {header['command']}")
    print(f"source: {header['source']}")
    print(
        f"machine: {facts['cpus']} CPUs ({facts['cpu_model']}), {facts['memory_gib']} GiB, "
        f"Python {facts['python']}, Linux {facts['kernel']}, "
        f"crc32c hardware: {'yes' if facts['crc32c_hardware'] else 'NO'}"
    )
    print(
        f"directory: {header['directory']} on {facts['device']} ({facts['filesystem']}, "
        f"{facts['mount_options']})"
    )
    print(f"load average before/after: {header['load_before']} / {header['load_after']}")
    print(
        f"workload: {header['total_mb']} MiB per phase, codec {header['codec']}, "
        f"{VALUE_BYTES}-byte values, pool of {header['pool_mb']} MiB cycled; best of "
        f"{header['repeat']} runs after a warm-up (median, worst); MB = 10^6 bytes; no fsync"
    )
    for r in results:
        p = r["phases"]
        print()
        print(
            f"{r['batch']}: {r['batch_bytes']:,} bytes, {r['records_per_batch']} "
            f"records each; {r['records_total']:,} records, {r['bytes_total']:,} bytes, "
            f"{r['segments']} segment(s)"
        )
        per_call = (
            f", {p['append']['best_us_per_call']:.0f} us/call"
            if r["batches_per_append"] > 1
            else ""
        )
        print(
            f"  append            {_rate(p['append'], records=True)}   "
            f"{p['append']['best_us_per_batch']:.1f} us/batch{per_call}"
        )
        print(f"  raw write         {_rate(p['raw_write'])}")
        print(
            f"  append / raw write          {_ratio(r['append_to_raw_write'])}; "
            f"by CPU time {_ratio(r['append_to_raw_write_cpu'])}"
        )
        print(f"  read, slice only  {_rate(p['read_slice'], records=True)}")
        print(f"  read + sendfile   {_rate(p['read_sendfile'], records=True)}")
        print(f"  raw sendfile      {_rate(p['raw_sendfile'])}")
        print(f"  read+sendfile / raw sendfile {_ratio(r['read_sendfile_to_raw_sendfile'])}")
    for r in results:
        if r["batch"] == "1 MiB batches":
            ratio = r["append_to_raw_write"]["best"]
            print()
            print(
                f"target: append of 1 MiB batches >= {TARGET_RATIO:.0%} of raw write: "
                f"{'met' if ratio >= TARGET_RATIO else 'NOT met'} ({ratio:.0%})"
            )


def profile_append(work_dir: Path, batches: list[bytes], top: int = 20) -> None:
    log = Log(work_dir / "profile-0", TopicConfig())
    try:
        profiler = cProfile.Profile()
        profiler.enable()
        for buffer in batches:
            log.append(buffer)
        profiler.disable()
    finally:
        log.delete()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir",
        type=Path,
        default=REPO_ROOT / "var",
        help="a temporary directory is made (and removed) inside this one; "
        "default: the repository's var/",
    )
    parser.add_argument(
        "--total-mb",
        type=int,
        default=1024,
        help="MiB written per phase and batch size (default 1024)",
    )
    parser.add_argument(
        "--codec",
        choices=sorted(CODECS),
        default="none",
        help="producer compression of the batches (default none)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="timed runs per batch size, after one warm-up; the best is reported, "
        "with the median and worst (default 5)",
    )
    parser.add_argument(
        "--pool-mb",
        type=int,
        default=128,
        help="MiB of distinct batches built per size, cycled (default 128)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sizes",
        default="16k,1m",
        help="comma-separated, from 16k, 1m and 16kx64 (16 KiB batches, 64 "
        "per append call); default 16k,1m",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write every figure and run as JSON ('-' for stdout)"
    )
    parser.add_argument(
        "--profile",
        choices=[s.name for s in BATCH_SIZES],
        help="instead of the benchmark, profile one append pass (cProfile)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.total_mb < 1 or args.pool_mb < 1:
        parser.error("--repeat, --total-mb and --pool-mb must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    codec = CODECS[args.codec]
    known = {s.name: s for s in BATCH_SIZES}
    unknown = [name for name in args.sizes.split(",") if name not in known]
    if unknown:
        raise SystemExit(f"unknown --sizes {', '.join(unknown)}: choose from {', '.join(known)}")
    sizes = [known[name] for name in args.sizes.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="log-bench-", dir=args.dir))
    try:
        if args.profile:
            size = next(s for s in BATCH_SIZES if s.name == args.profile)
            pool = build_pool(size, codec, args.pool_mb << 20, args.seed)
            batches = batches_for(pool, args.total_mb << 20)
            profile_append(work_dir, record_sets(batches, size.batches_per_append))
            return 0
        header = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": shlex.join([Path(sys.executable).name, *sys.argv]),
            "directory": str(work_dir),
            "source": source_state(),
            "machine": machine_facts(work_dir),
            "total_mb": args.total_mb,
            "codec": args.codec,
            "repeat": args.repeat,
            "pool_mb": args.pool_mb,
            "statistic": "best",
            "load_before": _load_average(),
        }
        results = []
        sink = LoopbackSink()
        try:
            for size in sizes:
                pool = build_pool(size, codec, args.pool_mb << 20, args.seed)
                batches = record_sets(
                    batches_for(pool, args.total_mb << 20), size.batches_per_append
                )
                run_once(work_dir, batches, sink)  # warm-up: fault in memory, fill caches
                runs = [run_once(work_dir, batches, sink) for _ in range(args.repeat)]
                results.append(summarise(size, round(sum(map(len, pool)) / len(pool)), runs))
                del pool, batches
        finally:
            sink.close()
        header["load_after"] = _load_average()
        print_report(header, results)
        if args.json:
            text = json.dumps({**header, "results": results}, indent=2)
            if args.json == "-":
                print(text)
            else:
                Path(args.json).write_text(text + "\n")
        return 0
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
