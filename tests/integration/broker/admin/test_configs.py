"""Describe, alter and incrementally alter configs from real clients, checked in ZooKeeper.

A change writes ``/config/topics/<t>`` and one ``/config/changes/config_change_<seq>``
notification; a refused or validate-only one writes neither.
"""

from __future__ import annotations

import pytest

from .conftest import kafka_admin_client

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


@pytest.fixture
def broker(make_broker):
    return make_broker(1, **{"log.retention.hours": "48"})


@pytest.fixture
def kafka_admin(broker):
    admin = kafka_admin_client(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    admin.create_topics(
        {
            "orders": {
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": {"segment.bytes": "1048576", "cleanup.policy": "delete"},
            }
        }
    )
    yield admin
    admin.close()


@pytest.fixture
def confluent_admin(broker, kafka_admin):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def notifications(zk):
    names = zk.kids("/config/changes")
    return [(name, zk.json(f"/config/changes/{name}")) for name in names]


def overrides(zk, topic="orders"):
    return zk.json(f"/config/topics/{topic}")["config"]


def topic_resource(configs=None, name="orders"):
    from kafka.admin import ConfigResource, ConfigResourceType

    return ConfigResource(ConfigResourceType.TOPIC, name, configs)


def test_kafka_python_describes_a_topic(kafka_admin):
    described = kafka_admin.describe_configs(
        [topic_resource()], include_synonyms=True, config_filter="all"
    )
    configs = described["topic"]["orders"]
    segment = configs["segment.bytes"]
    assert (segment["value"], segment["config_source"], segment["read_only"]) == (
        "1048576",
        "DYNAMIC_TOPIC_CONFIG",
        False,
    )
    retention = configs["retention.ms"]
    assert (retention["value"], retention["config_source"]) == (
        "172800000",
        "STATIC_BROKER_CONFIG",
    )
    assert [(s["name"], s["source"]) for s in retention["synonyms"]] == [
        ("log.retention.hours", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "DEFAULT_CONFIG"),
    ]
    assert configs["flush.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["cleanup.policy"]["config_type"] == "LIST"
    modified = kafka_admin.describe_configs([topic_resource()])["topic"]["orders"]
    assert set(modified) == {"segment.bytes", "cleanup.policy"}
    only = kafka_admin.describe_configs(
        [topic_resource({"retention.ms": None})], config_filter="all"
    )
    assert set(only["topic"]["orders"]) == {"retention.ms"}


def test_kafka_python_describes_this_broker(kafka_admin, broker):
    from kafka.admin import ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.BROKER, str(broker.broker_id))
    configs = kafka_admin.describe_configs([resource], config_filter="all")["broker"]["1"]
    assert configs["broker.id"]["value"] == "1"
    assert configs["broker.id"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert configs["log.retention.hours"]["value"] == "48"
    assert configs["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    # Only the dynamic broker configs (the replication throttle rates) can be altered.
    writable = {name for name, c in configs.items() if not c["read_only"]}
    assert writable == {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}


def test_alter_configs_replaces_the_overrides(kafka_admin, zk):
    before = notifications(zk)
    result = kafka_admin.alter_configs(
        [topic_resource({"retention.ms": "3600000"})], incremental=False, raise_on_unknown=False
    )
    assert result == {"topic": {"orders": "OK"}}
    # kafka-python re-sends the other modified keys itself; the broker stores exactly what came.
    assert overrides(zk) == {
        "cleanup.policy": "delete",
        "retention.ms": "3600000",
        "segment.bytes": "1048576",
    }
    added = notifications(zk)[len(before) :]
    assert [value for _, value in added] == [{"version": 2, "entity_path": "topics/orders"}]
    assert added[0][0].startswith("config_change_") and len(added[0][0]) == 24


def test_raw_alter_configs_drops_what_is_not_sent(broker, kafka_admin, zk, raw_client):
    from kio.schema.alter_configs.v2.request import (
        AlterableConfig,
        AlterConfigsRequest,
        AlterConfigsResource,
    )

    request = AlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=2,
                resource_name="orders",
                configs=(AlterableConfig(name="retention.ms", value="1000"),),
            ),
        ),
        validate_only=False,
    )
    [response] = raw_client(broker.bootstrap).send(request).responses
    assert response.error_code.value == 0
    assert overrides(zk) == {"retention.ms": "1000"}


def test_incremental_alter_configs(kafka_admin, zk):
    from kafka.admin import AlterConfigOp

    result = kafka_admin.alter_configs(
        [
            topic_resource(
                {
                    "retention.ms": (AlterConfigOp.SET, "7200000"),
                    "segment.bytes": (AlterConfigOp.DELETE, None),
                    "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
                }
            )
        ]
    )
    assert result == {"topic": {"orders": "OK"}}
    assert overrides(zk) == {"cleanup.policy": "delete,compact", "retention.ms": "7200000"}
    kafka_admin.alter_configs(
        [topic_resource({"cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")})]
    )
    assert overrides(zk) == {"cleanup.policy": "compact", "retention.ms": "7200000"}


