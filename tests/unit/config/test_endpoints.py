"""Listeners, host:port addresses and ZooKeeper connect strings parse as Kafka and ZooKeeper do."""

from __future__ import annotations

import pytest

from odradek.config.endpoints import (
    Endpoint,
    HostPort,
    ZooKeeperConnect,
    parse_address,
    parse_listeners,
    parse_zookeeper_connect,
)
from odradek.errors import InvalidConfigError


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("PLAINTEXT://127.0.0.1:9092", Endpoint("PLAINTEXT", "127.0.0.1", 9092)),
        (
            "plaintext://broker-1.example.com:19092",
            Endpoint("PLAINTEXT", "broker-1.example.com", 19092),
        ),
        ("PLAINTEXT://:9092", Endpoint("PLAINTEXT", "", 9092)),
        ("PLAINTEXT://[::1]:9092", Endpoint("PLAINTEXT", "::1", 9092)),
        ("PLAINTEXT://[fe80::1%eth0]:1", Endpoint("PLAINTEXT", "fe80::1%eth0", 1)),
        (" PLAINTEXT://localhost:0 ,", Endpoint("PLAINTEXT", "localhost", 0)),
    ],
)
def test_listener_parsing(text, endpoint):
    assert parse_listeners("listeners", text) == (endpoint,)
    assert parse_listeners("listeners", str(endpoint)) == (endpoint,)
    assert parse_listeners("listeners", (endpoint,)) == (endpoint,)


def test_listener_str_brackets_ipv6():
    assert str(Endpoint("PLAINTEXT", "::1", 9092)) == "PLAINTEXT://[::1]:9092"
    assert Endpoint("PLAINTEXT", "h", 1).address == HostPort("h", 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "SSL://h:9093",
            "Invalid value SSL://h:9093 for configuration listeners: only PLAINTEXT listeners "
            "are supported for now (no TLS or SASL yet), not SSL",
        ),
        ("SASL_PLAINTEXT://h:9093", "only PLAINTEXT listeners are supported for now"),
        ("INTERNAL://h:9093", "not INTERNAL"),
        ("h:9092", "expected NAME://host:port, for example PLAINTEXT://127.0.0.1:9092"),
        ("PLAINTEXT://h", "expected NAME://host:port"),
        ("PLAINTEXT://h:port", "expected NAME://host:port"),
        ("PLAINTEXT://::1:9092", "expected NAME://host:port"),
        ("PLAINTEXT://h:65536", "port must be between 0 and 65535"),
        ("PLAINTEXT://a:1,plaintext://b:2", "each listener must have a different name: PLAINTEXT"),
        ("", "at least one listener is required"),
        (" , ", "at least one listener is required"),
    ],
)
def test_bad_listeners(text, message):
    with pytest.raises(InvalidConfigError, match="for configuration listeners") as raised:
        parse_listeners("listeners", text)
    assert message in str(raised.value)


def test_listeners_of_the_wrong_type():
    with pytest.raises(InvalidConfigError, match="Expected a value of type LIST"):
        parse_listeners("listeners", 9092)


def test_addresses():
    assert parse_address("a", "127.0.0.1:9644") == HostPort("127.0.0.1", 9644)
    assert parse_address("a", " :0 ") == HostPort("", 0)
    assert parse_address("a", "[::1]:80") == HostPort("::1", 80)
    assert str(HostPort("::1", 80)) == "[::1]:80"
    assert parse_address("a", HostPort("h", 1)) == HostPort("h", 1)
    assert parse_address("a", "") is None
    assert parse_address("a", "  ") is None
    for bad in ("9644", "h:", "http://h:1", "h:1:2"):
        with pytest.raises(InvalidConfigError, match=f"Invalid value {bad} for configuration a"):
            parse_address("a", bad)
    with pytest.raises(InvalidConfigError, match="Expected a value of type STRING"):
        parse_address("a", 9644)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("127.0.0.1:2181", ZooKeeperConnect((HostPort("127.0.0.1", 2181),), "")),
        ("zk", ZooKeeperConnect((HostPort("zk", 2181),), "")),
        (
            "a:1, b:2,[::1]:3/odradek/prod",
            ZooKeeperConnect(
                (HostPort("a", 1), HostPort("b", 2), HostPort("::1", 3)), "/odradek/prod"
            ),
        ),
        ("a:1/", ZooKeeperConnect((HostPort("a", 1),), "")),
    ],
)
def test_zookeeper_connect(text, parsed):
    assert parse_zookeeper_connect("zookeeper.connect", text) == parsed
    assert parse_zookeeper_connect("zookeeper.connect", str(parsed)) == parsed


def test_zookeeper_connect_string_for_kazoo():
    parsed = parse_zookeeper_connect("z", "a:1,b/chroot")
    assert str(parsed) == "a:1,b:2181/chroot"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected host:port[,host:port...][/chroot]"),
        ("a:1,,b:2", "expected host:port"),
        (":2181", "expected host:port"),
        ("a:b", "expected host:port"),
        ("a:0", "port must be between 1 and 65535"),
        ("a:1/chroot/", "invalid chroot path /chroot/"),
        ("a:1/x//y", "invalid chroot path"),
        ("a:1/x/../y", "invalid chroot path"),
        ("a:1/x y", "invalid chroot path"),
    ],
)
def test_bad_zookeeper_connect(text, message):
    with pytest.raises(InvalidConfigError, match="for configuration zookeeper.connect") as raised:
        parse_zookeeper_connect("zookeeper.connect", text)
    assert message in str(raised.value)
