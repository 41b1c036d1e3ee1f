"""Dynamic broker configs from real clients: the throttle rates are stored in /config/brokers/<id>
and <default> with a change notification, described with their source, refused for any other
key, and applied by a broker following the notifications within a second."""

from __future__ import annotations

import pytest

from odradek.broker.broker_configs import BrokerConfigs
from odradek.broker.topic_configs import TopicConfigs
from odradek.config.throttle import UNTHROTTLED_RATE, ThrottleRates
from support.waiting import wait_equal

from .conftest import kafka_admin_client

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
APPLY_S = 3.0  # a broker applies a change within a second or so; the machine may be loaded
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@pytest.fixture
def broker(make_broker):
    return make_broker(1)


@pytest.fixture
def confluent_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kafka_admin(broker):
    admin = kafka_admin_client(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield admin
    admin.close()


def notifications(zk):
    return [zk.json(f"/config/changes/{name}") for name in zk.kids("/config/changes")]


def stored(zk, entity):
    path = f"/config/brokers/{entity}"
    return zk.json(path)["config"] if zk.exists(path) else None


def confluent_alter(admin, name, *ops, validate_only=False):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    resource = ConfigResource(
        ResourceType.BROKER,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=getattr(AlterConfigOpType, op))
            for key, op, value in ops
        ],
    )
    [future] = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
    return future.result(TIMEOUT_S)


def raw_alter(client, name, ops, *, incremental=True):
    """Alter the BROKER resource ``name`` by a raw request (the clients refuse ``""``, the
    cluster default, which Kafka's own kafka-configs --entity-default sends)."""
    if incremental:
        from kio.schema.incremental_alter_configs.v1 import request as schema

        configs = tuple(
            schema.AlterableConfig(name=key, config_operation=op, value=value)
            for key, op, value in ops
        )
        request = schema.IncrementalAlterConfigsRequest(
            resources=(
                schema.AlterConfigsResource(resource_type=4, resource_name=name, configs=configs),
            ),
            validate_only=False,
        )
    else:
        from kio.schema.alter_configs.v2 import request as schema

        configs = tuple(schema.AlterableConfig(name=key, value=value) for key, value in ops)
        request = schema.AlterConfigsRequest(
            resources=(
                schema.AlterConfigsResource(resource_type=4, resource_name=name, configs=configs),
            ),
            validate_only=False,
        )
    [response] = client.send(request).responses
    return response.error_code.value, response.error_message


def raw_describe(client, name):
    from kio.schema.describe_configs.v4 import request as schema

    request = schema.DescribeConfigsRequest(
        resources=(
            schema.DescribeConfigsResource(
                resource_type=4, resource_name=name, configuration_keys=None
            ),
        ),
        include_synonyms=True,
        include_documentation=False,
    )
    [result] = client.send(request).results
    assert result.error_code.value == 0, result.error_message
    return {c.name: c for c in result.configs}


def confluent_describe(admin, name):
    from confluent_kafka.admin import ConfigResource, ResourceType

    [future] = admin.describe_configs([ConfigResource(ResourceType.BROKER, name)]).values()
    return future.result(TIMEOUT_S)


