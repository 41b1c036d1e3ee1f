"""The leader-epoch cache answers and changes as Kafka's LeaderEpochFileCache, in Kafka's file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.storage.checkpoint import CorruptCheckpointError
from odradek.storage.file_ops import OsFileOps
from odradek.storage.files import LEADER_EPOCH_CHECKPOINT
from odradek.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
    format_entries,
    parse_entries,
)
from support.faulty_disk import FaultyFileOps

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(entries=[EpochEntry(e, o) for e, o in pairs])


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries()]


# -- assign --------------------------------------------------------------------------------------


def test_assign_appends_newer_epochs_and_ignores_older_or_equal_ones():
    cache = LeaderEpochFileCache()
    assert cache.latest_epoch() is None and cache.latest_entry() is None
    assert cache.assign(2, 0)
    assert cache.assign(3, 10)
    assert not cache.assign(3, 5)  # an equal epoch never moves back
    assert not cache.assign(1, 20)  # nor an older one
    assert not cache.assign(3, 10)
    assert pairs(cache) == [(2, 0), (3, 10)]
    assert cache.latest_epoch() == 3 and cache.latest_entry() == EpochEntry(3, 10)


def test_a_newer_epoch_starting_below_the_latest_entries_replaces_them():
    cache = cache_of((1, 0), (2, 10), (3, 20))
    assert cache.assign(4, 10)  # as Kafka: entries starting at or above 10 go first
    assert pairs(cache) == [(1, 0), (4, 10)]


@pytest.mark.parametrize("epoch, offset", [(-1, 0), (0, -1), (2**31, 0)])
def test_assign_refuses_an_entry_no_batch_could_carry(epoch, offset):
    with pytest.raises(ValueError):
        LeaderEpochFileCache().assign(epoch, offset)


def test_entries_must_strictly_increase():
    with pytest.raises(ValueError):
        cache_of((1, 0), (1, 5))
    with pytest.raises(ValueError):
        cache_of((1, 5), (2, 5))


# -- end_offset_for (OffsetForLeaderEpoch) -------------------------------------------------------


@pytest.mark.parametrize(
    "requested, expected",
    [
        (UNDEFINED_EPOCH, UNDEFINED),
        (5, (5, 100)),  # the latest epoch ends at the log end offset
        (3, (3, 50)),  # ends where the next epoch starts
        (4, (3, 50)),  # an epoch this log never had: the largest below it
        (1, (1, 30)),
        (0, (0, 20)),  # below the first epoch: where this log's known history starts, as Kafka
        (6, UNDEFINED),  # above the latest
    ],
)
def test_end_offset_for_answers_as_kafka(requested, expected):
    cache = cache_of((1, 20), (3, 30), (5, 50))
    assert cache.end_offset_for(requested, 100) == expected


def test_end_offset_for_an_empty_cache_is_undefined():
    assert LeaderEpochFileCache().end_offset_for(0, 10) == UNDEFINED


def test_epoch_for_offset_is_the_epoch_whose_range_holds_it():
    cache = cache_of((1, 20), (3, 30))
    assert [cache.epoch_for_offset(o) for o in (0, 19, 20, 29, 30, 1000)] == [
        None,
        None,
        1,
        1,
        3,
        3,
    ]


# -- truncation ----------------------------------------------------------------------------------


def test_truncate_from_end_removes_entries_starting_at_or_above():
    cache = cache_of((1, 0), (2, 10), (3, 20))
    assert not cache.truncate_from_end(21)
    assert cache.truncate_from_end(20)
    assert pairs(cache) == [(1, 0), (2, 10)]
    assert cache.truncate_from_end(5)
    assert pairs(cache) == [(1, 0)]
    assert cache.truncate_from_end(0)
    assert pairs(cache) == []


def test_truncate_from_start_moves_the_first_surviving_epoch_up():
    cache = cache_of((1, 0), (2, 10), (3, 20))
    assert not cache.truncate_from_start(-1)
    assert cache.truncate_from_start(15)
    assert pairs(cache) == [(2, 15), (3, 20)]
    assert cache.truncate_from_start(20)  # exclusive, as Kafka: an entry at 20 stays
    assert pairs(cache) == [(3, 20)]
    assert not cache.truncate_from_start(20)
    assert cache.truncate_from_start(99)
    assert pairs(cache) == [(3, 99)]


# -- the file ------------------------------------------------------------------------------------


def test_the_file_is_kafkas_text_format(tmp_path):
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(tmp_path))
    assert not cache.flush()  # nothing changed: nothing written
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()
    cache.assign(0, 0)
    cache.assign(4, 1200)
    assert cache.dirty and cache.flush()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n2\n0 0\n4 1200\n"
    assert not cache.dirty and not cache.flush()
    assert LeaderEpochCheckpointFile(tmp_path).read() == [EpochEntry(0, 0), EpochEntry(4, 1200)]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    cache.truncate_from_end(0)
    assert cache.flush()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"
    cache.close()


def test_a_missing_file_reads_as_none(tmp_path):
    checkpoint = LeaderEpochCheckpointFile(tmp_path)
    assert checkpoint.read() is None
    checkpoint.close()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"1\n0\n",  # unknown version
        b"0\n",
        b"0\n2\n0 0\n",  # fewer entries than counted
        b"0\n1\n0 0\n1 5\n",  # more
        b"0\n1\n0 0",  # the last line cut short (a torn write)
        b"0\n1\n0\n",
        b"0\n1\n0 0 0\n",
        b"0\n1\n-1 0\n",
        b"0\n1\n0 -5\n",
        b"0\n1\n2147483648 0\n",
        b"0\n1\n0 9223372036854775808\n",
        b"0\n2\n3 0\n2 10\n",  # epochs must increase
        b"0\n2\n2 10\n3 10\n",  # and start offsets
        b"0\n1\n\xff 0\n",
        b"0\n1\n0  0\n",
    ],
)
def test_a_corrupt_file_is_refused_with_its_path(tmp_path, content):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(content)
    checkpoint = LeaderEpochCheckpointFile(tmp_path)
    with pytest.raises(CorruptCheckpointError) as raised:
        checkpoint.read()
    assert LEADER_EPOCH_CHECKPOINT in str(raised.value)
    checkpoint.close()


def _descriptors_in(directory: Path) -> list[str]:
    """This process's descriptors on ``directory`` or a file in it."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == str(directory) or target.startswith(f"{directory}/"):
            found.append(target)
    return found


