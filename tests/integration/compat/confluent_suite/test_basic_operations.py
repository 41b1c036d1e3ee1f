"""confluent-kafka-python's own ``test_basic_operations`` against Odradek: topics, partitions,
groups, configs, group offsets and ACLs through confluent-kafka's AdminClient, with a producer
and consumers in between.

Upstream: confluentinc/confluent-kafka-python, tests/integration/admin/test_basic_operations.py,
function ``test_basic_operations`` and its helpers there (``verify_topic_metadata``,
``verify_consumer_group_offsets_operations``, ``consume_messages``, ``verify_config``) and in
tests/common (``verify_admin_acls``, here support/confluent_acls.py), with the cluster fixture of
tests/integration/cluster_fixture.py (``create_topic_and_wait_propogation``). Read at v2.15.0;
the module is ours, not a copy. Its steps, in upstream's order:

1. CreateTopics of a ``test-topic-<uuid>`` with 2 partitions, one replica and
   ``compression.type=gzip``, first with ``validate_only`` (a name never created), then for real;
2. Metadata lists it with 2 partitions, asked three ways (all topics, ``topic=``, positionally);
3. CreatePartitions to 5 (``operation_timeout=10``), and Metadata shows 5;
4. a SerializingProducer sends a value and a key-only record, both with upstream's headers;
5. two groups each consume both records with a DeserializingConsumer (``enable.partition.eof``,
   no auto commit, a synchronous commit per record, upstream's ``on_commit`` check);
6. ListGroups (``list_groups``, with and without a group) and ListConsumerGroups find both groups,
   and ListConsumerGroups filtered on STABLE finds none (their members have left);
7. DescribeConfigs shows ``compression.type=gzip``; AlterConfigs (the legacy, whole-set API) sets
   ``file.delete.delay.ms=12345`` and ``compression.type=snappy``; DescribeConfigs shows both;
8. OffsetFetch for the first group (ListConsumerGroupOffsets, no partitions) has the 2 committed
   partitions of the topic, one past 0; AlterConsumerGroupOffsets sets both to 0; OffsetFetch of
   those partitions shows 0;
9. DeleteGroups of both groups; DeleteTopics of the topic;
10. the ACL sequence (support/confluent_acls.py) on ``<topic>-acls`` and ``test-group-acls``.

Where this module differs from upstream, and why:

- upstream's waits (``verify_topic_metadata``'s three tries, and the one-second sleeps) give up
  silently; here each wait is bounded and fails when it runs out, and no sleep is needed;
- upstream's consumer loop polls without a timeout and ignores other errors; here polls are
  bounded and any error other than a partition EOF fails the test;
- upstream sends the key-less record to a random partition, so one time in five both records
  share a partition and its ``len(topic_partitions) == 2`` fails on any broker; here the keyed
  record goes first and the key-less one to another partition, so two partitions always hold
  a commit;
- added, true of Kafka too: the validate-only topic does not exist, the consumed records carry
  the produced headers, the deleted topic leaves Metadata.

One local cluster for the module: ZooKeeper, a controller and three brokers (trivup's default
count), Kafka's ACL authorizer with ``allow.everyone.if.no.acl.found=true`` (the plaintext
clients are ``User:ANONYMOUS``; the ACLs created in step 10 name other principals).
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    DeserializingConsumer,
    KafkaError,
    SerializingProducer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType
from confluent_kafka.error import ConsumeError

from support.confluent_acls import verify_admin_acls
from support.waiting import wait_until

pytestmark = [
    pytest.mark.integration,
    # upstream calls these on purpose: the old ListGroups and AlterConfigs APIs are served too
    pytest.mark.filterwarnings(r"ignore:list_groups\(\) is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]

WAIT_S = 30.0
TOPIC_PREFIX = "test-topic"
GROUP_1, GROUP_2 = "test-group-1", "test-group-2"
ACLS_GROUP = "test-group-acls"
# upstream's headers: repeated keys, a str and bytes, a non-ASCII key and value, a null, an
# empty value and packed binary
PRODUCE_HEADERS = [
    ("foo1", "bar"),
    ("foo1", "bar2"),
    ("foo2", b"1"),
    ("Jämtland", "Härjedalen"),
    ("nullheader", None),
    ("empty", ""),
    ("foobin", struct.pack("hhl", 10, 20, 30)),
]
# what a consumer reads back: every value as bytes (UTF-8), the null as None
CONSUMED_HEADERS = [
    (key, value.encode() if isinstance(value, str) else value) for key, value in PRODUCE_HEADERS
]


@pytest.fixture(scope="module")
def bootstrap(local_cluster, tmp_path_factory) -> str:
    overrides = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    data_dir = tmp_path_factory.mktemp("basic-operations-cluster")
    with local_cluster(data_dir, brokers=3, broker_overrides=overrides) as state:
        yield state.bootstrap_servers


def create_topic(admin: AdminClient, conf: dict, validate_only: bool) -> str:
    """The fixture's ``create_topic``: a new name under TOPIC_PREFIX, created (or validated)."""
    name = f"{TOPIC_PREFIX}-{uuid.uuid1()}"
    futures = admin.create_topics([NewTopic(name, **conf)], validate_only=validate_only)
    assert futures[name].result(timeout=WAIT_S) is None
    return name


