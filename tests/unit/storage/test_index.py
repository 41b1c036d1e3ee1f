"""The .index and .timeindex files keep Kafka's layout, order, bounds and crash detection."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.common.limits import INT32_MAX
from odradek.storage.index import CorruptIndexError, IndexFullError, OffsetIndex, TimeIndex

BASE = 1000
OFFSET_ENTRIES = [(1005, 50), (1010, 120), (1020, 300)]  # (offset, position)
TIME_ENTRIES = [(5000, 1003), (5007, 1010), (5100, 1010), (5200, 1042)]  # (timestamp, offset)


def _offset_index(path: Path, entries=(), *, max_entries: int = 16, writable=True) -> OffsetIndex:
    index = OffsetIndex(path, BASE, max_entries * 8, writable=writable)
    for offset, position in entries:
        index.append(offset, position)
    index.sync()  # as the segment does once per append
    return index


def _time_index(path: Path, entries=(), *, max_entries: int = 16, writable=True) -> TimeIndex:
    index = TimeIndex(path, BASE, max_entries * 12, writable=writable)
    for timestamp, offset in entries:
        index.maybe_append(timestamp, offset)
    index.sync()
    return index


def _raw_entries(index: OffsetIndex | TimeIndex) -> list[tuple[int, int]]:
    """The entries as they are in the file once synced (the segment syncs every append)."""
    index.sync()
    data = index.path.read_bytes()[: index.size_in_bytes]
    return list(struct.iter_unpack(index.entry.format, data))


# -- OffsetIndex -------------------------------------------------------------------------


def test_offset_index_file_holds_relative_offsets_big_endian(tmp_path):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    assert index.entries == 3
    assert index.path.read_bytes()[:24] == b"".join(
        struct.pack(">ii", offset - BASE, position) for offset, position in OFFSET_ENTRIES
    )
    assert index.last_entry == (1020, 300)
    index.close()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (1010, (1010, 120)),  # exact
        (1015, (1010, 120)),  # between two entries
        (1005, (1005, 50)),  # the first entry
        (1004, (BASE, 0)),  # before the first: the segment start
        (BASE, (BASE, 0)),
        (10, (BASE, 0)),  # below the base offset
        (1020, (1020, 300)),
        (10**12, (1020, 300)),  # after the last
    ],
)
def test_offset_lookup(tmp_path, target, expected):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    assert index.lookup(target) == expected
    index.close()


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (120, (1010, 120)),
        (200, (1010, 120)),
        (50, (1005, 50)),
        (49, (BASE, 0)),
        (0, (BASE, 0)),
        (300, (1020, 300)),
        (1 << 30, (1020, 300)),
    ],
)
def test_offset_lookup_by_position(tmp_path, position, expected):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    assert index.lookup_by_position(position) == expected
    index.close()


def test_empty_offset_index_answers_the_segment_start(tmp_path):
    index = _offset_index(tmp_path / "a.index")
    assert index.entries == 0
    assert index.last_entry == (BASE, 0)
    assert index.lookup(5000) == (BASE, 0)
    assert index.lookup_by_position(5000) == (BASE, 0)
    index.close()


@pytest.mark.parametrize(
    ("offset", "position"),
    [
        (1020, 400),  # same offset as the last entry
        (1019, 400),  # offset goes back
        (1030, 300),  # same position
        (1030, 299),  # position goes back
        (BASE - 1, 400),  # below the base offset
        (BASE + INT32_MAX + 1, 400),  # relative offset overflows int32
    ],
)
def test_offset_index_rejects_entries_out_of_order(tmp_path, offset, position):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    with pytest.raises(ValueError):
        index.append(offset, position)
    assert _raw_entries(index) == [(o - BASE, p) for o, p in OFFSET_ENTRIES]
    index.close()


def test_full_offset_index_raises_and_keeps_its_entries(tmp_path):
    # 3 whole entries fit in 28 bytes: the size is rounded down to whole entries.
    index = OffsetIndex(tmp_path / "a.index", BASE, 3 * 8 + 4, writable=True)
    assert index.max_entries == 3
    assert index.path.stat().st_size == 24
    for offset, position in OFFSET_ENTRIES:
        assert not index.is_full
        index.append(offset, position)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(1030, 400)
    assert index.entries == 3
    assert index.lookup(10**6) == (1020, 300)
    index.close()


def test_trim_shrinks_to_entries_and_make_writable_regrows(tmp_path):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES, max_entries=16)
    assert index.path.stat().st_size == 16 * 8  # preallocated while active
    index.trim()
    assert not index.writable
    assert index.path.stat().st_size == 3 * 8
    assert index.lookup(1015) == (1010, 120)
    assert index.lookup_by_position(299) == (1010, 120)
    assert index.last_entry == (1020, 300)

    index.make_writable()
    assert index.path.stat().st_size == 16 * 8
    index.append(1030, 400)
    assert index.lookup(1031) == (1030, 400)
    index.trim()
    # Appending to a trimmed index grows it back first.
    index.append(1040, 500)
    assert index.writable
    assert index.path.stat().st_size == 16 * 8
    assert _raw_entries(index)[-1] == (40, 500)
    index.close()
    assert index.path.stat().st_size == 5 * 8


@pytest.mark.parametrize("writable", [False, True])
def test_reopen_of_a_trimmed_file_restores_its_entries(tmp_path, writable):
    _offset_index(tmp_path / "a.index", OFFSET_ENTRIES).close()
    assert (tmp_path / "a.index").stat().st_size == 24
    index = _offset_index(tmp_path / "a.index", writable=writable)
    assert index.entries == 3
    assert index.path.stat().st_size == (16 * 8 if writable else 24)
    for offset, position in OFFSET_ENTRIES:
        assert index.lookup(offset) == (offset, position)
    index.sanity_check(log_size=301)
    index.close()


@pytest.mark.parametrize(
    ("offset", "kept"),
    [(1020, 2), (1011, 2), (1010, 1), (1006, 1), (1005, 0), (BASE, 0), (2000, 3)],
)
def test_offset_index_truncate_to_removes_offsets_at_or_above(tmp_path, offset, kept):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    index.truncate_to(offset)
    assert index.entries == kept
    assert index.last_entry == (OFFSET_ENTRIES[kept - 1] if kept else (BASE, 0))
    # The forgotten entries are zeroed in the file, so a crash cannot resurrect them.
    assert index.path.read_bytes()[kept * 8 : 3 * 8] == bytes((3 - kept) * 8)
    index.append(1030, 400)
    assert index.lookup(1030) == (1030, 400)
    index.close()


def test_offset_index_truncate_to_on_a_trimmed_file(tmp_path):
    # How a segment truncates a rolled segment's index: truncate, then make it writable again.
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    index.trim()
    index.truncate_to(1010)
    assert index.entries == 1
    assert index.lookup(1020) == (1005, 50)
    index.make_writable()
    index.close()
    assert index.path.stat().st_size == 8
    reopened = _offset_index(tmp_path / "a.index", writable=False)
    assert _raw_entries(reopened) == [(5, 50)]
    reopened.close()


def test_offset_sanity_check_catches_a_zero_filled_tail(tmp_path):
    # What a crash leaves: the file at its preallocated size, zeros after the real entries.
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">iiii", 5, 50, 10, 120) + bytes(6 * 8))
    index = _offset_index(path, max_entries=8)
    assert index.entries == 2  # the written prefix, found without reading the whole file
    assert index.left_untrimmed
    with pytest.raises(CorruptIndexError, match="preallocated"):
        index.sanity_check(log_size=1000)  # its entries look sane: refused all the same
    index.reset()
    assert index.entries == 0 and not index.left_untrimmed
    assert path.read_bytes() == bytes(8 * 8)  # what the crash left is gone
    index.sanity_check(log_size=0)
    index.close()


@pytest.mark.parametrize("written", [0, 1, 2, 3, 7, 8])
def test_the_written_prefix_of_a_preallocated_file_is_found(tmp_path, written):
    path = tmp_path / "a.index"
    entries = [(n + 1, 10 * (n + 1)) for n in range(written)]
    path.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries) + bytes((8 - written) * 8))
    index = _offset_index(path, max_entries=8)
    assert index.entries == written
    assert index.left_untrimmed == (written < 8)
    index.close()


def test_offset_sanity_check(tmp_path):
    path = tmp_path / "a.index"
    index = _offset_index(path, OFFSET_ENTRIES)
    index.sanity_check(log_size=301)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=300)  # the last entry points past the log
    index.close()

    path.write_bytes(struct.pack(">ii", 0, 0))  # a single all-zero entry
    index = _offset_index(path, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=1000)
    index.close()

    path.write_bytes(struct.pack(">iiii", 10, 50, 5, 120))  # offsets go back
    index = _offset_index(path, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=1000)
    index.close()


def test_delete_and_rename(tmp_path):
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES)
    index.rename(tmp_path / "a.index.deleted")
    assert not (tmp_path / "a.index").exists()
    assert index.lookup(1010) == (1010, 120)
    index.delete()
    assert not (tmp_path / "a.index.deleted").exists()


# -- TimeIndex ---------------------------------------------------------------------------


def test_time_index_file_layout(tmp_path):
    index = _time_index(tmp_path / "a.timeindex", TIME_ENTRIES)
    assert index.entries == 4
    assert index.path.read_bytes()[:48] == b"".join(
        struct.pack(">qi", timestamp, offset - BASE) for timestamp, offset in TIME_ENTRIES
    )
    assert index.last_entry == (5200, 1042)
    index.close()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (5007, (5007, 1010)),  # exact
        (5050, (5007, 1010)),  # between
        (5000, (5000, 1003)),
        (4999, (-1, BASE)),  # before the first
        (-5, (-1, BASE)),
        (5200, (5200, 1042)),
        (1 << 50, (5200, 1042)),  # after the last
    ],
)
def test_time_lookup(tmp_path, target, expected):
    index = _time_index(tmp_path / "a.timeindex", TIME_ENTRIES)
    assert index.lookup(target) == expected
    index.close()


def test_time_index_skips_timestamps_that_are_not_newer(tmp_path):
    index = _time_index(tmp_path / "a.timeindex", TIME_ENTRIES)
    index.maybe_append(5200, 1050)
    index.maybe_append(4000, 1050)
    index.maybe_append(-1, 1050)
    assert index.entries == 4
    empty = _time_index(tmp_path / "b.timeindex")
    empty.maybe_append(-1, BASE)  # no timestamp: nothing to record
    assert empty.entries == 0
    index.close()
    empty.close()


@pytest.mark.parametrize("offset", [1041, BASE - 1])
def test_time_index_rejects_offsets_going_back(tmp_path, offset):
    index = _time_index(tmp_path / "a.timeindex", TIME_ENTRIES)
    with pytest.raises(ValueError):
        index.maybe_append(6000, offset)
    assert index.entries == 4
    index.close()


def test_time_index_rejects_relative_offset_overflow(tmp_path):
    index = _time_index(tmp_path / "a.timeindex")
    with pytest.raises(ValueError):
        index.maybe_append(6000, BASE + INT32_MAX + 1)
    index.close()


def test_full_time_index_raises(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", BASE, 2 * 12 + 11, writable=True)
    assert index.max_entries == 2
    index.maybe_append(1, BASE)
    index.maybe_append(2, BASE + 1)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.maybe_append(3, BASE + 2)
    index.close()
    assert (tmp_path / "a.timeindex").stat().st_size == 24


def test_time_index_trim_reopen_and_regrow(tmp_path):
    index = _time_index(tmp_path / "a.timeindex", TIME_ENTRIES, max_entries=10)
    assert index.path.stat().st_size == 120
    index.trim()
    assert index.path.stat().st_size == 48
    assert index.lookup(5150) == (5100, 1010)
    index.close()
    reopened = _time_index(tmp_path / "a.timeindex", writable=False)
    assert reopened.entries == 4
    assert reopened.lookup(5150) == (5100, 1010)
    reopened.sanity_check()
    reopened.make_writable()
    assert reopened.path.stat().st_size == 16 * 12
    reopened.maybe_append(5300, 1050)
    assert reopened.last_entry == (5300, 1050)
    reopened.close()
    assert reopened.path.stat().st_size == 5 * 12


@pytest.mark.parametrize(("offset", "kept"), [(1042, 3), (1011, 3), (1010, 1), (1003, 0)])
def test_time_index_truncate_to(tmp_path, offset, kept):
    index = _time_index(tmp_path / "a.timeindex", TIME_ENTRIES)
    index.truncate_to(offset)
    assert index.entries == kept
    assert _raw_entries(index) == [(t, o - BASE) for t, o in TIME_ENTRIES[:kept]]
    assert index.path.read_bytes()[kept * 12 : 48] == bytes((4 - kept) * 12)
    index.close()


def test_time_sanity_check_catches_a_zero_filled_tail(tmp_path):
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 5000, 3, 5007, 10) + bytes(3 * 12))
    index = _time_index(path, max_entries=5)
    assert index.entries == 2
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()

    path.write_bytes(struct.pack(">qiqi", 5000, 3, 5007, 10))
    index = _time_index(path, writable=False)
    index.sanity_check()
    index.close()

    path.write_bytes(struct.pack(">qiqi", 5000, 10, 5007, 3))  # offsets go back
    index = _time_index(path, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()


# -- properties --------------------------------------------------------------------------

_steps = st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 1000)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps=_steps, queries=st.lists(st.integers(-10, 45_000), max_size=30), trim=st.booleans())
def test_offset_lookups_match_brute_force(tmp_path_factory, steps, queries, trim):
    entries, offset, position = [], BASE, 0
    for offset_step, position_step in steps:
        offset += offset_step
        position += position_step
        entries.append((offset, position))
    index = _offset_index(tmp_path_factory.mktemp("idx") / "a.index", entries, max_entries=64)
    if trim:
        index.trim()
    near = [v + d for entry in entries for v in entry for d in (-1, 0, 1)]
    for query in queries + near:
        by_offset = [e for e in entries if e[0] <= query]
        assert index.lookup(query) == (by_offset[-1] if by_offset else (BASE, 0))
        by_position = [e for e in entries if e[1] <= query]
        assert index.lookup_by_position(query) == (by_position[-1] if by_position else (BASE, 0))
    index.close()


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 1000)), max_size=40),
    queries=st.lists(st.integers(-10, 45_000), max_size=30),
    trim=st.booleans(),
)
def test_time_lookups_match_brute_force(tmp_path_factory, steps, queries, trim):
    entries, timestamp, offset = [], -1, BASE
    for timestamp_step, offset_step in steps:  # offsets may repeat, timestamps may not
        timestamp += timestamp_step
        offset += offset_step
        entries.append((timestamp, offset))
    index = _time_index(tmp_path_factory.mktemp("idx") / "a.timeindex", entries, max_entries=64)
    if trim:
        index.trim()
    for query in queries + [t + d for t, _ in entries for d in (-1, 0, 1)]:
        expected = [e for e in entries if e[0] <= query]
        assert index.lookup(query) == (expected[-1] if expected else (-1, BASE))
    index.close()


def test_entries_reach_the_file_on_sync_not_before(tmp_path):
    """One pwrite per append: new entries are written together when the segment syncs."""
    index = _offset_index(tmp_path / "a.index", OFFSET_ENTRIES[:1])
    index.append(*OFFSET_ENTRIES[1])
    assert index.path.read_bytes()[8:16] == bytes(8)  # not yet in the file
    assert index.lookup(1010) == (1010, 120)  # but already answering lookups
    index.sync()
    assert index.path.read_bytes()[8:16] == struct.pack(">ii", 10, 120)
    index.close()
