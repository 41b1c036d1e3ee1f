"""odradek.broker.rack.file: the broker waits for the file, takes its content as broker.rack,
and refuses to start when it stays empty past the timeout."""

from __future__ import annotations

import pytest

from odradek.config.broker import BrokerConfig
from odradek.errors import InvalidConfigError

REQUIRED = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/data/0"}


class FakeClock:
    def __init__(self, on_sleep=None) -> None:
        self.now = 0.0
        self.sleeps = 0
        self.on_sleep = on_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += max(seconds, 0.001)
        if self.on_sleep is not None:
            self.on_sleep(self)


def config(**extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties({**REQUIRED, **extra})


def test_without_the_key_the_config_is_unchanged():
    c = config(**{"broker.rack": "r1"})
    assert c.with_rack_from_file() is c
    assert c.broker_rack == "r1"


def test_a_file_already_written_gives_the_rack(tmp_path):
    rack = tmp_path / "rack"
    rack.write_text("zone-a\n")
    c = config(**{"odradek.broker.rack.file": str(rack)}).with_rack_from_file()
    assert c.broker_rack == "zone-a"
    assert c.odradek_broker_rack_file is None


def test_the_broker_waits_until_the_file_is_non_empty(tmp_path):
    rack = tmp_path / "rack"
    rack.write_text("")  # a downward API file of an annotation that is not there yet

    def annotate(clock: FakeClock) -> None:
        if clock.sleeps == 3:
            rack.write_text("zone-b")

    clock = FakeClock(annotate)
    c = config(**{"odradek.broker.rack.file": str(rack)}).with_rack_from_file(
        sleep=clock.sleep, monotonic=clock.monotonic
    )
    assert c.broker_rack == "zone-b"
    assert clock.sleeps == 3


def test_a_file_still_missing_after_the_timeout_refuses_to_start(tmp_path):
    clock = FakeClock()
    c = config(
        **{
            "odradek.broker.rack.file": str(tmp_path / "never"),
            "odradek.broker.rack.file.timeout.ms": "2000",
        }
    )
    with pytest.raises(InvalidConfigError, match=r"still missing or empty after 2000 ms"):
        c.with_rack_from_file(sleep=clock.sleep, monotonic=clock.monotonic)
    assert 2.0 <= clock.now < 3.0


def test_rack_and_rack_file_together_are_refused(tmp_path):
    with pytest.raises(InvalidConfigError, match="both set"):
        config(**{"broker.rack": "r1", "odradek.broker.rack.file": str(tmp_path / "rack")})


def test_the_odradek_broker_command_reads_the_rack_file(tmp_path):
    from odradek.commands.broker import _load

    rack = tmp_path / "rack"
    rack.write_text("zone-c")
    overrides = {**REQUIRED, "odradek.broker.rack.file": str(rack)}
    assert _load(None, overrides).broker_rack == "zone-c"