def verify_topic_metadata(admin: AdminClient, expected: dict[str, int], *args, **kwargs) -> None:
    """Every topic of ``expected`` listed with exactly its partition count, asked as
    ``list_topics(*args, **kwargs)``; a broker may lag, so ask again until WAIT_S runs out."""

    def listed() -> bool:
        topics = admin.list_topics(*args, timeout=WAIT_S, **kwargs).topics
        return all(
            topic in topics and len(topics[topic].partitions) >= count
            for topic, count in expected.items()
        )

    wait_until(listed, f"{expected} in Metadata", WAIT_S)
    topics = admin.list_topics(*args, timeout=WAIT_S, **kwargs).topics
    for topic, count in expected.items():
        assert len(topics[topic].partitions) == count, (topic, topics[topic].partitions)


def produce(bootstrap: str, topic: str) -> list[int]:
    """Upstream's two records (a value, and a key without one), both with PRODUCE_HEADERS; the
    keyed one first, the key-less one to another partition (see the module). -> partitions."""
    producer = SerializingProducer({"bootstrap.servers": bootstrap})
    delivered: list = []

    def on_delivery(err, message):
        assert err is None, err
        delivered.append(message)

    producer.produce(
        topic, key="Just a key and headers", headers=PRODUCE_HEADERS, on_delivery=on_delivery
    )
    assert producer.flush(WAIT_S) == 0
    other = (delivered[0].partition() + 1) % 5
    producer.produce(
        topic, "Hello Python!", partition=other, headers=PRODUCE_HEADERS, on_delivery=on_delivery
    )
    assert producer.flush(WAIT_S) == 0
    return [message.partition() for message in delivered]


def consume_messages(bootstrap: str, topic: str, group_id: str, num_messages: int) -> list:
    """Upstream's ``consume_messages``: subscribe, commit each record synchronously, stop after
    ``num_messages`` records or once every assigned partition has reached its end."""
    commits: list = []
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
            "on_commit": lambda err, partitions: commits.append((err, partitions)),
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    read: list = []
    eof_reached: set[tuple[str, int]] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(read) < num_messages:
            assert time.monotonic() < deadline, f"{group_id} read {len(read)} in {WAIT_S} s"
            try:
                message = consumer.poll(1.0)
            except ConsumeError as e:
                assert e.code == KafkaError._PARTITION_EOF, e
                end = e.kafka_message
                eof_reached.add((end.topic(), end.partition()))
                if len(eof_reached) == len(consumer.assignment()):
                    break
                continue
            if message is None:
                continue
            consumer.commit(message, asynchronous=False)
            read.append(message)
    finally:
        consumer.close()
    # upstream's on_commit check (librdkafka does not call it for a synchronous commit, so
    # upstream's never runs; kept so that a call, if one comes, is checked as upstream does)
    assert all(err is not None for err, _ in commits), commits
    return read


def verify_config(expected: dict, configs: dict) -> None:
    for key, value in expected.items():
        entry = configs.get(key)
        assert entry is not None, f"{key} is not among the described configs"
        assert entry.value == str(value), (key, entry.value, value)


