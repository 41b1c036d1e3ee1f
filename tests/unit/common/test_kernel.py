"""The shared kernel stays at the bottom, and its facts are the ones Kafka publishes."""

import pkgutil
import tomllib
from pathlib import Path

import pytest

import odradek
from odradek.common.clock import ManualClock
from odradek.common.partitions import TopicPartition
from odradek.common.topics import (
    TOPIC_NAME_PATTERN,
    is_legal_topic,
    log_directory_name,
    parse_log_directory_name,
)

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_the_kernel_contract_forbids_every_other_package_of_odradek():
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (kernel,) = [c for c in contracts if c.get("source_modules") == ["odradek.common"]]
    siblings = {f"odradek.{m.name}" for m in pkgutil.iter_modules(odradek.__path__)} - {
        "odradek.common"
    }
    siblings = {s for s in siblings if not s.rsplit(".", 1)[1].startswith("_")}
    assert siblings - set(kernel["forbidden_modules"]) == set(), "add new packages to the contract"


def test_a_topic_partition_is_the_plain_tuple_for_lookups():
    assert TopicPartition("orders", 3) == ("orders", 3)
    assert {("orders", 3): 1}[TopicPartition("orders", 3)] == 1
    assert str(TopicPartition("orders", 3)) == "orders-3"
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)])[0] == (
        "a",
        1,
    )


@pytest.mark.parametrize(
    ("name", "legal"),
    [
        ("orders", True),
        ("a.b_c-1", True),
        ("x" * 249, True),
        ("x" * 250, False),
        ("", False),
        (".", False),
        ("..", False),
        ("a/b", False),
        ("é", False),
        (3, False),
    ],
)
def test_kafkas_topic_name_rule(name, legal):
    assert is_legal_topic(name) is legal


def test_the_crd_pattern_is_the_rule():
    assert TOPIC_NAME_PATTERN == r"^[a-zA-Z0-9._-]{1,249}$"


def test_a_log_directory_name_round_trips_and_refuses_what_would_escape():
    assert parse_log_directory_name(log_directory_name("my-topic", 12)) == ("my-topic", 12)
    assert parse_log_directory_name("my-topic") is None
    assert parse_log_directory_name("-3") is None
    for topic, partition in (("../x", 0), ("..", 0), ("ok", -1)):
        with pytest.raises(ValueError):
            log_directory_name(topic, partition)


def test_a_manual_clock_moves_its_readings_together_and_only_forwards():
    clock = ManualClock(now_ms=5_000, monotonic_s=10.0)
    clock.advance(1.5)
    clock.advance(ms=500)
    assert (clock.time_ms(), clock(), clock.time()) == (7_000, 7_000, 7.0)
    assert clock.monotonic() == pytest.approx(12.0)
    clock.now_ms += 1_000
    assert clock.monotonic_ms() == pytest.approx(13_000)
    with pytest.raises(ValueError):
        clock.advance(-1)
