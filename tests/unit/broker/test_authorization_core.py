"""Authorization of the broker-only APIs (refused before any epoch is compared), Fetch and
Metadata, with an in-memory authorizer: allowed answers as before, denied answers Kafka's error."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from types import SimpleNamespace

from kio.schema.write_txn_markers.v1 import request as markers_wire

from odradek.broker.authorization import authorized_operations
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.handlers import (
    fetch,
    leader_and_isr,
    metadata,
    stop_replica,
    update_metadata,
    write_txn_markers,
)
from odradek.broker.handlers.build import build
from odradek.broker.metadata_cache import MetadataCache, PartitionMetadata, TopicMetadata
from odradek.broker.replica_manager import FetchResult
from odradek.config.broker import BROKER_KEYS
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataRequest,
)
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from support.authorizer import ALICE, BROKER, MemoryAuthorizer, handler_context

Op = AclOperation
TOPIC = ResourceType.TOPIC
CLUSTER = ResourceType.CLUSTER
BROKER_EPOCH = 40
WRONG_EPOCH = 41


class Untouchable:
    """A replica manager that fails any test that reaches it."""

    def __getattr__(self, name):
        raise AssertionError(f"the handler used the replica manager ({name}) before authorizing")


def control_broker():
    return SimpleNamespace(
        broker_id=1,
        broker_epoch=BROKER_EPOCH,
        controller_epoch=3,
        zk=None,
        replica_manager=Untouchable(),
        metrics=None,
        topic_configs=None,
        config=None,
    )


def leader_and_isr_request(broker_epoch=WRONG_EPOCH):
    state = LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=3,
        leader=1,
        leader_epoch=9,
        isr=(1,),
        partition_epoch=1,
        replicas=(1,),
        adding_replicas=(),
        removing_replicas=(),
        is_new=False,
    )
    return LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=3,
        broker_epoch=broker_epoch,
        type_=0,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="t", topic_id=uuid.uuid4(), partition_states=(state,)
            ),
        ),
        live_leaders=(),
    )


def stop_replica_request():
    return StopReplicaRequest(
        controller_id=0,
        controller_epoch=3,
        broker_epoch=WRONG_EPOCH,
        topic_states=(
            StopReplicaTopicState(
                topic_name="t",
                partition_states=(
                    StopReplicaPartitionState(
                        partition_index=0, leader_epoch=9, delete_partition=True
                    ),
                ),
            ),
        ),
    )


def update_metadata_request():
    return UpdateMetadataRequest(
        controller_id=0,
        controller_epoch=3,
        broker_epoch=WRONG_EPOCH,
        topic_states=(),
        live_brokers=(),
    )


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


# -- broker-only APIs: CLUSTER_ACTION first, so a wrong epoch teaches an impostor nothing


def test_leader_and_isr_without_cluster_action_is_refused_before_the_broker_epoch():
    authorizer = MemoryAuthorizer()
    ctx = handler_context(control_broker(), 7, authorizer=authorizer)
    answer = run(leader_and_isr.handle(ctx, leader_and_isr_request()))
    assert answer.error_code == ErrorCode.cluster_authorization_failed
    assert [p.error_code for t in answer.topics for p in t.partition_errors] == [
        ErrorCode.cluster_authorization_failed
    ]
    assert authorizer.asked == [(str(ALICE), Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)]


def test_leader_and_isr_with_cluster_action_compares_the_epoch():
    ctx = handler_context(control_broker(), 7, authorizer=MemoryAuthorizer(), principal=BROKER)
    answer = run(leader_and_isr.handle(ctx, leader_and_isr_request()))
    assert answer.error_code == ErrorCode.stale_broker_epoch


def test_stop_replica_and_update_metadata_without_cluster_action_are_refused_first():
    for module, request in [
        (stop_replica, stop_replica_request()),
        (update_metadata, update_metadata_request()),
    ]:
        ctx = handler_context(control_broker(), 0, authorizer=MemoryAuthorizer())
        answer = run(module.handle(ctx, request))
        assert answer.error_code == ErrorCode.cluster_authorization_failed, module
        as_broker = handler_context(
            control_broker(), 0, authorizer=MemoryAuthorizer(), principal=BROKER
        )
        assert run(module.handle(as_broker, request)).error_code == ErrorCode.stale_broker_epoch


def test_a_granted_cluster_action_is_enough():
    authorizer = MemoryAuthorizer().allow(Op.CLUSTER_ACTION, CLUSTER)
    ctx = handler_context(control_broker(), 0, authorizer=authorizer)
    answer = run(update_metadata.handle(ctx, update_metadata_request()))
    assert answer.error_code == ErrorCode.stale_broker_epoch


def test_write_txn_markers_without_cluster_action_is_refused_for_every_partition():
    request = markers_wire.WriteTxnMarkersRequest(
        markers=(
            markers_wire.WritableTxnMarker(
                producer_id=7,
                producer_epoch=0,
                transaction_result=True,
                topics=(markers_wire.WritableTxnMarkerTopic(name="t", partition_indexes=(0, 1)),),
                coordinator_epoch=5,
            ),
        )
    )
    broker = control_broker()
    ctx = handler_context(broker, 1, authorizer=MemoryAuthorizer())
    answer = run(write_txn_markers.handle(ctx, request))
    assert [p.error_code for m in answer.markers for t in m.topics for p in t.partitions] == [
        ErrorCode.cluster_authorization_failed
    ] * 2


# -- Fetch


class FetchReplicas:
    def __init__(self):
        self.read: list[tuple[str, int]] = []

    async def fetch(self, wanted, **_):
        self.read += [(r.topic, r.partition) for r in wanted]
        return [FetchResult(r.topic, r.partition, high_watermark=10) for r in wanted]


def fetch_request(version: int, replica_id: int, topics: dict[str, list[int]]):
    request_type = schemas.request_schema(ApiKey.FETCH, version)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    return build(
        request_type,
        replica_id=replica_id,
        max_wait=timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            build(
                topic_type,
                topic=name,
                partitions=tuple(
                    build(
                        partition_type,
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 16,
                    )
                    for p in partitions
                ),
            )
            for name, partitions in topics.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def fetch_broker():
    return SimpleNamespace(
        replica_manager=FetchReplicas(),
        fetch_sessions=FetchSessionCache.of(),
        fetch_max_bytes=BROKER_KEYS["fetch.max.bytes"].default,
        metrics=None,
        client_quotas=None,
    )


def fetch_errors(answer):
    return {
        (t.topic, p.partition_index): p.error_code for t in answer.responses for p in t.partitions
    }


def test_a_consumer_fetch_reads_only_the_topics_it_may_read():
    broker = fetch_broker()
    authorizer = MemoryAuthorizer().allow(Op.READ, TOPIC, "mine")
    ctx = handler_context(broker, 12, authorizer=authorizer)
    answer = run(fetch.handle(ctx, fetch_request(12, -1, {"mine": [0], "theirs": [0, 1]})))
    assert fetch_errors(answer) == {
        ("mine", 0): ErrorCode.none,
        ("theirs", 0): ErrorCode.topic_authorization_failed,
        ("theirs", 1): ErrorCode.topic_authorization_failed,
    }
    assert broker.replica_manager.read == [("mine", 0)]


def test_a_follower_fetch_without_cluster_action_reads_nothing_and_makes_no_session():
    broker = fetch_broker()
    authorizer = MemoryAuthorizer().allow(Op.READ, TOPIC, "t")  # READ is not enough
    ctx = handler_context(broker, 12, authorizer=authorizer)
    answer = run(fetch.handle(ctx, fetch_request(12, 2, {"t": [0, 1]})))
    assert answer.error_code == ErrorCode.none and answer.session_id == 0
    assert set(fetch_errors(answer).values()) == {ErrorCode.topic_authorization_failed}
    assert broker.replica_manager.read == []
    assert authorizer.asked == [(str(ALICE), Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)]


def test_a_follower_fetch_with_cluster_action_reads_without_topic_checks():
    broker = fetch_broker()
    authorizer = MemoryAuthorizer()
    ctx = handler_context(broker, 12, authorizer=authorizer, principal=BROKER)
    answer = run(fetch.handle(ctx, fetch_request(12, 2, {"t": [0]})))
    assert fetch_errors(answer) == {("t", 0): ErrorCode.none}
    assert [a[1] for a in authorizer.asked] == [Op.CLUSTER_ACTION]


def test_fetch_without_an_authorizer_is_unchanged():
    broker = fetch_broker()
    ctx = handler_context(broker, 4, authorizer=None)
    answer = run(fetch.handle(ctx, fetch_request(4, -1, {"a": [0], "b": [0]})))
    assert set(fetch_errors(answer).values()) == {ErrorCode.none}


# -- Metadata


def metadata_broker(*names: str, auto_create=False):
    cache = MetadataCache(cluster_id="c")
    for name in names:
        cache.update_topic(
            TopicMetadata(name, uuid.uuid4(), {0: PartitionMetadata(0, 1, 0, (1,), (1,))})
        )
    config = SimpleNamespace(auto_create_topics_enable=auto_create)
    return SimpleNamespace(metadata=cache, config=config, zk=None)


def metadata_request(version: int, names=None, **flags):
    request_type = schemas.request_schema(ApiKey.METADATA, version)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    topic_type = getattr(topic_type, "__args__", (topic_type,))[0]
    fields = request_type.__dataclass_fields__
    values = {
        "topics": None
        if names is None
        else tuple(
            topic_type(
                **(
                    {"name": n, "topic_id": None}
                    if "topic_id" in topic_type.__dataclass_fields__
                    else {"name": n}
                )
            )
            for n in names
        ),
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    } | flags
    return request_type(**{k: v for k, v in values.items() if k in fields})


def metadata_answer(broker, version, authorizer, names=None, **flags):
    ctx = handler_context(broker, version, authorizer=authorizer, api_key=ApiKey.METADATA)
    return run(metadata.handle(ctx, metadata_request(version, names, **flags)))


def test_metadata_for_every_topic_leaves_out_those_not_describable():
    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "seen")
    answer = metadata_answer(metadata_broker("seen", "hidden"), 9, authorizer)
    assert [(t.name, t.error_code) for t in answer.topics] == [("seen", ErrorCode.none)]


def test_metadata_naming_a_topic_not_describable_answers_topic_authorization_failed():
    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "seen")
    broker = metadata_broker("seen", "hidden")
    answer = metadata_answer(broker, 12, authorizer, ["seen", "hidden", "absent"])
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("seen", ErrorCode.none),
        ("hidden", ErrorCode.topic_authorization_failed),
        # absent and not describable: the broker does not say it is absent
        ("absent", ErrorCode.topic_authorization_failed),
    ]
    hidden = answer.topics[1]
    assert hidden.partitions == () and hidden.topic_id in (None, uuid.UUID(int=0))


def test_metadata_auto_creation_needs_create_on_the_cluster_or_the_topic():
    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, TOPIC, "new")
    broker = metadata_broker(auto_create=True)
    answer = metadata_answer(broker, 9, authorizer, ["new"])
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("new", ErrorCode.topic_authorization_failed)
    ]
    asked = [(op, rtype) for _, op, rtype, _ in authorizer.asked]
    assert asked == [(Op.DESCRIBE, TOPIC), (Op.CREATE, CLUSTER), (Op.CREATE, TOPIC)]


def test_metadata_authorized_operations_when_asked():
    authorizer = (
        MemoryAuthorizer()
        .allow(Op.DESCRIBE, TOPIC, "t")
        .allow(Op.READ, TOPIC, "t")
        .allow(Op.DESCRIBE, CLUSTER)
    )
    broker = metadata_broker("t")
    answer = metadata_answer(
        broker,
        10,
        authorizer,
        ["t"],
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    assert answer.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)
    assert answer.cluster_authorized_operations == 1 << 8
    plain = metadata_answer(broker, 10, authorizer, ["t"])
    assert plain.topics[0].topic_authorized_operations == -2147483648
    assert plain.cluster_authorized_operations == -2147483648


def test_metadata_cluster_operations_without_describe_on_the_cluster_is_zero():
    authorizer = MemoryAuthorizer().allow(Op.ALTER, CLUSTER)
    answer = metadata_answer(
        metadata_broker(), 9, authorizer, [], include_cluster_authorized_operations=True
    )
    assert answer.cluster_authorized_operations == 0


def test_authorized_operations_without_an_authorizer_is_every_supported_operation():
    ctx = handler_context(SimpleNamespace(), 0, authorizer=None)
    expected = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # Kafka's Topic operations
    assert authorized_operations(ctx, TOPIC, "t") == expected


def test_metadata_by_topic_id_not_describable_names_the_id_but_not_the_topic():
    broker = metadata_broker("hidden")
    topic_id = broker.metadata.topic("hidden").topic_id
    request_type = schemas.request_schema(ApiKey.METADATA, 12)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0].__args__[0]
    request = request_type(
        topics=(topic_type(name=None, topic_id=topic_id),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    ctx = handler_context(broker, 12, authorizer=MemoryAuthorizer(), api_key=ApiKey.METADATA)
    [answer] = run(metadata.handle(ctx, request)).topics
    assert (answer.error_code, answer.name, answer.topic_id) == (
        ErrorCode.topic_authorization_failed,
        None,
        topic_id,
    )
