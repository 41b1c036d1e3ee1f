"""Offset checkpoint files use Kafka's format, reject corruption and are replaced atomically."""

from __future__ import annotations

import errno
import os

import pytest

from odradek.errors import OdradekError
from odradek.storage.checkpoint import CorruptCheckpointError, OffsetCheckpointFile

ENTRIES = {("orders", 0): 1234, ("orders", 1): 987, ("__consumer_offsets", 49): 0}


@pytest.fixture
def checkpoint(tmp_path, disk) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint", disk)


def test_round_trip_in_kafkas_format(checkpoint):
    checkpoint.write(ENTRIES)
    assert checkpoint.read() == ENTRIES
    assert checkpoint.path.read_text() == (
        "0\n3\norders 0 1234\norders 1 987\n__consumer_offsets 49 0\n"
    )
    checkpoint.write({})
    assert checkpoint.path.read_text() == "0\n0\n"
    assert checkpoint.read() == {}


def test_reads_a_file_kafka_wrote(checkpoint):
    checkpoint.path.write_text("0\n2\nmy-topic.v1 3 42\n_internal 0 9223372036854775807\n")
    assert checkpoint.read() == {("my-topic.v1", 3): 42, ("_internal", 0): 2**63 - 1}


def test_missing_file_is_empty(checkpoint):
    assert checkpoint.read() == {}


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("", 0),
        ("1\n1\norders 0 5\n", 1),
        ("zero\n0\n", 1),
        ("0\n", 2),
        ("0\ntwo\norders 0 5\n", 2),
        ("0\n2\norders 0 5\n", 2),
        ("0\n0\norders 0 5\n", 2),
        ("0\n1\norders 0 five\n", 3),
        ("0\n1\norders zero 5\n", 3),
        ("0\n1\norders 0 5.0\n", 3),
        ("0\n1\norders 0\n", 3),
        ("0\n1\norders 0 5 6\n", 3),
        ("0\n1\nord/ers 0 5\n", 3),
        ("0\n1\norders -1 5\n", 3),
        ("0\n1\norders 0 9223372036854775808\n", 3),
        ("0\n2\norders 0 5\norders 0 6\n", 4),
        ("0\n2\norders 0 5\n\n", 4),
    ],
)
def test_malformed_files_raise_with_file_and_line(checkpoint, content, line):
    checkpoint.path.write_text(content)
    with pytest.raises(CorruptCheckpointError) as raised:
        checkpoint.read()
    assert raised.value.path == checkpoint.path
    assert raised.value.line == line
    assert str(checkpoint.path) in str(raised.value)
    assert isinstance(raised.value, OdradekError)


def test_non_utf8_file_is_corrupt(checkpoint):
    checkpoint.path.write_bytes(b"0\n1\n\xff 0 5\n")
    with pytest.raises(CorruptCheckpointError):
        checkpoint.read()


def test_leftover_tmp_from_a_crashed_write_is_ignored_then_replaced(checkpoint):
    checkpoint.write(ENTRIES)
    tmp = checkpoint.path.with_name(checkpoint.path.name + ".tmp")
    tmp.write_text("0\n5\norders 0")  # a write cut short by a crash
    assert checkpoint.read() == ENTRIES
    checkpoint.write({("orders", 0): 2000})
    assert checkpoint.read() == {("orders", 0): 2000}
    assert not tmp.exists()


@pytest.mark.parametrize(
    "entries",
    [
        {("my topic", 0): 5},
        {("", 0): 5},
        {("a" * 250, 0): 5},
        {("orders", -1): 5},
        {("orders", True): 5},
        {("orders", 0): 2**63},
        {("orders", 0): 5.0},
    ],
)
def test_illegal_entries_are_rejected_and_the_old_file_survives(checkpoint, entries):
    checkpoint.write(ENTRIES)
    before = checkpoint.path.read_bytes()
    with pytest.raises(ValueError):
        checkpoint.write({("orders", 7): 1, **entries})
    assert checkpoint.path.read_bytes() == before
    assert checkpoint.read() == ENTRIES


@pytest.mark.parametrize(
    ("failing", "error"),
    [("write", errno.ENOSPC), ("fsync", errno.EIO), ("replace", errno.EIO)],
)
def test_a_write_failing_midway_leaves_the_old_file(checkpoint, disk, failing, error):
    checkpoint.write(ENTRIES)
    before = checkpoint.path.read_bytes()
    disk.fail(failing, error)
    with pytest.raises(OSError) as raised:
        checkpoint.write({("orders", 0): 99999})
    assert raised.value.errno == error
    disk.heal()
    assert checkpoint.path.read_bytes() == before
    assert checkpoint.read() == ENTRIES
    assert list(checkpoint.path.parent.iterdir()) == [checkpoint.path]


def test_write_fsyncs_the_file_and_then_the_directory(checkpoint, disk):
    synced = disk.record("fsync")
    checkpoint.write(ENTRIES)
    tmp = str(checkpoint.path) + ".tmp"
    assert [os.path.realpath(c.path) for c in synced] == [
        os.path.realpath(tmp),
        os.path.realpath(checkpoint.path.parent),
    ]
