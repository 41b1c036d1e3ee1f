"""No .index/.timeindex holds a descriptor of its own: active ones write through a bounded shared
pool, other changes open and close the file, older ones read their entries on demand, before and
after a restart, and still answer lookups."""

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


def test_an_index_holds_no_descriptor_of_its_own_written_rolled_or_read(tmp_path: Path):
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(path, 1000, 16 * 8, writable=True)
    assert _open_files(tmp_path) == Counter() and path.stat().st_size == 16 * 8  # preallocated
    for offset, position in [(1005, 50), (1010, 120)]:
        index.append(offset, position)
    index.sync()  # one pwrite through the pool's descriptor
    assert _open_files(tmp_path) == Counter({".index": 1})
    assert path.read_bytes()[:16] == bytes.fromhex("00000005 00000032 0000000a 00000078")
    index.append(1020, 300)
    index.flush()  # a fresh descriptor for the fsync, closed again
    index.trim()  # rolled: read-only, cut to its entries, its pooled descriptor closed
    assert _open_files(tmp_path) == Counter() and path.stat().st_size == 3 * 8
    assert index.lookup(1012) == (1010, 120)
    assert _open_files(tmp_path) == Counter()  # read through a descriptor closed at once
    index.flush()
    index.rename(tmp_path / "00000000000000001000.index.deleted")
    assert index.lookup(1020) == (1020, 300)  # the entries read survive the rename
    index.close()
    reopened = OffsetIndex(index.path, 1000, 16 * 8, writable=False)
    assert reopened.entries == 3 and reopened.lookup(1006) == (1005, 50)
    reopened.make_writable()  # active again (a truncation): preallocated, still no descriptor
    reopened.truncate_to(1010)  # zeroes the dropped entry through the path it was renamed to
    assert _open_files(tmp_path) == Counter()
    assert index.path.read_bytes()[8:16] == bytes(8)
    reopened.close()
    assert OffsetIndex(index.path, 1000, 16 * 8, writable=False).entries == 1


def test_a_log_with_many_segments_keeps_no_index_open(tmp_path: Path, kafka_batch):
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
        assert opened[".index"] == 1 and opened[".timeindex"] == 1  # the pool's, active only
        assert opened[".log"] == segments  # the logs stay open (not lazy yet)
    finally:
        log.close()
    assert _open_files(directory) == Counter()
    reopened = Log(directory, config)
    try:
        assert reopened.offset_for_timestamp(T0 + 3).offset == 3
        opened = _open_files(directory)
        print(f"after a restart: open files by suffix {dict(opened)}")
        assert opened[".index"] == 0 and opened[".timeindex"] == 0  # nothing written yet
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


def test_the_pool_of_write_descriptors_is_bounded_and_never_closes_one_in_use(
    tmp_path: Path, monkeypatch
):
    pool = index_module._WriteDescriptors(capacity=2)
    monkeypatch.setattr(index_module, "_WRITE_DESCRIPTORS", pool)
    indexes = [
        OffsetIndex(tmp_path / f"{n:020d}.index", 0, 16 * 8, writable=True) for n in range(4)
    ]
    for index in indexes:
        index.append(5, 50)
        index.sync()
    assert len(pool) == 2 and _open_files(tmp_path) == Counter({".index": 2})
    for index in indexes:  # the evicted ones wrote before giving up their descriptor
        assert index.path.read_bytes()[:8] == bytes.fromhex("00000005 00000032")
    pinned = [pool.acquire(indexes[0]), pool.acquire(indexes[1])]  # in use on other threads
    indexes[2].append(10, 120)
    indexes[2].sync()  # the pool is full of pinned ones: this one closes after its write
    assert len(pool) == 2 and indexes[2] not in pool._open
    assert indexes[2].path.read_bytes()[8:16] == bytes.fromhex("0000000a 00000078")
    assert all(os.fstat(fd) for fd in pinned)  # never closed under their users
    for index, fd in zip(indexes, pinned, strict=False):
        pool.release(index, fd)
    assert len(pool) == 2
    indexes[1].delete()  # a deleted index gives its descriptor back
    indexes[0].close()  # so does a closed one
    assert len(pool) == 0 and _open_files(tmp_path) == Counter()
    for index in indexes[2:]:
        index.close()
