"""Listeners, protocol maps, addresses and ZooKeeper connect strings parse as Kafka does."""

from __future__ import annotations

import pytest

from odradek.config.endpoints import (
    Endpoint,
    HostPort,
    ListenerProtocol,
    SecurityProtocol,
    ZooKeeperConnect,
    parse_address,
    parse_advertised_listeners,
    parse_listener_name,
    parse_listeners,
    parse_security_protocol_map,
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
        # Names are any of letters, digits and _ (Kafka's listener names), upper-cased.
        ("control_plane://h:9091", Endpoint("CONTROL_PLANE", "h", 9091)),
        ("SSL://h:9093", Endpoint("SSL", "h", 9093)),
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
        ("h:9092", "expected NAME://host:port, for example PLAINTEXT://127.0.0.1:9092"),
        ("PLAINTEXT://h", "expected NAME://host:port"),
        ("PLAINTEXT://h:port", "expected NAME://host:port"),
        ("PLAINTEXT://::1:9092", "expected NAME://host:port"),
        ("PLAINTEXT://h:65536", "port must be between 0 and 65535"),
        ("PLAINTEXT://a:1,plaintext://b:2", "each listener must have a different name: PLAINTEXT"),
        ("IN-SIDE://a:1", "expected NAME://host:port"),
        ("A://h:9092,B://h:9092", "each listener must have a different port"),
        ("A://127.0.0.1:9092,B://10.0.0.1:9092", "each listener must have a different port"),
        ("A://127.0.0.1:1,B://[::1]:1,C://[::2]:1", "unless exactly one listener has an IPv4"),
        ("", "at least one listener is required"),
        (" , ", "at least one listener is required"),
    ],
)
def test_bad_listeners(text, message):
    with pytest.raises(InvalidConfigError, match="for configuration listeners") as raised:
        parse_listeners("listeners", text)
    assert message in str(raised.value)


def test_ports_may_repeat_only_where_kafka_allows_it():
    # Port 0 never collides; an IPv4 and an IPv6 address may share a port.
    assert len(parse_listeners("listeners", "A://h:0,B://h:0")) == 2
    assert len(parse_listeners("listeners", "A://127.0.0.1:9092,B://[::1]:9092")) == 2
    # Advertised listeners may share a port (a proxy in front), names stay unique.
    assert len(parse_advertised_listeners("advertised.listeners", "A://h:9092,B://h:9092")) == 2
    with pytest.raises(InvalidConfigError, match="different name"):
        parse_advertised_listeners("advertised.listeners", "A://h:1,a://h:2")


def test_security_protocol_maps_parse_as_kafkas_csv_map():
    parsed = parse_security_protocol_map(
        "m", " client : plaintext , CONTROL_PLANE:PLAINTEXT,SSL:ssl"
    )
    assert parsed == (
        ListenerProtocol("CLIENT", SecurityProtocol.PLAINTEXT),
        ListenerProtocol("CONTROL_PLANE", SecurityProtocol.PLAINTEXT),
        ListenerProtocol("SSL", SecurityProtocol.SSL),
    )
    assert ",".join(map(str, parsed)) == "CLIENT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,SSL:SSL"
    assert parse_security_protocol_map("m", parsed) == parsed
    assert parse_security_protocol_map("m", "") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CLIENT", "expected LISTENER_NAME:SECURITY_PROTOCOL"),
        (":PLAINTEXT", "expected LISTENER_NAME:SECURITY_PROTOCOL"),
        ("CLIENT:TLS", "invalid security protocol `TLS`"),
        ("CLIENT:PLAINTEXT,client:SSL", "listener CLIENT is mapped twice"),
    ],
)
def test_bad_security_protocol_maps(text, message):
    with pytest.raises(InvalidConfigError, match="for configuration m") as raised:
        parse_security_protocol_map("m", text)
    assert message in str(raised.value)


def test_listener_names():
    assert parse_listener_name("n", " control_plane ") == "CONTROL_PLANE"
    for bad in ("", "A B", "a-b"):
        with pytest.raises(InvalidConfigError, match="a listener name is letters, digits and _"):
            parse_listener_name("n", bad)


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
