"""Validation bench: what checking every record costs on the produce path, per append and in MB/s.

For 16 KiB and 1 MiB batches of 1 KiB records (built before any timing with kafka-python's
``DefaultRecordBatchBuilder``, values of random hex text as in ``log_bench.py``), uncompressed and
lz4, it times, each as the best of ``--repeat`` runs over ``--total-mb`` of batches:

- ``Log.validate`` as the broker runs it (headers, CRC32C, the record walk; for lz4 the bounded
  decompression the walk needs);
- the same with the record walk switched off (``walk_batch`` replaced by a no-op): what
  validation cost before every record was checked;
- the walk alone (``walk_batch``), and for lz4 the decompression alone (``decompress_chunks``);
- ``Log.append`` (validation and write, default topic config, no fsync), with and without the walk.

It prints time per call and MB/s (of batch bytes as sent: compressed for lz4), and the cost of
the record checks: ``validate`` minus its headers-only run, also as a share of an append that
pays it (the two ``append`` runs are printed too, but disk writes make their difference noisy).
MB is 10**6 bytes. Usage:
``.venv/bin/python bench/validation_bench.py [--total-mb 256] [--repeat 5] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import odradek.storage.validator as validator_module
from log_bench import build_batch  # the same batches as the storage benchmark
from odradek.config.topic import TopicConfig
from odradek.storage.batch import HEADER_SIZE, BatchHeader
from odradek.storage.compression import decompress_chunks
from odradek.storage.log import Log
from odradek.storage.walker import walk_batch

REPO_ROOT = Path(__file__).resolve().parent.parent
SIZES = {"16 KiB": 15, "1 MiB": 1000}  # records per batch (1 MiB: below max.message.bytes)
CODECS = {"none": 0, "lz4": 3}
POOL_BATCHES = 32  # distinct batches, cycled


@contextlib.contextmanager
def without_record_walk() -> Iterator[None]:
    """Validation as it was before records were checked: headers and CRC only."""
    real = validator_module.walk_batch
    validator_module.walk_batch = _no_walk
    try:
        yield
    finally:
        validator_module.walk_batch = real


class _NoFacts:
    null_key_record = -1


def _no_walk(*args: object, **kwargs: object) -> _NoFacts:
    return _NoFacts()


def best_of(repeat: int, run: Callable[[], float]) -> tuple[float, float]:
    """(best, median) seconds over ``repeat`` runs."""
    times = sorted(run() for _ in range(repeat))
    return times[0], times[len(times) // 2]


def timed_loop(batches: list[bytes], call: Callable[[bytes], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    for batch in batches:
        call(batch)
    return time.perf_counter() - start


def timed_appends(work_dir: Path, batches: list[bytes]) -> float:
    log = Log(work_dir / "bench-0", TopicConfig())
    try:
        return timed_loop(batches, log.append)
    finally:
        log.delete()


def measure(work_dir: Path, batches: list[bytes], repeat: int, codec: int) -> dict[str, object]:
    log = Log(work_dir / "validate-0", TopicConfig())
    headers = [BatchHeader.parse(batch) for batch in batches[:POOL_BATCHES]]
    views = [memoryview(batch) for batch in batches[:POOL_BATCHES]]
    pool = list(zip(views, headers, strict=True))
    cycles = max(1, len(batches) // POOL_BATCHES)

    def walk_only() -> float:
        gc.collect()
        start = time.perf_counter()
        for _ in range(cycles):
            for view, header in pool:
                walk_batch(view, 0, header, exact_offsets=True)
        return time.perf_counter() - start

    def decompress_only() -> float:
        gc.collect()
        start = time.perf_counter()
        for _ in range(cycles):
            for view, header in pool:
                for _piece in decompress_chunks(header.compression, view[HEADER_SIZE:]):
                    pass
        return time.perf_counter() - start

    calls = cycles * POOL_BATCHES
    try:
        figures = {
            "validate": best_of(repeat, lambda: timed_loop(batches, log.validate)),
            "walk": best_of(repeat, walk_only),
            "append": best_of(repeat, lambda: timed_appends(work_dir, batches)),
        }
        if codec:
            figures["decompress"] = best_of(repeat, decompress_only)
        with without_record_walk():
            figures["validate_headers_only"] = best_of(
                repeat, lambda: timed_loop(batches, log.validate)
            )
            figures["append_headers_only"] = best_of(
                repeat, lambda: timed_appends(work_dir, batches)
            )
    finally:
        log.delete()
    counts = {name: calls if name in ("walk", "decompress") else len(batches) for name in figures}
    return {"figures": figures, "calls": counts}


def report(label: str, batches: list[bytes], result: dict[str, object]) -> list[str]:
    average = sum(map(len, batches)) / len(batches)
    figures, calls = result["figures"], result["calls"]
    lines = [f"{label}: {len(batches)} batches of {average:,.0f} B on average"]
    for name, (best, median) in figures.items():
        per_call = best / calls[name]
        rate = average / per_call / 1e6
        lines.append(
            f"  {name:22} {per_call * 1e6:9.1f} µs per batch  {rate:8,.0f} MB/s"
            f"  (median run {median / calls[name] * 1e6:.1f} µs)"
        )
    # The cost of checking records: validate minus its headers-only run (both pure CPU, so the
    # steadier estimate), then as a share of an append that has to pay it.
    cost_s = (figures["validate"][0] - figures["validate_headers_only"][0]) / len(batches)
    append_s = figures["append_headers_only"][0] / len(batches)
    measured_s = (figures["append"][0] - figures["append_headers_only"][0]) / len(batches)
    lines.append(
        f"  record validation: {cost_s * 1e6:+.1f} µs per batch "
        f"({cost_s / (append_s + cost_s):.1%} of an append that pays it; "
        f"the two append runs differ by {measured_s * 1e6:+.1f} µs)"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout.strip()
    print(f"validation bench: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {commit}")
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    work_root = REPO_ROOT / "var"
    work_root.mkdir(exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="validation-bench-", dir=work_root))
    results = {}
    try:
        rng = random.Random(6)
        for size, records in SIZES.items():
            for codec_name, codec in CODECS.items():
                pool = [build_batch(records, codec, rng) for _ in range(POOL_BATCHES)]
                count = max(POOL_BATCHES, (args.total_mb * 1_000_000) // len(pool[0]))
                batches = [pool[i % POOL_BATCHES] for i in range(count)]
                result = measure(work_dir, batches, args.repeat, codec)
                label = f"{size} batches, {codec_name}"
                print("\n".join(report(label, batches, result)), flush=True)
                results[label] = result
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
