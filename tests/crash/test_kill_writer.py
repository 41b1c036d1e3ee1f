"""Proves that a writer killed with SIGKILL mid-append recovers every acknowledged batch, whole.

Each run starts ``writer.py`` as a real process, reads its ``ACK`` lines until a seeded count,
kills it with SIGKILL while it keeps appending, and reopens its log directories with a fresh
``LogManager``. Because only the process dies (not the OS), page-cache data survives a kill just
as fsynced data does: every acknowledged batch must come back with its offsets and records, and
at most one more batch (written, not yet acknowledged) may follow, whole.
"""

from __future__ import annotations

import bisect
import importlib.util
import logging
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from kafka.record.default_records import DefaultRecordBatch

from odradek.common.topics import parse_log_directory_name
from odradek.errors import RecordTooLargeError
from odradek.storage.batch import BatchHeader, validate_batch
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.files import CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_CHECKPOINT
from odradek.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from odradek.storage.manager import LogManager
from odradek.storage.records import decode_records
from odradek.storage.segment import LogSegment

pytestmark = pytest.mark.crash

WRITER_PATH = Path(__file__).parent / "writer.py"
ACKS_WAIT_S_MAX = 30.0  # to read the ACKs a run waits for
EXIT_WAIT_S_MAX = 10.0  # for a killed process to be reaped and its pipe to reach EOF
KILL_DELAY_S_MAX = 0.004  # after the chosen ACK, so the kill lands anywhere in an append cycle
SAMPLES_PER_PARTITION = 60  # random reads and timestamp lookups after recovery
SEGMENT_BYTES = 32 * 1024
INDEX_INTERVAL_BYTES = 256


