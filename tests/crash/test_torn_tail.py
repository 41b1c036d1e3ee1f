"""Proves that recovery cuts exactly a torn, half-written batch at the tail and keeps the rest.

A writer process appends batches and exits without shutting down (an unclean exit, with the
active segment's indexes left at their preallocated size). Each case copies its directories and
tears one batch of the active segment the way a crash mid-write does: only its first K bytes
reached the file (K inside the 12-byte prefix, inside the 61-byte header, inside the records),
optionally followed by zeros up to the batch's length (the file grew, the data never came).
Batches after the torn one were never written, so they are cut too. Reopening must keep every
earlier batch byte for byte, put the log end offset at the torn batch's base offset, rebuild
the indexes, accept appends from there, and shut down cleanly so the next start does not rescan.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.config.topic import TopicConfig
from odradek.storage.batch import BatchHeader, iter_batches
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.files import CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_CHECKPOINT
from odradek.storage.manager import LogManager
from odradek.storage.segment import LogSegment

pytestmark = pytest.mark.crash

WRITER_PATH = Path(__file__).parent / "writer.py"
WRITER_TIMEOUT_S = 30.0
TOPIC = "crash"  # writer.TOPIC
APPENDS = 73  # the last checkpoint (every 10) then lies three batches before the end
CONFIG = TopicConfig(segment_bytes=32 * 1024, index_interval_bytes=256, flush_messages=1)


@dataclass(frozen=True, slots=True)
class StoredBatch:
    segment_base_offset: int
    position: int
    data: bytes
    header: BatchHeader


@dataclass(frozen=True, slots=True)
class Pristine:
    """The writer's directory, untouched, and every batch in it read straight from the files."""

    log_dir: Path
    batches: tuple[StoredBatch, ...]
    targets: dict[str, int]  # which batch each kind of case tears, by index into ``batches``