def test_the_checkpoint_holds_no_descriptor_between_reads_and_writes(tmp_path):
    # Issue 26: a replica's open files are its active .log alone (broker.replica_budget).
    checkpoint = LeaderEpochCheckpointFile(tmp_path)
    cache = LeaderEpochFileCache(checkpoint)
    assert _descriptors_in(tmp_path) == []
    cache.assign(2, 0)
    assert cache.flush() and _descriptors_in(tmp_path) == []
    assert checkpoint.read() == [EpochEntry(2, 0)] and _descriptors_in(tmp_path) == []
    cache.close()


def test_a_write_follows_its_directory_when_the_log_renames_it(tmp_path):
    """A partition's deletion renames its directory and the log relocates the file; a write
    never lands in a new directory that took the old name."""
    directory = tmp_path / "orders-0"
    directory.mkdir()
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(directory))
    cache.assign(1, 0)
    renamed = tmp_path / "orders-0.x-delete"
    os.replace(directory, renamed)
    directory.mkdir()  # the partition created again
    with pytest.raises(FileNotFoundError):
        cache.flush()  # the old name is another directory now: not written there
    assert list(directory.iterdir()) == [] and list(renamed.iterdir()) == []
    assert cache.dirty
    cache.relocate(renamed)  # what Log.detach does after its rename
    assert cache.flush()
    assert (renamed / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n1 0\n"
    assert list(directory.iterdir()) == []
    cache.close()
    cache.assign(2, 5)
    assert not cache.flush()  # closed: nothing more is written


def test_a_write_the_directory_is_renamed_under_lands_in_the_renamed_directory(tmp_path):
    """The rename (and a new directory at the old name) between the write's open of the
    directory and its rename of the file: the file still goes where the log went."""
    directory, renamed = tmp_path / "orders-0", tmp_path / "orders-0.x-delete"
    directory.mkdir()
    disk = FaultyFileOps()
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(directory, disk))
    cache.assign(1, 0)

    def deleted_and_created_again(_call):
        disk.heal()
        os.replace(directory, renamed)
        cache.relocate(renamed)
        directory.mkdir()

    disk.before("write", deleted_and_created_again)
    assert cache.flush()
    assert (renamed / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n1 0\n"
    assert list(directory.iterdir()) == []
    cache.close()


# -- properties ----------------------------------------------------------------------------------


def _increasing(raw: list[tuple[int, int]]) -> list[EpochEntry]:
    epochs, offsets = sorted({e for e, _ in raw}), sorted({o for _, o in raw})
    count = min(len(epochs), len(offsets))
    return [EpochEntry(e, o) for e, o in zip(epochs[:count], offsets[:count], strict=True)]


entries_strategy = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=20
).map(_increasing)