def load_writer() -> ModuleType:
    """``writer.py`` as a module (tests run in importlib mode, with no package here)."""
    spec = importlib.util.spec_from_file_location("odradek_crash_writer", WRITER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


writer = load_writer()


@dataclass(frozen=True, slots=True)
class Run:
    """One kill: the writer's settings and the seed that picks when to kill it."""

    seed: int
    partitions: int = 1
    log_dirs: int = 1
    flush_messages: int | None = None  # None: Kafka's default, page cache only
    checkpoint_every: int = 25
    segment_index_bytes: int = 10 * 1024 * 1024
    pause_mid_write_ms: float = 2.0  # see writer.py: widens the window a kill can tear
    acks_min: int = 100
    acks_max: int = 600
    segment_bytes: int = SEGMENT_BYTES
    large_value_bytes: int = 0  # see writer.py: batches of 1-3 records this large

    @property
    def id(self) -> str:
        flush = "fsync-each" if self.flush_messages == 1 else "page-cache"
        pause = "-paused-writes" if self.pause_mid_write_ms else ""
        large = f"-values-{self.large_value_bytes}B" if self.large_value_bytes else ""
        return f"seed{self.seed}-{self.partitions}p-{self.log_dirs}dir-{flush}{pause}{large}"


RUNS = [
    Run(seed=11, flush_messages=1),
    # No checkpoint at all: recovery re-validates every segment.
    Run(seed=22, checkpoint_every=0, pause_mid_write_ms=0),
    # Tiny index files: segments also roll because their indexes are full.
    Run(seed=33, partitions=3, log_dirs=2, flush_messages=1, checkpoint_every=10,
        segment_index_bytes=240),
    Run(seed=44, partitions=4, log_dirs=2, checkpoint_every=40, segment_index_bytes=240),
    # A checkpoint after every append: kills also land while checkpoints are written (each
    # fsyncs three files and the directory: slow, so fewer ACKs).
    Run(seed=55, partitions=2, flush_messages=1, checkpoint_every=1, pause_mid_write_ms=0,
        acks_min=40, acks_max=150),
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Ack:
    partition: int
    first_offset: int
    last_offset: int
    digest: str


def parse_ack(line: str) -> Ack:
    tag, partition, first_offset, last_offset, digest = line.split()
    assert tag == "ACK", line
    return Ack(int(partition), int(first_offset), int(last_offset), digest)


def writer_command(log_dirs: list[Path], run: Run) -> list[str]:
    command = [sys.executable, str(WRITER_PATH), "--seed", str(run.seed)]
    for log_dir in log_dirs:
        command += ["--log-dir", str(log_dir)]
    command += [
        "--partitions", str(run.partitions),
        "--segment-bytes", str(run.segment_bytes),
        "--large-value-bytes", str(run.large_value_bytes),
        "--index-interval-bytes", str(INDEX_INTERVAL_BYTES),
        "--segment-index-bytes", str(run.segment_index_bytes),
        "--checkpoint-every", str(run.checkpoint_every),
        "--max-seconds", str(ACKS_WAIT_S_MAX),
        "--pause-mid-write-ms", str(run.pause_mid_write_ms),
    ]  # fmt: skip
    if run.flush_messages is not None:
        command += ["--flush-messages", str(run.flush_messages)]
    return command


def open_manager(
    log_dirs: list[Path], run: Run, *, max_message_bytes: int | None = None
) -> LogManager:
    """A fresh ``LogManager`` over the writer's directories, with its configuration, loaded."""
    config = writer.topic_config(
        segment_bytes=run.segment_bytes,
        index_interval_bytes=INDEX_INTERVAL_BYTES,
        segment_index_bytes=run.segment_index_bytes,
        flush_messages=run.flush_messages,
        max_message_bytes=max_message_bytes,
    )
    manager = LogManager(log_dirs, topic_config=lambda topic: config)
    manager.load()
    return manager


def _pump_lines(stream, lines: queue.Queue[str | None]) -> None:
    for raw in iter(stream.readline, b""):
        lines.put(raw.decode())
    lines.put(None)  # EOF


def kill_after_acks(
    proc: subprocess.Popen[bytes], kill_after: int, kill_delay_s: float
) -> list[str]:
    """Read stdout until ``kill_after`` ACKs, wait ``kill_delay_s``, SIGKILL the writer.

    Returns every whole line the writer wrote: lines already in the pipe when the kill lands are
    acknowledged too, so the pipe is read to its end once the process is gone. A partial last
    line (none expected: each ACK is one small write) is dropped.
    """
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump_lines, args=(proc.stdout, lines), daemon=True)
    pump.start()
    seen: list[str] = []
    acks = 0
    deadline = time.monotonic() + ACKS_WAIT_S_MAX
    while acks < kill_after:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            pytest.fail(f"writer sent {acks} ACKs in {ACKS_WAIT_S_MAX} s, {kill_after} awaited")
        if line is None:
            pytest.fail(f"writer exited after {acks} ACKs, before the kill; seen: {seen[-3:]}")
        seen.append(line)
        acks += line.startswith("ACK ")
    time.sleep(kill_delay_s)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=EXIT_WAIT_S_MAX)
    pump.join(timeout=EXIT_WAIT_S_MAX)
    assert not pump.is_alive(), "writer's stdout did not reach EOF after the kill"
    while (line := lines.get_nowait()) is not None:
        seen.append(line)
    return [line for line in seen if line.endswith("\n")]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the writer by its PID if it still runs, and reap it (bounded)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=EXIT_WAIT_S_MAX)
    if proc.stdout is not None:
        proc.stdout.close()


# -- invariant checks ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredRecord:
    offset: int
    timestamp: int
    key: bytes
    value: bytes


def read_whole_log(log: Log) -> list[tuple[int, bytes, list[StoredRecord]]]:
    """Every batch as (base offset, bytes, records); each must be valid and follow the last.

    Records are decoded with kafka-python (an implementation we did not write) and compared with
    odradek's own decoder.
    """
    batches = []
    next_offset = log.log_start_offset
    assert next_offset == 0
    for base_offset, data in log.batches(0):
        header = validate_batch(data, 0, len(data))  # whole, CRC intact, magic 2
        foreign = DefaultRecordBatch(data)
        assert foreign.validate_crc()
        assert base_offset == header.base_offset == foreign.base_offset == next_offset
        records = [StoredRecord(r.offset, r.timestamp, r.key, r.value) for r in foreign]
        assert [r.offset for r in records] == list(range(base_offset, header.next_offset))
        own = [StoredRecord(r.offset, r.timestamp, r.key, r.value) for r in decode_records(data)]
        assert own == records
        batches.append((base_offset, data, records))
        next_offset = header.next_offset
    assert next_offset == log.log_end_offset, "offsets must run contiguously up to the LEO"
    return batches