def test_confluent_sets_describes_and_deletes_a_brokers_rate(confluent_admin, zk):
    from confluent_kafka.admin import ConfigSource

    before = notifications(zk)
    confluent_alter(confluent_admin, "1", (FOLLOWER_RATE, "SET", "1048576"), validate_only=True)
    assert notifications(zk) == before and stored(zk, "1") is None
    confluent_alter(confluent_admin, "1", (FOLLOWER_RATE, "SET", "1048576"))
    assert stored(zk, "1") == {FOLLOWER_RATE: "1048576"}
    assert notifications(zk)[len(before) :] == [{"version": 2, "entity_path": "brokers/1"}]

    configs = confluent_describe(confluent_admin, "1")
    follower, leader = configs[FOLLOWER_RATE], configs[LEADER_RATE]
    assert (follower.value, follower.source, follower.is_read_only) == (
        "1048576",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    assert (leader.value, leader.source) == (
        str(UNTHROTTLED_RATE),
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert configs["broker.id"].is_read_only  # the static keys stay read-only
    assert configs["replication.quota.window.num"].value == "11"

    confluent_alter(confluent_admin, "1", (FOLLOWER_RATE, "DELETE", None))
    assert stored(zk, "1") == {}
    assert confluent_describe(confluent_admin, "1")[FOLLOWER_RATE].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )


def test_the_cluster_default_is_stored_under_default_and_described_as_such(
    broker, confluent_admin, raw_client, zk
):
    from confluent_kafka.admin import ConfigSource

    client = raw_client(broker.bootstrap)
    # AlterConfigs (not incremental): the default entity's configs become exactly these.
    assert raw_alter(client, "", [(LEADER_RATE, "2048")], incremental=False) == (0, None)
    assert stored(zk, "<default>") == {LEADER_RATE: "2048"}
    assert notifications(zk)[-1] == {"version": 2, "entity_path": "brokers/<default>"}

    described = raw_describe(client, "")
    assert {name: (c.value, c.config_source) for name, c in described.items()} == {
        LEADER_RATE: ("2048", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    }
    one = confluent_describe(confluent_admin, "1")[LEADER_RATE]
    assert (one.value, one.source, one.is_read_only) == (
        "2048",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        False,
    )
    assert raw_alter(client, "", [(FOLLOWER_RATE, "1")], incremental=False) == (0, None)
    assert stored(zk, "<default>") == {FOLLOWER_RATE: "1"}  # replaced, not merged


def test_kafka_python_lists_the_synonyms_of_a_rate(
    broker, confluent_admin, kafka_admin, raw_client
):
    from kafka.admin import ConfigResource, ConfigResourceType

    raw_alter(raw_client(broker.bootstrap), "", [(LEADER_RATE, 0, "2048")])
    confluent_alter(confluent_admin, "1", (LEADER_RATE, "SET", "4096"))
    described = kafka_admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True, config_filter="all"
    )["broker"]["1"][LEADER_RATE]
    assert (described["value"], described["config_source"], described["read_only"]) == (
        "4096",
        "DYNAMIC_BROKER_CONFIG",
        False,
    )
    assert [(s["value"], s["source"]) for s in described["synonyms"]] == [
        ("4096", "DYNAMIC_BROKER_CONFIG"),
        ("2048", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        (str(UNTHROTTLED_RATE), "DEFAULT_CONFIG"),
    ]


def test_every_other_broker_key_is_refused_and_nothing_is_written(confluent_admin, zk):
    from confluent_kafka import KafkaError, KafkaException

    before = notifications(zk)
    refusals = [
        ((FOLLOWER_RATE, "SET", "100"), ("num.partitions", "SET", "3")),
        (("no.such.key", "SET", "1"),),
        ((LEADER_RATE, "SET", "-5"),),
        ((LEADER_RATE, "SET", "fast"),),
        ((LEADER_RATE, "APPEND", "5"),),
    ]
    messages = []
    for ops in refusals:
        with pytest.raises(KafkaException) as refused:
            confluent_alter(confluent_admin, "1", *ops)
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_REQUEST
        messages.append(error.str())
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
    assert messages[0].startswith(prefix + "Cannot update these configs dynamically: Set(num.")
    assert "Set(no.such.key)" in messages[1]
    assert (
        messages[2]
        == prefix + f"Invalid value -5 for configuration {LEADER_RATE}: Value must be at least 0"
    )
    assert "Not a number of type LONG" in messages[3]
    assert messages[4] == f"Config value append is not allowed for config key: {LEADER_RATE}"
    assert notifications(zk) == before and stored(zk, "1") is None


def test_a_broker_applies_changes_within_a_second(broker, confluent_admin, raw_client):
    applied: list[ThrottleRates] = []

    async def follow():
        configs = BrokerConfigs(broker.zk, broker.broker_id, applied.append)
        topics = TopicConfigs(
            broker.zk, broker.config.topic_defaults(), entity_handlers={"brokers": configs.refresh}
        )
        await topics.start()
        await configs.start()
        return configs

    configs = broker.call(follow())

    def rates() -> ThrottleRates:
        return broker.call_sync(lambda: configs.rates)

    client = raw_client(broker.bootstrap)
    assert raw_alter(client, "", [(FOLLOWER_RATE, 0, "500")]) == (0, None)
    wait_equal(
        rates, ThrottleRates(UNTHROTTLED_RATE, 500), "the throttle rates", APPLY_S, poll_s=0.02
    )
    confluent_alter(confluent_admin, "1", (FOLLOWER_RATE, "SET", "300"), (LEADER_RATE, "SET", "7"))
    # Its own values win over the default.
    wait_equal(rates, ThrottleRates(7, 300), "the throttle rates", APPLY_S, poll_s=0.02)
    confluent_alter(confluent_admin, "1", (FOLLOWER_RATE, "DELETE", None))
    wait_equal(rates, ThrottleRates(7, 500), "the throttle rates", APPLY_S, poll_s=0.02)
    # A change for another broker is not this one's: broker 1 keeps its rates.
    broker.zk.create(
        "/config/brokers/2", b'{"version":1,"config":{"%s":"1"}}' % FOLLOWER_RATE.encode()
    )
    broker.zk.create(
        "/config/changes/config_change_", b'{"version":2,"entity_path":"brokers/2"}', sequence=True
    )
    assert raw_alter(client, "", [(FOLLOWER_RATE, 0, "600")]) == (0, None)  # the next change
    wait_equal(rates, ThrottleRates(7, 600), "the throttle rates", APPLY_S, poll_s=0.02)
    assert applied == [
        ThrottleRates(UNTHROTTLED_RATE, 500),
        ThrottleRates(7, 300),
        ThrottleRates(7, 500),
        ThrottleRates(7, 600),
    ]


def test_throttled_replica_lists_are_checked_as_kafka_checks_them(kafka_admin, confluent_admin, zk):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    kafka_admin.create_topics(["moving"])

    def alter(value):
        entry = ConfigEntry(
            "follower.replication.throttled.replicas",
            value,
            incremental_operation=AlterConfigOpType.SET,
        )
        resource = ConfigResource(ResourceType.TOPIC, "moving", incremental_configs=[entry])
        [future] = confluent_admin.incremental_alter_configs([resource]).values()
        return future.result(TIMEOUT_S)

    alter("0:1, 1:2")
    assert zk.json("/config/topics/moving")["config"] == {
        "follower.replication.throttled.replicas": "0:1,1:2"
    }
    with pytest.raises(KafkaException) as refused:
        alter("0:1,broker-2")
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str().endswith(
        "Invalid value [0:1, broker-2] for configuration follower.replication.throttled.replicas: "
        "follower.replication.throttled.replicas must be the literal '*' or a list of replicas in "
        "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )
    assert zk.json("/config/topics/moving")["config"] == {
        "follower.replication.throttled.replicas": "0:1,1:2"
    }
