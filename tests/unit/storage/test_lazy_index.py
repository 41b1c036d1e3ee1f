"""Only the active segment's .index/.timeindex hold descriptors: older ones are mapped on demand
through a descriptor closed at once, before and after a restart, and still answer lookups."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.storage import index as index_module
from odradek.storage.index import OffsetIndex
from odradek.storage.log import Log

T0 = 1_700_000_000_000
BATCHES = 120


def _open_files(directory: Path) -> Counter[str]:
    """This process's descriptors on files of ``directory``, by suffix."""
    found: Counter[str] = Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{directory}/"):
            found[Path(target).suffix] += 1
    return found


def test_a_read_only_index_holds_no_descriptor_and_maps_at_its_first_lookup(tmp_path: Path):
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(path, 1000, 16 * 8, writable=True)
    for offset, position in [(1005, 50), (1010, 120), (1020, 300)]:
        index.append(offset, position)
    index.trim()  # rolled: read-only
    assert not index.is_open and _open_files(tmp_path) == Counter()
    assert index.lookup(1012) == (1010, 120)
    assert not index.is_open and _open_files(tmp_path) == Counter()  # mapped, fd closed
    index.flush()  # a fresh descriptor, closed again
    index.rename(tmp_path / "00000000000000001000.index.deleted")
    assert index.lookup(1020) == (1020, 300)  # the map survives the rename
    index.close()
    reopened = OffsetIndex(index.path, 1000, 16 * 8, writable=False)
    assert reopened.entries == 3 and not reopened.is_open
    assert reopened.lookup(1006) == (1005, 50)
    reopened.make_writable()  # becomes active again (a truncation): open again
    assert reopened.is_open
    reopened.close()


def test_a_log_with_many_segments_keeps_one_index_pair_open(tmp_path: Path, kafka_batch):
    config = TopicConfig(segment_bytes=600, index_interval_bytes=0, segment_index_bytes=4096)
    directory = tmp_path / "topic-0"
    log = Log(directory, config)
    try:
        for n in range(BATCHES):
            log.append(kafka_batch([(b"k", b"v" * 200)], timestamp_ms=T0 + n))
        segments = len(log.segments())
        assert segments >= BATCHES // 2
        log.flush()
        # Reads through every old segment's offset and time indexes.
        assert len(list(log.batches(0))) == BATCHES
        found = log.offset_for_timestamp(T0 + 7)
        assert found is not None and found.offset == 7
        opened = _open_files(directory)
        print(f"{segments} segments: open files by suffix {dict(opened)}")
        assert opened[".index"] == 1 and opened[".timeindex"] == 1
        assert opened[".log"] == segments  # the logs stay open (not lazy yet)
    finally:
        log.close()
    assert _open_files(directory) == Counter()
    reopened = Log(directory, config)
    try:
        assert reopened.offset_for_timestamp(T0 + 3).offset == 3
        opened = _open_files(directory)
        print(f"after a restart: open files by suffix {dict(opened)}")
        assert opened[".index"] == 1 and opened[".timeindex"] == 1
    finally:
        reopened.close()


def test_the_cache_of_read_only_entries_is_bounded_and_evicted_indexes_read_again(
    tmp_path: Path, monkeypatch
):
    cache = index_module._ReadOnlyCache(capacity_bytes=2 * 3 * 8)  # two indexes of 3 entries
    monkeypatch.setattr(index_module, "_READ_ONLY", cache)
    indexes = []
    for n in range(4):
        index = OffsetIndex(tmp_path / f"{n:020d}.index", 0, 16 * 8, writable=True)
        for offset, position in [(5, 50), (10, 120), (20, 300)]:
            index.append(offset, position)
        index.trim()
        indexes.append(index)
    for index in indexes:
        assert index.lookup(12) == (10, 120)
    assert cache.bytes == 2 * 3 * 8
    assert [index._cached is not None for index in indexes] == [False, False, True, True]
    assert indexes[0].lookup(6) == (5, 50)  # read again, evicting the oldest
    assert [index._cached is not None for index in indexes] == [True, False, False, True]
    for index in indexes:
        index.close()
    assert cache.bytes == 0 and _open_files(tmp_path) == Counter()