def check_segment_files(log: Log, index_interval_bytes: int) -> None:
    """Each ``.log`` file is exactly its whole batches; the offset index is as appends build it."""
    for segment in log.segments():
        assert os.path.getsize(segment.log_path) == segment.size, segment
        end = 0
        expected_entries = []
        bytes_since_last_entry = 0
        for position, header in segment.batches_from(0):
            assert position == end
            if bytes_since_last_entry > index_interval_bytes:
                expected_entries.append((header.last_offset, position))
                bytes_since_last_entry = 0
            bytes_since_last_entry += header.size_in_bytes
            end = position + header.size_in_bytes
        assert end == segment.size, f"{segment}: trailing bytes after the last batch"
        # A trimmed index (segment rolled before the crash) or a rebuilt one: same entries.
        assert segment.offset_index.entries == len(expected_entries), segment
        for offset, position in expected_entries:
            assert segment.offset_index.lookup(offset) == (offset, position)


def check_acknowledged(
    partition: int, batches: list[tuple[int, bytes, list[StoredRecord]]], acks: list[Ack]
) -> int:
    """Acknowledged batches are the log's prefix, as acknowledged; returns how many follow."""
    assert len(batches) >= len(acks), f"partition {partition} lost acknowledged batches"
    for seq, (base_offset, _, records) in enumerate(batches):
        assert {writer.parse_key(r.key)[:2] for r in records} == {(partition, seq)}
        assert [writer.parse_key(r.key)[2] for r in records] == list(range(len(records)))
        if seq < len(acks):
            ack = acks[seq]
            assert (base_offset, records[-1].offset) == (ack.first_offset, ack.last_offset)
            digest = writer.batch_digest((r.timestamp, r.key, r.value) for r in records)
            assert digest == ack.digest, f"partition {partition} batch {seq}: contents differ"
    return len(batches) - len(acks)


def check_lookups(
    log: Log, batches: list[tuple[int, bytes, list[StoredRecord]]], rng: random.Random
) -> None:
    """Reads from random offsets and timestamp lookups answer from the rebuilt indexes."""
    leo = log.log_end_offset
    if leo == 0:
        return
    by_base = {base_offset: data for base_offset, data, _ in batches}
    records = [r for _, _, rs in batches for r in rs]
    timestamps = [r.timestamp for r in records]
    assert timestamps == sorted(set(timestamps)), "the writer's timestamps strictly increase"
    for _ in range(SAMPLES_PER_PARTITION):
        offset = rng.randrange(leo)
        found = log.read(offset, max_bytes=1).records  # min_one_message: exactly one batch
        assert found is not None, offset
        data = found.read_bytes()
        header = BatchHeader.parse(data)
        assert header.base_offset <= offset <= header.last_offset
        assert data == by_base[header.base_offset]

        timestamp = rng.randint(timestamps[0] - 3, timestamps[-1] + 3)
        n = bisect.bisect_left(timestamps, timestamp)
        answer = log.offset_for_timestamp(timestamp)
        if n == len(records):
            assert answer is None, timestamp
        else:
            assert answer is not None, timestamp
            assert (answer.timestamp, answer.offset) == (records[n].timestamp, records[n].offset)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == leo
    latest = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert (latest.timestamp, latest.offset) == (records[-1].timestamp, records[-1].offset)


def check_recovered(manager: LogManager, run: Run, acks: list[Ack], rng: random.Random) -> int:
    """Every invariant of a reopened log, per partition; returns unacknowledged batches kept."""
    unacknowledged = 0
    for partition in range(run.partitions):
        log = manager.get_log(writer.TOPIC, partition)
        partition_acks = [a for a in acks if a.partition == partition]
        batches = read_whole_log(log)
        check_segment_files(log, INDEX_INTERVAL_BYTES)
        unacknowledged += check_acknowledged(partition, batches, partition_acks)
        if partition_acks:
            assert log.log_end_offset >= partition_acks[-1].last_offset + 1
        check_lookups(log, batches, rng)
    # One append at a time: at most one batch was written and not acknowledged.
    assert unacknowledged <= 1
    return unacknowledged


