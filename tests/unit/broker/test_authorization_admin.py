"""Authorization of Produce, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers,
topic and config admin, the cluster APIs and DescribeCluster, with an in-memory authorizer: a
denied topic answers TOPIC_AUTHORIZATION_FAILED and is not touched, a denied cluster operation
CLUSTER_AUTHORIZATION_FAILED before anything is done or forwarded."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from datetime import timedelta
from types import SimpleNamespace

from odradek.broker.admin.topics import CreateTopicResult
from odradek.broker.handlers import (
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    elect_leaders,
    incremental_alter_configs,
    list_offsets,
    list_partition_reassignments,
    offset_for_leader_epoch,
    produce,
)
from odradek.broker.metadata_cache import (
    LiveBroker,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.replica_manager import OffsetResult, ProduceResult
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode as E
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType
from odradek.storage.records import Record, encode_batch
from support.authorizer import BROKER, MemoryAuthorizer, handler_context
from support.requests import entry_type, fill, request

TOPIC = ResourceType.TOPIC
CLUSTER = ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID


class Untouchable:
    def __getattr__(self, name):
        raise AssertionError(f"{name} was used though authorization failed")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def call(module, version, req, authorizer, broker=None, principal=None):
    broker = broker or SimpleNamespace(
        replica_manager=Untouchable(), controller=Untouchable(), metrics=None
    )
    extra = {"principal": principal} if principal is not None else {}
    ctx = handler_context(broker, version, authorizer=authorizer, **extra)
    return run(module.handle(ctx, req))


# -- Produce


class Appends:
    def __init__(self):
        self.appended: list[tuple[str, int]] = []

    async def append_records_then_wait(self, acks, entries, **_):
        self.appended += list(entries)
        return {tp: ProduceResult(base_offset=0) for tp in entries}, None


def produce_request(topics, *, transactional_id=None, transactional=False):
    batch = encode_batch(
        [Record(0, 1_700_000_000_000, b"k", b"v")],
        base_offset=0,
        producer_id=1 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
        is_transactional=transactional,
    )
    request_type = schemas.request_schema(ApiKey.PRODUCE, 9)
    topic_type = entry_type(request_type, "topic_data")
    partition_type = entry_type(topic_type, "partition_data")
    return fill(
        request_type,
        transactional_id=transactional_id,
        acks=1,
        topic_data=tuple(
            fill(topic_type, name=t, partition_data=(fill(partition_type, index=0, records=batch),))
            for t in topics
        ),
    )


def produce_errors(answer):
    return {
        (t.name, p.index): p.error_code for t in answer.responses for p in t.partition_responses
    }


def test_produce_appends_only_to_the_topics_it_may_write():
    replicas = Appends()
    broker = SimpleNamespace(replica_manager=replicas, metrics=None)
    authorizer = MemoryAuthorizer().allow(Op.WRITE, TOPIC, "mine")
    answer = call(produce, 9, produce_request(["mine", "theirs"]), authorizer, broker)
    assert produce_errors(answer) == {
        ("mine", 0): E.none,
        ("theirs", 0): E.topic_authorization_failed,
    }
    assert replicas.appended == [("mine", 0)]


def test_transactional_produce_needs_write_on_its_transactional_id():
    replicas = Appends()
    broker = SimpleNamespace(replica_manager=replicas, metrics=None)
    authorizer = MemoryAuthorizer().allow(Op.WRITE, TOPIC, "t")
    for transactional_id in (None, "tx"):
        req = produce_request(["t"], transactional_id=transactional_id, transactional=True)
        answer = call(produce, 9, req, authorizer, broker)
        assert produce_errors(answer) == {("t", 0): E.transactional_id_authorization_failed}
    assert replicas.appended == []
    authorizer.allow(Op.WRITE, TXN, "tx")
    req = produce_request(["t"], transactional_id="tx", transactional=True)
    assert produce_errors(call(produce, 9, req, authorizer, broker)) == {("t", 0): E.none}


# -- ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers


class Offsets:
    def __init__(self):
        self.asked: list[str] = []

    def list_offsets(self, topic, *_, **__):
        self.asked.append(topic)
        return OffsetResult(offset=3, timestamp=-1)

    def last_offset_for_leader_epoch(self, topic, *_):
        self.asked.append(topic)
        return OffsetResult(offset=3, leader_epoch=1)


def test_list_offsets_needs_describe_on_each_topic():
    replicas = Offsets()
    request_type = schemas.request_schema(ApiKey.LIST_OFFSETS, 7)
    topic_type = entry_type(request_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    req = fill(
        request_type,
        replica_id=-1,
        topics=tuple(
            fill(topic_type, name=t, partitions=(fill(partition_type, partition_index=0),))
            for t in ("seen", "hidden")
        ),
    )
    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "seen")
    answer = call(list_offsets, 7, req, authorizer, SimpleNamespace(replica_manager=replicas))
    got = [(t.name, t.partitions[0].error_code, t.partitions[0].offset) for t in answer.topics]
    assert got == [("seen", E.none, 3), ("hidden", E.topic_authorization_failed, -1)]
    assert replicas.asked == ["seen"]


def test_offset_for_leader_epoch_is_open_to_cluster_action_else_describe_per_topic():
    request_type = schemas.request_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)
    topic_type = entry_type(request_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    req = fill(
        request_type,
        replica_id=-1,
        topics=(fill(topic_type, topic="t", partitions=(fill(partition_type, partition=0),)),),
    )

    def error(authorizer, principal=None):
        broker = SimpleNamespace(replica_manager=Offsets())
        answer = call(offset_for_leader_epoch, 4, req, authorizer, broker, principal)
        return answer.topics[0].partitions[0].error_code

    assert error(MemoryAuthorizer()) == E.topic_authorization_failed
    assert error(MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "t")) == E.none
    assert error(MemoryAuthorizer().allow(Op.CLUSTER_ACTION, CLUSTER)) == E.none
    assert error(MemoryAuthorizer(), principal=BROKER) == E.none


def test_delete_records_and_describe_producers_refuse_topics_per_partition():
    records_type = schemas.request_schema(ApiKey.DELETE_RECORDS, 2)
    topic_type = entry_type(records_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    req = fill(
        records_type,
        topics=(fill(topic_type, name="t", partitions=(fill(partition_type, partition_index=0),)),),
    )
    broker = SimpleNamespace(replica_manager=Untouchable(), metadata=MetadataCache())
    answer = call(delete_records, 2, req, MemoryAuthorizer().allow(Op.READ, TOPIC, "t"), broker)
    assert answer.topics[0].partitions[0].error_code == E.topic_authorization_failed

    producers_type = schemas.request_schema(ApiKey.DESCRIBE_PRODUCERS, 0)
    topic_type = entry_type(producers_type, "topics")
    req = fill(producers_type, topics=(fill(topic_type, name="t", partition_indexes=(0, 1)),))
    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "t")
    answer = call(describe_producers, 0, req, authorizer, broker)
    assert [p.error_code for p in answer.topics[0].partitions] == [E.topic_authorization_failed] * 2


# -- topic admin


def admin_broker(*topics: str):
    cache = MetadataCache(cluster_id="c")
    for name in topics:
        cache.update_topic(
            TopicMetadata(name, uuid.uuid4(), {0: PartitionMetadata(0, 1, 0, (1,), (1,))})
        )
    return SimpleNamespace(zk=None, config=None, metadata=cache, broker_id=1, client_quotas=None)


def test_create_topics_needs_create_and_shows_configs_only_with_describe_configs():
    request_type = schemas.request_schema(ApiKey.CREATE_TOPICS, 7)
    topic_type = entry_type(request_type, "topics")
    req = fill(
        request_type,
        validate_only=True,
        topics=tuple(
            fill(topic_type, name=n, num_partitions=1, replication_factor=1) for n in ("a", "b")
        ),
    )
    authorizer = MemoryAuthorizer().allow(Op.CREATE, TOPIC, "a")
    answer = call(create_topics, 7, req, authorizer, admin_broker())
    a, b = answer.topics
    assert (b.name, b.error_code, b.error_message) == (
        "b",
        E.topic_authorization_failed,
        "Authorization failed.",
    )
    assert a.error_code != E.topic_authorization_failed  # asked of the admin (no cluster here)
    assert a.topic_config_error_code == E.topic_authorization_failed
    assert (a.num_partitions, a.replication_factor) == (-1, -1)
    cluster_wide = MemoryAuthorizer().allow(Op.CREATE, CLUSTER)
    answer = call(create_topics, 7, req, cluster_wide, admin_broker())
    assert E.topic_authorization_failed not in [t.error_code for t in answer.topics]


class CreatesOne:
    """A TopicAdmin whose create_topics answers each topic created, with one partition."""

    def __init__(self, topic_id: uuid.UUID):
        self.topic_id = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")

    def __call__(self, zk, config):
        return self

    async def create_topics(self, topics, validate_only, quota, slices=None):
        return [
            CreateTopicResult(
                t.name, topic_id=self.topic_id, num_partitions=1, replication_factor=1
            )
            for t in topics
        ]


def test_create_topics_without_describe_configs_answers_once_leaders_are_known(monkeypatch):
    """Hiding the counts (no DESCRIBE_CONFIGS) must not make the wait for leaders compare the
    metadata with -1 partitions: that waited the whole timeout, then REQUEST_TIMED_OUT."""
    broker = admin_broker("a")
    monkeypatch.setattr(
        create_topics, "TopicAdmin", CreatesOne(broker.metadata.topic("a").topic_id)
    )
    request_type = schemas.request_schema(ApiKey.CREATE_TOPICS, 7)
    req = fill(
        request_type,
        timeout=timedelta(seconds=30),
        topics=(fill(entry_type(request_type, "topics"), name="a", num_partitions=1),),
    )
    authorizer = MemoryAuthorizer().allow(Op.CREATE, TOPIC, "a")
    started = time.monotonic()
    (a,) = call(create_topics, 7, req, authorizer, broker).topics
    assert time.monotonic() - started < 5
    assert (a.error_code, a.topic_config_error_code) == (E.none, E.topic_authorization_failed)
    assert (a.num_partitions, a.replication_factor) == (-1, -1)


def test_delete_topics_needs_delete_and_hides_the_name_of_an_id_not_describable():
    broker = admin_broker("t", "u")
    hidden_id = broker.metadata.topic("u").topic_id
    request_type = schemas.request_schema(ApiKey.DELETE_TOPICS, 6)
    state_type = entry_type(request_type, "topics")
    req = fill(
        request_type,
        topics=(
            fill(state_type, name="t", topic_id=None),
            fill(state_type, name=None, topic_id=hidden_id),
        ),
    )
    broker.config = None
    answer = call(delete_topics, 6, req, MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "t"), broker)
    assert [(r.name, r.error_code) for r in answer.responses] == [
        ("t", E.topic_authorization_failed),
        (None, E.topic_authorization_failed),
    ]
    assert answer.responses[1].topic_id == hidden_id


def test_create_partitions_needs_alter_on_each_topic():
    request_type = schemas.request_schema(ApiKey.CREATE_PARTITIONS, 3)
    topic_type = entry_type(request_type, "topics")
    req = fill(request_type, topics=(fill(topic_type, name="t", count=3, assignments=None),))
    answer = call(create_partitions, 3, req, MemoryAuthorizer(), admin_broker("t"))
    assert [(r.name, r.error_code) for r in answer.results] == [("t", E.topic_authorization_failed)]


# -- configs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker


def config_request(api_key, version, resources):
    request_type = schemas.request_schema(api_key, version)
    resource_type = entry_type(request_type, "resources")
    return fill(
        request_type,
        resources=tuple(
            fill(resource_type, resource_type=t, resource_name=n, configuration_keys=None)
            if api_key == ApiKey.DESCRIBE_CONFIGS
            else fill(resource_type, resource_type=t, resource_name=n)
            for t, n in resources
        ),
    )


def test_the_config_apis_refuse_each_resource_not_authorized():
    resources = [(2, "t"), (2, "u"), (4, "1")]
    authorizer = (
        MemoryAuthorizer()
        .allow(Op.DESCRIBE_CONFIGS, TOPIC, "t")
        .allow(Op.ALTER_CONFIGS, TOPIC, "t")
    )
    for module, api_key, version, field in [
        (describe_configs, ApiKey.DESCRIBE_CONFIGS, 4, "results"),
        (alter_configs, ApiKey.ALTER_CONFIGS, 2, "responses"),
        (incremental_alter_configs, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, "responses"),
    ]:
        req = config_request(api_key, version, resources)
        answer = call(module, version, req, authorizer, admin_broker())
        errors = [(r.resource_name, r.error_code) for r in getattr(answer, field)]
        assert errors[1:] == [
            ("u", E.topic_authorization_failed),
            ("1", E.cluster_authorization_failed),
        ], module.__name__
        assert errors[0][1] not in (E.topic_authorization_failed, E.cluster_authorization_failed)


# -- cluster APIs: refused before anything is done or forwarded


def test_the_cluster_apis_need_their_cluster_operation():
    cases = [
        (elect_leaders, request(ApiKey.ELECT_LEADERS, 2, topic_partitions=None), Op.ALTER),
        (
            alter_partition_reassignments,
            request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0),
            Op.ALTER,
        ),
        (
            list_partition_reassignments,
            request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, topics=None),
            Op.DESCRIBE,
        ),
        (describe_log_dirs, request(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None), Op.DESCRIBE),
    ]
    for module, req, operation in cases:
        wrong = Op.DESCRIBE if operation == Op.ALTER else Op.ALTER
        answer = call(module, req.__version__, req, MemoryAuthorizer().allow(wrong, CLUSTER))
        assert answer.error_code == E.cluster_authorization_failed, module.__name__

    request_type = schemas.request_schema(ApiKey.ALTER_REPLICA_LOG_DIRS, 2)
    dir_type = entry_type(request_type, "dirs")
    topic_type = entry_type(dir_type, "topics")
    req = fill(
        request_type,
        dirs=(fill(dir_type, path="/d", topics=(fill(topic_type, name="t", partitions=(0,)),)),),
    )
    broker = SimpleNamespace(replica_manager=SimpleNamespace(log_dir_moves=Untouchable()))
    answer = call(alter_replica_log_dirs, 2, req, MemoryAuthorizer(), broker)
    assert answer.results[0].partitions[0].error_code == E.cluster_authorization_failed


# -- DescribeCluster


def cluster_broker():
    cache = MetadataCache(cluster_id="odradek-1")
    cache.update_brokers(
        [
            LiveBroker(2, {"PLAINTEXT": HostPort("h2", 9092)}),
            LiveBroker(1, {"PLAINTEXT": HostPort("h1", 9092)}, rack="r1"),
            LiveBroker(3, {"OTHER": HostPort("h3", 9093)}),
        ]
    )
    return SimpleNamespace(metadata=cache)


def test_describe_cluster_lists_the_brokers_of_the_listener_and_operations_when_asked():
    req = request(ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True)
    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, CLUSTER).allow(Op.ALTER, CLUSTER)
    answer = call(describe_cluster, 1, req, authorizer, cluster_broker())
    assert answer.error_code == E.none and answer.cluster_id == "odradek-1"
    assert sorted((b.broker_id, b.host, b.rack) for b in answer.brokers) == [
        (1, "h1", "r1"),
        (2, "h2", None),
    ]
    assert answer.controller_id == 1
    assert answer.cluster_authorized_operations == (1 << 7) | (1 << 8)
    no_describe = call(describe_cluster, 1, req, MemoryAuthorizer(), cluster_broker())
    assert no_describe.error_code == E.none and no_describe.cluster_authorized_operations == 0
    plain = request(ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=False)
    answer = call(describe_cluster, 0, plain, None, cluster_broker())
    assert answer.cluster_authorized_operations == -2147483648


def test_describe_cluster_for_the_controller_endpoint_is_a_mismatch():
    for endpoint_type, error in [(2, E.mismatched_endpoint_type), (9, E.unsupported_endpoint_type)]:
        req = request(
            ApiKey.DESCRIBE_CLUSTER,
            1,
            include_cluster_authorized_operations=False,
            endpoint_type=endpoint_type,
        )
        assert call(describe_cluster, 1, req, None, cluster_broker()).error_code == error