def test_refused_alterations_write_nothing(kafka_admin, zk):
    from kafka.admin import AlterConfigOp

    before_config, before_changes = overrides(zk), notifications(zk)
    bad_value = kafka_admin.alter_configs(
        [topic_resource({"retention.ms": "soon"})], raise_on_unknown=False
    )["topic"]["orders"]
    assert bad_value.startswith("[Error 42] InvalidRequestError")
    assert (
        "Invalid config value for resource ConfigResource(type=TOPIC, name='orders'): "
        "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    ) in bad_value
    unknown = kafka_admin.alter_configs(
        [topic_resource({"retention.msec": "1"})], raise_on_unknown=False
    )["topic"]["orders"]
    assert unknown.startswith("[Error 40] InvalidConfigurationError")
    assert "Unknown topic config name: retention.msec" in unknown
    not_a_list = kafka_admin.alter_configs(
        [topic_resource({"retention.ms": (AlterConfigOp.APPEND, "1")})]
    )["topic"]["orders"]
    assert "Config value append is not allowed for config key: retention.ms" in not_a_list
    missing = kafka_admin.alter_configs(
        [topic_resource({"retention.ms": "1"}, name="missing")], raise_on_unknown=False
    )["topic"]["missing"]
    assert missing.startswith("[Error 3] UnknownTopicOrPartitionError")
    validated = kafka_admin.alter_configs(
        [topic_resource({"retention.ms": "1"})], validate_only=True
    )
    assert validated == {"topic": {"orders": "OK"}}
    assert overrides(zk) == before_config
    assert notifications(zk) == before_changes


def test_confluent_describes_and_incrementally_alters(confluent_admin, broker, zk):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    topic = ConfigResource(ResourceType.TOPIC, "orders")
    [described] = confluent_admin.describe_configs([topic]).values()
    entries = described.result(TIMEOUT_S)
    assert entries["segment.bytes"].value == "1048576"
    assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    node = ConfigResource(ResourceType.BROKER, "1")
    [described] = confluent_admin.describe_configs([node]).values()
    assert described.result(TIMEOUT_S)["broker.id"].value == "1"

    change = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    before = notifications(zk)
    [future] = confluent_admin.incremental_alter_configs([change], validate_only=True).values()
    future.result(TIMEOUT_S)
    assert notifications(zk) == before
    [future] = confluent_admin.incremental_alter_configs([change]).values()
    future.result(TIMEOUT_S)
    assert overrides(zk)["retention.ms"] == "60000"
    assert len(notifications(zk)) == len(before) + 1

    bad = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = confluent_admin.incremental_alter_configs([bad]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Value must be at least -1" in refused.value.args[0].str()

    static = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = confluent_admin.incremental_alter_configs([static]).values()
    with pytest.raises(KafkaException) as not_dynamic:
        future.result(TIMEOUT_S)
    assert not_dynamic.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert overrides(zk)["retention.ms"] == "60000"


def test_describe_errors_per_resource(kafka_admin, broker, raw_client):
    from kio.schema.describe_configs.v4.request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )

    request = DescribeConfigsRequest(
        resources=tuple(
            DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=None)
            for kind, name in [(2, "missing"), (2, "bad/name"), (4, "7"), (4, "x"), (8, "1")]
        ),
        include_synonyms=False,
        include_documentation=True,
    )
    results = raw_client(broker.bootstrap).send(request).results
    assert [(r.error_code.value, r.error_message) for r in results] == [
        (3, "Topic 'missing' does not exist."),
        (
            17,
            'Topic name "bad/name" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        ),
        (42, "Unexpected broker id, expected 1 or empty string, but received 7"),
        (42, "Broker id must be an integer, but it is: x"),
        (42, "Unsupported resource type: BROKER_LOGGER"),
    ]
    assert all(r.configs == () for r in results)


def test_incremental_request_rules(broker, kafka_admin, zk, raw_client):
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    def alter(*ops, name="orders"):
        request = IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=2,
                    resource_name=name,
                    configs=tuple(
                        AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops
                    ),
                ),
            ),
            validate_only=False,
        )
        [response] = client.send(request).responses
        return response.error_code.value, response.error_message

    client = raw_client(broker.bootstrap)
    before_config, before_changes = overrides(zk), notifications(zk)
    assert alter(("retention.ms", 0, "1"), ("retention.ms", 1, None)) == (
        42,
        "Error due to duplicate config keys : retention.ms",
    )
    assert alter(("retention.ms", 0, None), ("segment.ms", 2, None)) == (
        42,
        "Null value not supported for : SET:retention.ms,APPEND:segment.ms",
    )
    assert alter(("retention.ms", 9, "1")) == (42, "Unknown config operation 9 for retention.ms")
    assert alter(("retention.ms", 0, "1"), name="")[0] == 3
    assert overrides(zk) == before_config and notifications(zk) == before_changes
    # DELETE of a key nobody knows removes nothing, and is not an error (as in Kafka).
    assert alter(("no.such.key", 1, None), ("segment.bytes", 1, None)) == (0, None)
    assert overrides(zk) == {"cleanup.policy": "delete"}


def test_concurrent_incremental_alterations_keep_every_key(make_broker, zk):
    """Two brokers altering different keys of one topic at once: neither change is lost."""
    from concurrent.futures import ThreadPoolExecutor

    from kafka.admin import AlterConfigOp

    brokers = [make_broker(1), make_broker(2)]
    admins = [kafka_admin_client(bootstrap_servers=b.bootstrap) for b in brokers]
    try:
        admins[0].create_topics(["shared"])
        keys = ["retention.ms", "segment.ms", "delete.retention.ms", "flush.ms"]

        def alter(i):
            admin = admins[i % 2]
            for round_ in range(5):
                key = keys[i]
                admin.alter_configs(
                    [topic_resource({key: (AlterConfigOp.SET, str(1000 + round_))}, name="shared")]
                )

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(alter, range(4)))
    finally:
        for admin in admins:
            admin.close()
    assert overrides(zk, "shared") == dict.fromkeys(keys, "1004")
    assert len(notifications(zk)) == 20