def append_after_recovery(manager: LogManager, run: Run) -> None:
    """One append per partition lands at the recovered LEO and is found by its timestamp."""
    timestamp_ms = int(time.time() * 1000) + 3_600_000  # after every record written so far
    for partition in range(run.partitions):
        log = manager.get_log(writer.TOPIC, partition)
        leo = log.log_end_offset
        info = log.append(writer.build_batch([(timestamp_ms, b"after", b"restart")], codec=0))
        assert (info.first_offset, info.last_offset) == (leo, leo)
        assert log.offset_for_timestamp(timestamp_ms).offset == leo


def spawn_and_kill(
    tmp_path: Path, command: list[str], kill_after: int, kill_delay_s: float
) -> list[Ack]:
    """Run the writer, SIGKILL it after ``kill_after`` ACKs; every ACK it managed to send."""
    with (tmp_path / "writer.stderr").open("ab") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        try:
            lines = kill_after_acks(proc, kill_after, kill_delay_s)
        finally:
            stop(proc)
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "writer.stderr").read_text()
    acks = [parse_ack(line) for line in lines]
    assert len(acks) >= kill_after
    return acks


def segments_to_recover(log_dirs: list[Path]) -> set[Path]:
    """The ``.log`` files an unclean start must re-validate: from the recovery point's segment.

    Computed from the files and the checkpoint before loading. Only these: a segment before the
    recovery point was fsynced and its indexes trimmed when it rolled, so it is trusted.
    """
    expected: set[Path] = set()
    for log_dir in log_dirs:
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        for partition_dir in log_dir.iterdir():
            tp = parse_log_directory_name(partition_dir.name)
            if tp is None or not partition_dir.is_dir():
                continue
            segment_paths = sorted(partition_dir.glob("*.log"))
            bases = [int(path.stem) for path in segment_paths]
            first = max(bisect.bisect_right(bases, recovery_points.get(tp, 0)) - 1, 0)
            expected.update(segment_paths[first:])
    return expected


@pytest.fixture
def recover_calls(monkeypatch) -> list[Path]:
    """The ``.log`` files ``LogSegment.recover`` re-validated, in call order."""
    calls: list[Path] = []
    original = LogSegment.recover

    def counting_recover(segment: LogSegment, *args: int) -> int:
        calls.append(segment.log_path)
        return original(segment, *args)

    monkeypatch.setattr(LogSegment, "recover", counting_recover)
    return calls


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", RUNS, ids=lambda run: run.id)
def test_sigkill_mid_append_keeps_every_acknowledged_batch(tmp_path, caplog, recover_calls, run):
    rng = random.Random(run.seed)
    log_dirs = [tmp_path / f"log-dir-{n}" for n in range(run.log_dirs)]
    acks = spawn_and_kill(
        tmp_path,
        writer_command(log_dirs, run),
        kill_after=rng.randint(run.acks_min, run.acks_max),
        kill_delay_s=rng.uniform(0, KILL_DELAY_S_MAX),
    )
    for log_dir in log_dirs:
        assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()

    expected_recoveries = segments_to_recover(log_dirs)
    caplog.set_level(logging.WARNING, logger="odradek.storage")
    manager = open_manager(log_dirs, run)
    try:
        assert sorted(recover_calls) == sorted(expected_recoveries)
        unacknowledged = check_recovered(manager, run, acks, rng)
        append_after_recovery(manager, run)
    finally:
        manager.shutdown()
    for log_dir in log_dirs:
        assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()

    truncations = [r for r in caplog.records if "truncated" in r.getMessage()]
    print(
        f"{run.id}: killed after {len(acks)} ACKs; recovered {len(recover_calls)} of "
        f"{sum(len(list(d.glob('*/*.log'))) for d in log_dirs)} segments; "
        f"{unacknowledged} whole unacknowledged batch kept; {len(truncations)} torn tail(s) "
        f"truncated"
    )


