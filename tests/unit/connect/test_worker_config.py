"""WorkerConfig reads Kafka Connect's worker keys with Kafka's defaults and refuses what it does
not know, naming the key."""

from __future__ import annotations

import pytest

from odradek.connect.api import ConfigException
from odradek.connect.worker_config import WorkerConfig, parse_properties

BASE = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
}
DIST = {
    **BASE,
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
}


def test_defaults_are_kafkas():
    c = WorkerConfig({**BASE, "offset.storage.file.filename": "/tmp/o"}, distributed=False)
    assert c.offset_flush_interval_ms == 60_000
    assert c.offset_flush_timeout_ms == 5_000
    assert c.task_shutdown_graceful_timeout_ms == 5_000
    assert c.get("listeners") == "http://:8083"
    assert c.get("offset.storage.partitions") == 25
    assert c.get("status.storage.partitions") == 5
    assert c.get("config.storage.replication.factor") == 3
    assert not c.exactly_once_source_enabled


def test_required_keys_per_mode():
    with pytest.raises(ConfigException) as e:
        WorkerConfig(BASE, distributed=False)
    assert e.value.name == "offset.storage.file.filename"
    with pytest.raises(ConfigException) as e:
        WorkerConfig(BASE, distributed=True)
    assert e.value.name == "group.id"
    assert WorkerConfig(DIST, distributed=True).group_id == "g"


@pytest.mark.parametrize(
    "key,value",
    [
        ("plugin.path", "/x"),
        ("no.such.key", "1"),
        ("offset.flush.interval.ms", "soon"),
        ("offset.flush.interval.ms", "0"),
        ("exactly.once.source.support", "maybe"),
    ],
)
def test_bad_keys_are_named(key, value):
    with pytest.raises(ConfigException) as e:
        WorkerConfig({**DIST, key: value}, distributed=True)
    assert e.value.name == key


def test_client_and_converter_prefixes():
    c = WorkerConfig(
        {
            **DIST,
            "bootstrap.servers": "127.0.0.1:1",
            "producer.linger.ms": "50",
            "consumer.max.poll.interval.ms": "9000",
            "admin.request.timeout.ms": "100",
            "value.converter.schemas.enable": "false",
        },
        distributed=True,
    )
    p = c.producer_config()
    assert p["bootstrap.servers"] == "127.0.0.1:1"
    assert p["acks"] == "all" and p["enable.idempotence"] is True and p["linger.ms"] == "50"
    assert p["partitioner"] == "murmur2_random"  # Java's, as the offset store's producer
    assert c.producer_config({"linger.ms": "1"})["linger.ms"] == "1"
    cc = c.consumer_config("connect-x")
    assert cc["group.id"] == "connect-x" and cc["enable.auto.commit"] is False
    assert cc["max.poll.interval.ms"] == "9000"
    assert c.admin_config() == {"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "100"}
    assert c.converter_config("value") == (BASE["value.converter"], {"schemas.enable": "false"})


def test_parse_properties():
    text = "# c\n! c\na=1\nb : 2\nc 3\nlong=x,\\\n   y\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "long": "x,y", "empty": ""}
