"""Controller configuration reads the same file format, with its own keys, defaults and errors."""

from __future__ import annotations

import pytest

from odradek.config.broker import BROKER_KEYS
from odradek.config.controller import CONTROLLER_KEYS, ControllerConfig
from odradek.config.endpoints import HostPort
from odradek.errors import InvalidConfigError

REQUIRED = {"controller.id": "0", "zookeeper.connect": "127.0.0.1:2181"}


def test_defaults():
    config = ControllerConfig.from_properties(REQUIRED)
    assert config.controller_id == 0
    assert config.zookeeper_connect == "127.0.0.1:2181"
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.effective_zookeeper_connection_timeout_ms == 18000
    assert config.controller_socket_timeout_ms == 30000
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.leader_imbalance_check_interval_seconds == 300
    # Not the broker's 9644, so both run on one machine with their defaults.
    assert config.odradek_admin_listener == HostPort("127.0.0.1", 9645)


def test_zookeeper_rows_are_the_brokers():
    for name in ("zookeeper.connect", "zookeeper.session.timeout.ms"):
        assert CONTROLLER_KEYS[name] is BROKER_KEYS[name]


def test_load_a_file_with_overrides(tmp_path):
    path = tmp_path / "controller.properties"
    path.write_text(
        "# the controller\ncontroller.id = 7\nzookeeper.connect=zk1:2181,zk2:2181/odradek\n"
        "zookeeper.connection.timeout.ms=5000\nauto.leader.rebalance.enable=false\n"
    )
    config = ControllerConfig.load(path, {"odradek.admin.listener": "127.0.0.1:0"})
    assert config.controller_id == 7
    assert config.zookeeper_connect == "zk1:2181,zk2:2181/odradek"
    assert config.effective_zookeeper_connection_timeout_ms == 5000
    assert config.auto_leader_rebalance_enable is False
    assert config.odradek_admin_listener == HostPort("127.0.0.1", 0)
    assert ControllerConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize("name", ["controller.id", "zookeeper.connect"])
def test_every_required_key_missing_is_named(name):
    props = {k: v for k, v in REQUIRED.items() if k != name}
    with pytest.raises(InvalidConfigError, match=f'^Missing required configuration "{name}"'):
        ControllerConfig.from_properties(props)


def test_broker_keys_are_unknown_to_the_controller(tmp_path):
    path = tmp_path / "controller.properties"
    path.write_text("controller.id=1\nzookeeper.connect=zk\nbroker.id=1\n")
    with pytest.raises(InvalidConfigError, match=r":3: Unknown controller config name: broker.id"):
        ControllerConfig.load(path)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("controller.id", "-1", "Value must be at least 0"),
        ("controller.socket.timeout.ms", "0", "Value must be at least 1"),
        ("leader.imbalance.per.broker.percentage", "101", "Value must be no more than 100"),
        ("leader.imbalance.check.interval.seconds", "0", "Value must be at least 1"),
        ("auto.leader.rebalance.enable", "on", "Expected value to be either true or false"),
        ("zookeeper.connect", "zk:99999", "port must be between 1 and 65535"),
    ],
)
def test_bad_values(name, value, message):
    with pytest.raises(InvalidConfigError, match=f"for configuration {name}") as raised:
        ControllerConfig.from_properties({**REQUIRED, name: value})
    assert message in str(raised.value)
