"""The connection quotas admit, refuse, evict and pace as Kafka's ConnectionQuotas (KIP-402,
KIP-612), on a virtual clock; the per-listener keys and the per-IP overrides parse as Kafka's."""

from __future__ import annotations

import pytest

from odradek.config.broker import BrokerConfig
from odradek.connection_quotas import ConnectionQuotas, Refusal
from odradek.errors import InvalidConfigError


class Conn:
    def __init__(self, last_activity: float = 0.0, busy: bool = False, proven: bool = False):
        self.last_activity = last_activity
        self.busy = busy
        self.closed = False
        self.proven = proven

    def evict(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def quotas(**kwargs) -> ConnectionQuotas:
    q = ConnectionQuotas(protected_listeners=("INTERNAL", "CONTROL_PLANE"), **kwargs)
    q.add_listener("PLAINTEXT", 100, 2**31 - 1)  # listener bounds above the broker's here
    q.add_listener("INTERNAL", 100, 2**31 - 1)
    return q


def test_per_ip_limit_and_its_overrides():
    q = quotas(max_connections_per_ip=2, max_connections_per_ip_overrides="127.0.0.2:4")
    ones = [Conn() for _ in range(3)]
    assert [q.admit("PLAINTEXT", "127.0.0.1", c) for c in ones] == [
        None,
        None,
        Refusal.MAX_CONNECTIONS_PER_IP,
    ]
    assert all(q.admit("PLAINTEXT", "127.0.0.2", Conn()) is None for _ in range(4))
    assert q.admit("PLAINTEXT", "127.0.0.2", Conn()) is Refusal.MAX_CONNECTIONS_PER_IP
    q.release("PLAINTEXT", "127.0.0.1", ones[0])
    assert q.admit("PLAINTEXT", "127.0.0.1", Conn()) is None
    # a protected listener is not counted per IP (brokers often share an address)
    assert all(q.admit("INTERNAL", "127.0.0.1", Conn()) is None for _ in range(5))


def test_an_inter_broker_connection_over_max_connections_evicts_the_least_recently_used():
    q = quotas(max_connections=3)
    old, busy, newer = Conn(last_activity=1), Conn(last_activity=0, busy=True), Conn(5)
    for c in (old, busy, newer):
        assert q.admit("PLAINTEXT", "10.0.0.1", c) is None
    assert q.admit("PLAINTEXT", "10.0.0.2", Conn()) is Refusal.MAX_CONNECTIONS
    assert q.admit("INTERNAL", "10.0.0.9", Conn()) is None
    assert old.closed and not busy.closed and not newer.closed


def test_the_controllers_listener_evicts_an_idle_unproven_connection_to_admit_one():
    """The controller's one listener (evict_to_admit): a flood of idle connections makes room
    for a newcomer by losing its own least recently used; proven (brokers') and busy ones stay.
    """
    q = ConnectionQuotas(max_connections=3, evict_to_admit=True)
    q.add_listener("CONTROLLER", 3, 2**31 - 1)
    broker, busy, idle = Conn(0, proven=True), Conn(1, busy=True), Conn(2)
    for c in (broker, busy, idle):
        assert q.admit("CONTROLLER", "127.0.0.1", c) is None
    newcomer = Conn(3)
    assert q.admit("CONTROLLER", "127.0.0.1", newcomer) is None
    assert idle.closed and not broker.closed and not busy.closed
    q.release("CONTROLLER", "127.0.0.1", idle)
    newcomer.proven = True
    assert q.admit("CONTROLLER", "127.0.0.1", Conn(4)) is Refusal.LISTENER_MAX_CONNECTIONS


def test_listener_max_connections_binds_protected_listeners_too():
    q = ConnectionQuotas(protected_listeners=("INTERNAL",))
    q.add_listener("INTERNAL", 1, 2**31 - 1)
    assert q.admit("INTERNAL", "h", Conn()) is None
    assert q.admit("INTERNAL", "h", Conn()) is Refusal.LISTENER_MAX_CONNECTIONS


def test_creation_rate_paces_accepts_and_spares_the_inter_broker_listener():
    clock = Clock()
    q = ConnectionQuotas(
        max_connection_creation_rate=10, protected_listeners=("INTERNAL",), clock=clock
    )
    q.add_listener("PLAINTEXT", 100, 2**31 - 1)
    q.add_listener("INTERNAL", 100, 2**31 - 1)
    delays = [q.accept_delay_s("PLAINTEXT") for _ in range(12)]
    assert delays[:10] == [0.0] * 10  # a second's worth at once
    assert delays[10:] == pytest.approx([0.1, 0.2])
    assert q.accept_delay_s("INTERNAL") == 0.0  # the broker-wide rate does not bind it
    clock.now += 1.2  # the debt is paid, and a second's burst refills
    assert q.accept_delay_s("PLAINTEXT") == 0.0


def test_listener_creation_rate():
    clock = Clock()
    q = ConnectionQuotas(clock=clock)
    q.add_listener("PLAINTEXT", 100, 2)
    assert [q.accept_delay_s("PLAINTEXT") for _ in range(3)] == [0.0, 0.0, 0.5]


BASE = {"broker.id": "1", "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x"}


def test_listener_keys_and_overrides_parse_and_round_trip():
    config = BrokerConfig.from_properties(
        {
            **BASE,
            "listener.name.plaintext.max.connections": "50",
            "listener.name.internal.max.connection.creation.rate": "7",
            "max.connections.per.ip.overrides": "127.0.0.2:5, [::1]:3",
        }
    )
    assert config.listener_max_connections("PLAINTEXT") == 50
    assert config.listener_max_connections("CONTROL_PLANE") == 1000  # max.connections
    assert config.listener_max_connection_creation_rate("INTERNAL") == 7
    assert config.max_connections_per_ip_overrides == "127.0.0.2:5,::1:3"
    again = BrokerConfig.from_properties(config.to_properties())
    assert again.listener_connection_overrides == config.listener_connection_overrides


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max.connections.per.ip.overrides", "127.0.0.1"),
        ("max.connections.per.ip.overrides", "a:1,a:2"),
        ("listener.name.plaintext.max.connections", "-1"),
        ("max.connection.creation.rate", "-1"),
    ],
)
def test_bad_values_are_refused(key, value):
    with pytest.raises(InvalidConfigError):
        BrokerConfig.from_properties({**BASE, key: value})