@pytest.mark.timeout(60)
def test_clean_shutdown_skips_recovery_and_sigkill_does_not(tmp_path, recover_calls):
    run = Run(seed=66, partitions=2, log_dirs=2, pause_mid_write_ms=0)
    rng = random.Random(run.seed)
    log_dirs = [tmp_path / f"log-dir-{n}" for n in range(run.log_dirs)]
    command = writer_command(log_dirs, run)
    finished = subprocess.run(
        [*command, "--max-appends", "150", "--clean-shutdown"],
        capture_output=True,
        timeout=ACKS_WAIT_S_MAX,
    )
    assert finished.returncode == 0, finished.stderr.decode()
    lines = finished.stdout.decode().splitlines()
    assert lines[-1] == "DONE"
    acks = [parse_ack(line) for line in lines[:-1]]
    for log_dir in log_dirs:
        assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()

    for restart in ("after the writer's shutdown", "after an in-process shutdown"):
        manager = open_manager(log_dirs, run)
        try:
            assert recover_calls == [], f"a clean restart rescanned segments ({restart})"
            for log_dir in log_dirs:  # consumed: a crash from now on must recover
                assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
            assert check_recovered(manager, run, acks, rng) == 0
        finally:
            manager.shutdown()
        for log_dir in log_dirs:
            assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()

    # The same directories, resumed by a writer that is then killed: now recovery runs.
    acks += spawn_and_kill(tmp_path, command, kill_after=100, kill_delay_s=0)
    for log_dir in log_dirs:
        assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    expected_recoveries = segments_to_recover(log_dirs)
    manager = open_manager(log_dirs, run)
    try:
        assert sorted(recover_calls) == sorted(expected_recoveries)
        check_recovered(manager, run, acks, rng)
        append_after_recovery(manager, run)
    finally:
        manager.shutdown()


@pytest.mark.timeout(60)
def test_a_lowered_max_message_bytes_does_not_make_recovery_cut_acknowledged_batches(
    tmp_path, caplog, recover_calls
):
    """An operator lowers ``max.message.bytes`` and the broker restarts after a crash: the
    batches it acknowledged before, larger than the new limit, are whole and valid, so recovery
    keeps every one (and still cuts a torn tail). The limit applies to new appends only."""
    run = Run(
        seed=77,
        partitions=2,
        checkpoint_every=0,  # every segment is re-validated
        segment_bytes=4 * 1024 * 1024,
        large_value_bytes=120_000,
        acks_min=8,
        acks_max=20,
    )
    lowered_max_message_bytes = 16 * 1024  # below every batch the writer appends
    rng = random.Random(run.seed)
    log_dirs = [tmp_path / "log-dir-0"]
    acks = spawn_and_kill(
        tmp_path,
        writer_command(log_dirs, run),
        kill_after=rng.randint(run.acks_min, run.acks_max),
        kill_delay_s=rng.uniform(0, KILL_DELAY_S_MAX),
    )

    caplog.set_level(logging.WARNING, logger="odradek.storage")
    manager = open_manager(log_dirs, run, max_message_bytes=lowered_max_message_bytes)
    try:
        assert sorted(recover_calls) == sorted(segments_to_recover(log_dirs))
        stored = [
            BatchHeader.parse(data).size_in_bytes
            for p in range(run.partitions)
            for _, data in manager.get_log(writer.TOPIC, p).batches()
        ]
        assert len(stored) >= len(acks) and min(stored) > lowered_max_message_bytes
        check_recovered(manager, run, acks, rng)
        log = manager.get_log(writer.TOPIC, 0)
        too_large = writer.build_batch([(0, b"k", os.urandom(lowered_max_message_bytes))], 0)
        with pytest.raises(RecordTooLargeError):
            log.append(too_large)
        append_after_recovery(manager, run)
    finally:
        manager.shutdown()
    print(
        f"{run.id}: killed after {len(acks)} ACKs of batches up to {max(stored)} B; all kept "
        f"with max.message.bytes={lowered_max_message_bytes}"
    )
