"""confluent-kafka-python's own ``test_incremental_alter_configs`` against Odradek: APPEND,
SUBTRACT, SET and DELETE on two topics' configs, checked by DescribeConfigs' non-default entries.

Upstream: confluentinc/confluent-kafka-python, tests/integration/admin/
test_incremental_alter_configs.py, function ``test_incremental_alter_configs`` and its helpers
(``assert_expected_config_entries``, ``assert_operation_succeeded``). Read at v2.15.0; the module
is ours, not a copy. Its steps:

1. two topics (``test-topic-<uuid>``, ``test-topic2-<uuid>``), 2 partitions, one replica,
   ``compression.type=gzip``;
2. one IncrementalAlterConfigs for both: the first APPENDs ``compact`` to ``cleanup.policy`` and
   SETs ``retention.ms=10000``; the second SUBTRACTs ``delete`` from ``cleanup.policy`` and SETs
   ``retention.ms=5000``; both succeed;
3. DescribeConfigs' non-default entries, as confluent-kafka prints them, are exactly
   ``cleanup.policy="delete,compact"``, ``compression.type="gzip"``, ``min.insync.replicas="1"``,
   ``retention.ms="10000"`` for the first and ``cleanup.policy=""``, ``compression.type="gzip"``,
   ``min.insync.replicas="1"``, ``retention.ms="5000"`` for the second;
4. the second topic's ``compression.type`` DELETEd and ``retention.ms`` SET to 10000: its
   non-default entries are ``cleanup.policy=""``, ``min.insync.replicas="1"``,
   ``retention.ms="10000"``.

``min.insync.replicas="1"`` is non-default upstream because Kafka 4.1 writes it as a
cluster-wide dynamic default; here the test clusters set it in every broker's configuration
(tests/integration/conftest.py's UNREPLICATED), which Kafka reports as STATIC_BROKER_CONFIG,
non-default, too. Upstream's last step, a GROUP resource's ``consumer.session.timeout.ms``, runs
only with KIP-848's consumer protocol; group configs are KRaft-only in Kafka and Odradek does not
have them, so here that step is refused, as Kafka's ZooKeeper mode refuses it: INVALID_REQUEST,
naming the resource type (``test_a_group_config_is_refused``). No sleeps: Odradek answers
IncrementalAlterConfigs once ZooKeeper holds the change.

One local cluster of ZooKeeper, a controller and one broker, as upstream's, shared with the
suite's other unchanged steps (conftest.py).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

pytestmark = pytest.mark.integration

WAIT_S = 30.0


@pytest.fixture(scope="module")
def admin(one_broker_cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": one_broker_cluster.bootstrap_servers})


def create_topic(admin: AdminClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid1()}"
    new_topic = NewTopic(name, 2, 1, config={"compression.type": "gzip"})
    admin.create_topics([new_topic])[name].result(timeout=WAIT_S)
    return name


def assert_operation_succeeded(futures: dict, count: int) -> None:
    assert len(futures) == count
    for future in futures.values():
        assert future.result(timeout=WAIT_S) is None


def assert_expected_config_entries(futures: dict, count: int, expected: dict) -> None:
    """Each resource's non-default entries, printed as confluent-kafka prints them, sorted."""
    assert len(futures) == count
    for resource, future in futures.items():
        configs = future.result(timeout=WAIT_S)
        entries = sorted(str(entry) for entry in configs.values() if not entry.is_default)
        assert entries == expected[resource], (resource, entries)


def _entry(name: str, value: str | None, operation: AlterConfigOpType) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=operation)


def test_incremental_alter_configs(admin):
    our_topic = create_topic(admin, "test-topic")
    our_topic2 = create_topic(admin, "test-topic2")

    res1 = ConfigResource(
        ResourceType.TOPIC,
        our_topic,
        incremental_configs=[
            _entry("cleanup.policy", "compact", AlterConfigOpType.APPEND),
            _entry("retention.ms", "10000", AlterConfigOpType.SET),
        ],
    )
    res2 = ConfigResource(
        ResourceType.TOPIC,
        our_topic2,
        incremental_configs=[
            _entry("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
            _entry("retention.ms", "5000", AlterConfigOpType.SET),
        ],
    )
    expected = {
        res1: [
            'cleanup.policy="delete,compact"',
            'compression.type="gzip"',
            'min.insync.replicas="1"',
            'retention.ms="10000"',
        ],
        res2: [
            'cleanup.policy=""',
            'compression.type="gzip"',
            'min.insync.replicas="1"',
            'retention.ms="5000"',
        ],
    }
    assert_operation_succeeded(admin.incremental_alter_configs([res1, res2]), 2)
    assert_expected_config_entries(admin.describe_configs([res1, res2]), 2, expected)

    res2 = ConfigResource(
        ResourceType.TOPIC,
        our_topic2,
        incremental_configs=[
            _entry("compression.type", None, AlterConfigOpType.DELETE),
            _entry("retention.ms", "10000", AlterConfigOpType.SET),
        ],
    )
    expected[res2] = ['cleanup.policy=""', 'min.insync.replicas="1"', 'retention.ms="10000"']
    assert_operation_succeeded(admin.incremental_alter_configs([res2]), 1)
    assert_expected_config_entries(admin.describe_configs([res2]), 1, expected)


def test_a_group_config_is_refused(admin):
    group = ConfigResource(
        ResourceType.GROUP,
        "test-group",
        incremental_configs=[
            _entry("consumer.session.timeout.ms", "50000", AlterConfigOpType.SET),
        ],
    )
    for future in (
        admin.incremental_alter_configs([group])[group],
        admin.describe_configs([group])[group],
    ):
        with pytest.raises(KafkaException) as raised:
            future.result(timeout=WAIT_S)
        error = raised.value.args[0]
        assert error.code() == KafkaError.INVALID_REQUEST, error
        assert "GROUP" in error.str(), error