@given(entries_strategy)
def test_the_file_format_round_trips(entries):
    text = format_entries(entries).decode("ascii")
    assert parse_entries(Path("x"), text.split("\n")[:-1]) == entries


@given(st.binary(max_size=200))
def test_any_bytes_read_as_entries_or_a_corrupt_checkpoint(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("garbage")
    (directory / LEADER_EPOCH_CHECKPOINT).write_bytes(data)
    checkpoint = LeaderEpochCheckpointFile(directory)
    try:
        entries = checkpoint.read()
    except CorruptCheckpointError:
        return
    finally:
        checkpoint.close()
    assert entries is not None
    LeaderEpochFileCache(entries=entries)  # what it read is a cache's entries


# A model of the log: the epoch of every offset. Appends carry an epoch not older than the log's
# last one (a leader stamps its own, a follower copies its leader's); truncation and a moving log
# start change it as a replica's log changes. The cache, fed as Log feeds it, must describe it.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 5)),
        st.tuples(st.just("truncate"), st.integers(0, 60)),
        st.tuples(st.just("start"), st.integers(0, 60)),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(operations)
def test_the_cache_describes_the_log_it_is_fed_from(ops):
    cache = LeaderEpochFileCache()
    log: list[int] = []  # epoch of each offset
    start = 0
    for op in ops:
        if op[0] == "append":
            _, step, count = op
            latest = cache.latest_epoch()
            epoch = (log[-1] if len(log) > start else (latest or 0)) + step
            base = len(log)
            log += [epoch] * count
            if latest is None or epoch > latest:
                cache.assign(epoch, base)
        elif op[0] == "truncate":
            offset = max(op[1], start)
            if offset < len(log):
                del log[offset:]
                cache.truncate_from_end(offset)
        else:
            offset = min(op[1], len(log))
            if offset > start:
                start = offset
                cache.truncate_from_start(start)

        entries = cache.entries()
        assert all(
            a.epoch < b.epoch and a.start_offset < b.start_offset
            for a, b in zip(entries, entries[1:], strict=False)
        )
        for offset in range(start, len(log)):
            assert cache.epoch_for_offset(offset) == log[offset]
        leo = len(log)
        for epoch in set(log[start:]):
            later = [o for o in range(start, leo) if log[o] > epoch]
            assert cache.end_offset_for(epoch, leo) == (epoch, later[0] if later else leo)


class _CountingFsyncs(OsFileOps):
    def __init__(self):
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        os.fsync(fd)


def test_a_checkpoint_write_is_atomic_but_not_fsynced(tmp_path):
    # The loader rebuilds the file from the batches whatever a power loss left of it, so a new
    # leader epoch costs a rename, not two fsyncs (issue 26: thousands of partitions a broker).
    file_ops = _CountingFsyncs()
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(tmp_path, file_ops))
    cache.assign(3, 0)
    assert cache.flush()
    assert file_ops.fsyncs == 0
    assert LeaderEpochCheckpointFile(tmp_path).read() == [EpochEntry(3, 0)]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    cache.close()
