"""Consumer-group tooling without a cluster: lag, Kafka's reset scenarios clamped to the log,
datetimes, ConsumerProtocolAssignment decoding of hostile bytes, and the CLI's refusals."""

from __future__ import annotations

import struct

import pytest

from odradek.cli import main
from odradek.commands.common import CommandError
from odradek.commands.groups import parse_topics
from odradek.common.partitions import TopicPartition
from odradek.ops.group_offsets import (
    OffsetBounds,
    ResetKind,
    ResetSpec,
    decode_assignment,
    lag,
    parse_datetime,
    parse_duration,
    reset_target,
)

BOUNDS = OffsetBounds(log_start_offset=10, log_end_offset=100, at_time=42)


def test_lag():
    assert lag(40, 100) == 60
    assert lag(None, 100) is None
    assert lag(40, None) is None
    assert lag(120, 100) == 0  # a commit past the end (truncated log) is not negative lag


@pytest.mark.parametrize(
    ("spec", "committed", "target"),
    [
        (ResetSpec(ResetKind.EARLIEST), 50, 10),
        (ResetSpec(ResetKind.LATEST), 50, 100),
        (ResetSpec(ResetKind.DATETIME, 0), 50, 42),
        (ResetSpec(ResetKind.SHIFT_BY, -5), 50, 45),
        (ResetSpec(ResetKind.SHIFT_BY, -500), 50, 10),  # clamped to the log start
        (ResetSpec(ResetKind.SHIFT_BY, 500), 50, 100),  # clamped to the log end
        (ResetSpec(ResetKind.SHIFT_BY, 1), None, None),  # nothing to shift from
        (ResetSpec(ResetKind.OFFSET, 70), None, 70),
        (ResetSpec(ResetKind.OFFSET, 3), 50, 10),
        (ResetSpec(ResetKind.OFFSET, 1000), 50, 100),
        (ResetSpec(ResetKind.CURRENT), 50, 50),
        (ResetSpec(ResetKind.CURRENT), 5, 10),  # below the log start: clamped
        (ResetSpec(ResetKind.CURRENT), None, None),
    ],
)
def test_reset_targets(spec, committed, target):
    assert reset_target(spec, committed, BOUNDS) == target


def test_a_datetime_after_the_last_record_resets_to_the_end():
    assert reset_target(ResetSpec(ResetKind.DATETIME, 0), 5, OffsetBounds(10, 100, None)) == 100


def test_parse_datetime():
    assert parse_datetime("1970-01-01T00:00:01.500") == 1500
    assert parse_datetime("1970-01-01T01:00:00+01:00") == 0
    assert parse_datetime("1970-01-01T00:00:02Z") == 2000
    with pytest.raises(ValueError):
        parse_datetime("yesterday")


def test_parse_duration():
    assert parse_duration("PT30M") == 30 * 60_000
    assert parse_duration("P1DT2H") == 26 * 3_600_000
    assert parse_duration("PT1.5S") == 1500
    assert parse_duration("P2D") == 2 * 86_400_000
    for bad in ("", "P", "PT", "30M", "P1H", "PT1DT"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def assignment(version: int, topics: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic, partitions in topics.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", len(user_data)) + user_data


def test_decode_assignment():
    data = assignment(3, {"b": [1], "a": [2, 0]}, b"sticky")
    assert decode_assignment(data) == (
        TopicPartition("a", 0),
        TopicPartition("a", 2),
        TopicPartition("b", 1),
    )
    assert decode_assignment(b"") == ()


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",
        struct.pack(">hi", 0, 1),  # one topic announced, none there
        struct.pack(">hi", 0, 2**30),  # a huge count
        struct.pack(">hih", 0, 1, 50) + b"short",
        struct.pack(">h", -1),
    ],
)
def test_decode_assignment_refuses_malformed_bytes(data):
    with pytest.raises(ValueError):
        decode_assignment(data)


def test_parse_topics():
    assert parse_topics(["t", "u:1,0", "u:3"]) == {"t": None, "u": [0, 1, 3]}
    assert parse_topics(["t", "t:1"]) == {"t": None}
    for bad in (":1", "t:", "t:x", "t:-1"):
        with pytest.raises(CommandError):
            parse_topics([bad])


@pytest.mark.parametrize(
    "argv",
    [
        ["groups", "describe"],  # no --group
        ["groups", "reset-offsets", "--group", "g", "--to-earliest"],  # no topics
        ["groups", "reset-offsets", "--group", "g", "--all-topics"],  # no scenario
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"],
        [
            "groups",
            "reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-earliest",
            "--dry-run",
            "--execute",
        ],
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--shift-by", "x"],
        ["groups", "list", "--type", "share"],
        ["groups", "delete"],
    ],
)
def test_argument_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2


@pytest.mark.parametrize(
    "extra",
    [["--to-datetime", "not-a-date"], ["--to-offset", "-1"], ["--by-duration", "1 hour"]],
)
def test_bad_scenario_values_exit_1(extra, capsys):
    argv = ["groups", "reset-offsets", "--group", "g", "--all-topics", *extra]
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "odradek groups reset-offsets: error:" in capsys.readouterr().err