def verify_consumer_group_offsets_operations(admin: AdminClient, topic: str, group: str) -> None:
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    committed = listed[group].result(timeout=WAIT_S)
    assert isinstance(committed, ConsumerGroupTopicPartitions)
    assert committed.group_id == group
    assert len(committed.topic_partitions) == 2, committed.topic_partitions
    assert all(tp.topic == topic for tp in committed.topic_partitions)
    assert any(tp.offset > 0 for tp in committed.topic_partitions)

    to_zero = [TopicPartition(tp.topic, tp.partition, 0) for tp in committed.topic_partitions]
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, to_zero)])
    result = altered[group].result(timeout=WAIT_S)
    assert isinstance(result, ConsumerGroupTopicPartitions)
    assert result.group_id == group
    assert len(result.topic_partitions) == 2
    assert all(tp.topic == topic and tp.offset == 0 for tp in result.topic_partitions)

    named = [TopicPartition(tp.topic, tp.partition) for tp in result.topic_partitions]
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, named)])
    again = listed[group].result(timeout=WAIT_S)
    assert isinstance(again, ConsumerGroupTopicPartitions)
    assert again.group_id == group
    assert len(again.topic_partitions) == 2
    assert all(tp.topic == topic and tp.offset == 0 for tp in again.topic_partitions)


def test_basic_operations(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    num_partitions = 2
    topic_config = {"compression.type": "gzip"}
    conf = {"num_partitions": num_partitions, "config": topic_config, "replication_factor": 1}

    validated = create_topic(admin, conf, validate_only=True)
    our_topic = create_topic(admin, conf, validate_only=False)
    assert validated not in admin.list_topics(timeout=WAIT_S).topics

    verify_topic_metadata(admin, {our_topic: num_partitions})
    verify_topic_metadata(admin, {our_topic: num_partitions}, topic=our_topic)
    verify_topic_metadata(admin, {our_topic: num_partitions}, our_topic)

    num_partitions += 3
    futures = admin.create_partitions(
        [NewPartitions(our_topic, new_total_count=num_partitions)], operation_timeout=10.0
    )
    for future in futures.values():
        future.result(timeout=WAIT_S)
    verify_topic_metadata(admin, {our_topic: num_partitions})

    partitions = produce(bootstrap, our_topic)
    assert len(set(partitions)) == 2
    for group in (GROUP_1, GROUP_2):
        read = consume_messages(bootstrap, our_topic, group, 2)
        assert sorted(m.partition() for m in read) == sorted(partitions)
        assert all(m.headers() == CONSUMED_HEADERS for m in read), [m.headers() for m in read]

    groups = {group.id for group in admin.list_groups(timeout=10)}
    assert {GROUP_1, GROUP_2} <= groups, groups
    assert GROUP_1 in {group.id for group in admin.list_groups(GROUP_1)}
    assert GROUP_2 in {group.id for group in admin.list_groups(GROUP_2)}

    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=WAIT_S)
    assert {GROUP_1, GROUP_2} <= {group.group_id for group in listed.valid}, listed.valid
    stable = admin.list_consumer_groups(
        request_timeout=10, states={ConsumerGroupState.STABLE}
    ).result(timeout=WAIT_S)
    assert isinstance(stable.valid, list)
    assert not stable.valid, stable.valid

    resource = ConfigResource(ResourceType.TOPIC, our_topic)
    verify_config(topic_config, admin.describe_configs([resource])[resource].result(WAIT_S))
    topic_config["file.delete.delay.ms"] = 12345
    topic_config["compression.type"] = "snappy"
    for key, value in topic_config.items():
        resource.set_config(key, value)
    admin.alter_configs([resource])[resource].result(timeout=WAIT_S)
    verify_config(topic_config, admin.describe_configs([resource])[resource].result(WAIT_S))

    verify_consumer_group_offsets_operations(admin, our_topic, GROUP_1)

    futures = admin.delete_consumer_groups([GROUP_1, GROUP_2], request_timeout=10)
    futures[GROUP_1].result(timeout=WAIT_S)
    futures[GROUP_2].result(timeout=WAIT_S)

    admin.delete_topics([our_topic])[our_topic].result(timeout=WAIT_S)
    wait_until(
        lambda: our_topic not in admin.list_topics(timeout=WAIT_S).topics,
        f"{our_topic} gone from Metadata",
        WAIT_S,
    )

    verify_admin_acls(admin, f"{our_topic}-acls", ACLS_GROUP, WAIT_S)