def read_segment_files(partition_dir: Path) -> list[StoredBatch]:
    batches = []
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        for position, header in iter_batches(data):  # raises unless all whole and valid
            end = position + header.size_in_bytes
            batches.append(StoredBatch(int(path.stem), position, data[position:end], header))
    return batches


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Pristine:
    log_dir = tmp_path_factory.mktemp("pristine") / "log-dir"
    finished = subprocess.run(
        [
            sys.executable, str(WRITER_PATH), "--log-dir", str(log_dir), "--seed", "7",
            "--max-appends", str(APPENDS), "--checkpoint-every", "10",
            "--flush-messages", str(CONFIG.flush_messages),
            "--segment-bytes", str(CONFIG.segment_bytes),
            "--index-interval-bytes", str(CONFIG.index_interval_bytes),
        ],
        capture_output=True,
        timeout=WRITER_TIMEOUT_S,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr.decode()
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    batches = read_segment_files(log_dir / f"{TOPIC}-0")
    assert len(batches) == APPENDS
    active_base = batches[-1].segment_base_offset
    active = [n for n, b in enumerate(batches) if b.segment_base_offset == active_base]
    compressed = [n for n in active[1:] if batches[n].header.compression != 0]
    # The seed is chosen so every kind of case exists: check it still does.
    assert active[0] > 0 and len(active) >= 3 and compressed, "pick another writer seed"
    targets = {"last": active[-1], "last-compressed": compressed[-1], "first-of-segment": active[0]}
    return Pristine(log_dir, tuple(batches), targets)


Cut = int | str  # bytes of the torn batch that reached the file, or "half" / "all-but-one"

# Below 12: inside base_offset and batch_length; 12 to 60: inside the rest of the header; from 61:
# inside the records.
CUTS_IN_LAST = [1, 4, 8, 11, 12, 13, 16, 17, 21, 22, 40, 57, 60, 61, 62, "half", "all-but-one"]
CASES = (
    [("last", cut, False) for cut in CUTS_IN_LAST]
    + [("last-compressed", cut, False) for cut in (11, 60, 61, "half", "all-but-one")]
    + [("first-of-segment", cut, False) for cut in (1, 11, 61, "half")]
    + [("last", cut, True) for cut in (0, 11, 61, "half")]
)


def resolve(cut: Cut, size: int) -> int:
    bytes_written = {"half": size // 2, "all-but-one": size - 1}.get(cut, cut)
    assert isinstance(bytes_written, int) and 0 <= bytes_written < size
    return bytes_written


def case_id(case: tuple[str, Cut, bool]) -> str:
    target, cut, zero_fill = case
    return f"{target}-{cut}{'-zero-filled' if zero_fill else ''}"


def open_manager(log_dir: Path) -> LogManager:
    manager = LogManager([log_dir], topic_config=lambda topic: CONFIG)
    manager.load()
    return manager


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_torn_tail_is_cut_exactly_and_appends_resume(pristine, tmp_path, caplog, case):
    target, cut, zero_fill = case
    log_dir = tmp_path / "log-dir"
    shutil.copytree(pristine.log_dir, log_dir)
    torn_index = pristine.targets[target]
    torn = pristine.batches[torn_index]
    size = torn.header.size_in_bytes
    written = resolve(cut, size)
    segment_path = log_dir / f"{TOPIC}-0" / f"{torn.segment_base_offset:020d}.log"
    with segment_path.open("r+b") as f:
        f.truncate(torn.position)
        f.seek(torn.position)
        f.write(torn.data[:written])
        if zero_fill:
            f.write(bytes(size - written))
    kept = pristine.batches[:torn_index]

    caplog.set_level(logging.WARNING, logger="odradek.storage.log")
    manager = open_manager(log_dir)
    try:
        log = manager.get_log(TOPIC, 0)
        assert log.log_end_offset == torn.header.base_offset
        assert list(log.batches(0)) == [(b.header.base_offset, b.data) for b in kept]
        assert segment_path.stat().st_size == torn.position
        truncations = [r.args for r in caplog.records if "truncated" in r.getMessage()]
        assert truncations == [(segment_path, size if zero_fill else written, torn.position)]

        # The rebuilt indexes find every kept batch by offset and by timestamp, and nothing of
        # the torn one.
        for batch in kept:
            found = log.read(batch.header.base_offset, max_bytes=1).records
            assert found is not None and found.read_bytes() == batch.data
            answer = log.offset_for_timestamp(batch.header.base_timestamp)
            assert answer is not None and answer.offset == batch.header.base_offset
        assert log.offset_for_timestamp(torn.header.base_timestamp) is None

        # Appending the torn batch again gives it the same offsets and the same bytes.
        info = log.append(torn.data)
        assert (info.first_offset, info.last_offset) == (
            torn.header.base_offset,
            torn.header.last_offset,
        )
        assert list(log.batches(torn.header.base_offset)) == [(torn.header.base_offset, torn.data)]
    finally:
        manager.shutdown()
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()


def test_clean_restart_does_not_rescan(pristine, tmp_path, monkeypatch):
    log_dir = tmp_path / "log-dir"
    shutil.copytree(pristine.log_dir, log_dir)
    recovered: list[Path] = []
    original = LogSegment.recover

    def counting_recover(segment: LogSegment, *args: int) -> int:
        recovered.append(segment.log_path)
        return original(segment, *args)

    monkeypatch.setattr(LogSegment, "recover", counting_recover)
    expected = [(b.header.base_offset, b.data) for b in pristine.batches]
    # An unclean start re-validates the segments from the one holding the recovery point.
    recovery_point = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()[(TOPIC, 0)]
    bases = sorted({b.segment_base_offset for b in pristine.batches})
    unflushed = bases[bisect.bisect_right(bases, recovery_point) - 1 :]
    assert recovery_point > 0 and len(unflushed) < len(bases)

    manager = open_manager(log_dir)  # the writer exited without shutting down
    try:
        assert [int(path.stem) for path in recovered] == unflushed
        assert list(manager.get_log(TOPIC, 0).batches(0)) == expected
    finally:
        manager.shutdown()
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()

    recovered.clear()
    manager = open_manager(log_dir)
    try:
        assert recovered == [], "a clean restart must trust the indexes, not rescan"
        assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()  # consumed once loaded
        log = manager.get_log(TOPIC, 0)
        assert list(log.batches(0)) == expected
        assert log.log_end_offset == pristine.batches[-1].header.next_offset
    finally:
        manager.shutdown()
