"""confluent-kafka-python's own ``test_describe_operations`` against Odradek: DescribeCluster,
DescribeTopics and DescribeConsumerGroups with and without authorized operations, before and
after an ACL on the resource, as a SASL/PLAIN user who is not a super user.

Upstream: confluentinc/confluent-kafka-python, tests/integration/admin/
test_describe_operations.py, function ``test_describe_operations`` and its helpers
(``verify_provided_describe_for_authorized_operations``, ``verify_describe_cluster``,
``verify_describe_topics``, ``verify_describe_groups``, ``consume_messages``), run there against
its ``sasl_cluster`` fixture (tests/integration/conftest.py: one broker, SASL PLAIN, a user
``sasl_user``). Read at v2.15.0; the module is ours, not a copy. For each of the Cluster, a topic
and a group, in upstream's order:

1. described with ``include_authorized_operations=False``: no authorized operations;
2. described with them: some, among them both the operation to allow and the one to check
   (no ACL names the resource yet, and the broker allows everyone then);
3. an ACL allowing ``User:sasl_user`` the first operation on the resource (literal);
4. described again: the allowed operation is there, the other is not;
5. the resource's ACLs deleted.

The Cluster is checked with ALTER and ALTER_CONFIGS (and has an id, nodes and a controller);
a 1-partition, 1-replica topic with READ and DELETE (named, not internal, partition 0 led, one
replica, one in-sync); a group that consumed the topic's two records, with READ and DELETE (not
simple, EMPTY), and then deleted; then the topic is deleted (``operation_timeout=0``).

Where this module differs from upstream: no sleeps (Odradek's authorizer reads the ACLs that
CreateAcls and DeleteAcls wrote before they answer), polls bounded in time, a consumer error
fails the test instead of ending the loop, and the ACLs are checked to be gone at the end.

One local cluster for the module: ZooKeeper, a controller, one broker with Kafka's ACL
authorizer and ``allow.everyone.if.no.acl.found=true`` (as upstream's trivup cluster), a
PLAINTEXT listener for the harness and a SASL_PLAINTEXT listener with PLAIN's JAAS user
``sasl_user`` (password ``sasl_user``, as upstream's), which every client here uses.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    DeserializingConsumer,
    SerializingProducer,
    TopicCollection,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from support.confluent_acls import any_filter
from support.listener_ports import listener_ports

pytestmark = pytest.mark.integration

WAIT_S = 30.0
USER = "sasl_user"
PLAIN_JAAS = (
    f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{USER}";'
)
GROUP = "test-group"


@pytest.fixture(scope="module")
def client_conf(local_cluster, tmp_path_factory) -> dict:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SASL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
        "SASL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    data_dir = tmp_path_factory.mktemp("describe-operations-cluster")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        broker = next(m for m in state.members if m.role == "broker")
        port = listener_ports(broker)["SASL"]
        yield {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": USER,
            "sasl.password": USER,
        }


@pytest.fixture(scope="module")
def admin(client_conf) -> AdminClient:
    return AdminClient(client_conf)


def _describe(describe, args: tuple, **kwargs):
    """Upstream's ``perform_admin_operation_sync``: the one result, by the first name asked."""
    futures = describe(*args, request_timeout=10, **kwargs)
    if args and isinstance(args[0], list):
        futures = futures[args[0][0]]
    elif args and isinstance(args[0], TopicCollection):
        futures = futures[args[0].topic_names[0]]
    return futures.result(timeout=WAIT_S)


def verify_authorized_operations(
    admin, describe, allow, check, resource_type, name, *args
) -> object:
    """Steps 1-5 of the module for one resource; -> the description of step 4."""
    described = _describe(describe, args, include_authorized_operations=False)
    assert described.authorized_operations is None

    described = _describe(describe, args, include_authorized_operations=True)
    assert len(described.authorized_operations) > 0
    assert allow in described.authorized_operations, described.authorized_operations
    assert check in described.authorized_operations, described.authorized_operations

    binding = AclBinding(
        resource_type,
        name,
        ResourcePatternType.LITERAL,
        f"User:{USER}",
        "*",
        allow,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(timeout=WAIT_S)

    described = _describe(describe, args, include_authorized_operations=True)
    assert len(described.authorized_operations) > 0
    assert allow in described.authorized_operations, described.authorized_operations
    assert check not in described.authorized_operations, described.authorized_operations

    resource_filter = AclBindingFilter(
        resource_type,
        name,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([resource_filter])[resource_filter].result(timeout=WAIT_S)
    assert deleted == [binding], deleted
    return described


def consume_messages(client_conf: dict, group: str, topic: str, num_messages: int) -> None:
    """Upstream's: subscribe, commit each record synchronously, stop after ``num_messages``."""
    consumer = DeserializingConsumer(
        {
            **client_conf,
            "group.id": group,
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + WAIT_S
    try:
        while read < num_messages:
            assert time.monotonic() < deadline, f"{group} read {read} records in {WAIT_S} s"
            message = consumer.poll(1.0)  # a ConsumeError fails the test
            if message is None:
                continue
            consumer.commit(message, asynchronous=False)
            read += 1
    finally:
        consumer.close()


def test_describe_operations(admin, client_conf):
    cluster = verify_authorized_operations(
        admin,
        admin.describe_cluster,
        AclOperation.ALTER,
        AclOperation.ALTER_CONFIGS,
        ResourceType.BROKER,  # librdkafka's name for the Cluster resource
        "kafka-cluster",
    )
    assert isinstance(cluster.cluster_id, str)
    assert len(cluster.nodes) > 0
    assert cluster.controller is not None

    topic = f"test-topic-{uuid.uuid1()}"
    new_topic = NewTopic(topic, 1, 1, config={"compression.type": "gzip"})
    admin.create_topics([new_topic])[topic].result(timeout=WAIT_S)
    described = verify_authorized_operations(
        admin,
        admin.describe_topics,
        AclOperation.READ,
        AclOperation.DELETE,
        ResourceType.TOPIC,
        topic,
        TopicCollection([topic]),
    )
    assert described.name == topic
    assert len(described.partitions) == 1
    assert not described.is_internal
    assert described.partitions[0].id == 0
    assert described.partitions[0].leader is not None
    assert len(described.partitions[0].replicas) == 1
    assert len(described.partitions[0].isr) == 1

    producer = SerializingProducer(client_conf)
    producer.produce(topic, "Hello Python!")
    producer.produce(topic, key="Just a key")
    assert producer.flush(WAIT_S) == 0
    consume_messages(client_conf, GROUP, topic, 2)
    group = verify_authorized_operations(
        admin,
        admin.describe_consumer_groups,
        AclOperation.READ,
        AclOperation.DELETE,
        ResourceType.GROUP,
        GROUP,
        [GROUP],
    )
    assert group.group_id == GROUP
    assert group.is_simple_consumer_group is False
    assert group.state == ConsumerGroupState.EMPTY
    admin.delete_consumer_groups([GROUP], request_timeout=10)[GROUP].result(timeout=WAIT_S)

    futures = admin.delete_topics([topic], operation_timeout=0, request_timeout=10)
    futures[topic].result(timeout=WAIT_S)
    assert admin.describe_acls(any_filter()).result(timeout=WAIT_S) == []
