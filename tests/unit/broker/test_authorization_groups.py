"""Authorization of the group, offset and transaction APIs with an in-memory authorizer: a denied
group or transactional id is refused with Kafka's error before the coordinator is asked, and a
denied topic answers TOPIC_AUTHORIZATION_FAILED (or vanishes) while the others are served."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from odradek.broker.admin.producer_ids import InitProducerIdResult
from odradek.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    consumer_group_describe,
    consumer_group_heartbeat,
    end_txn,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_transactions,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
    txn_offset_commit,
)
from odradek.errors import ErrorCode as E
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType
from odradek.transactions.result import TransactionListing
from support.authorizer import MemoryAuthorizer, handler_context
from support.coordinator_memory import MemoryLog
from support.offset_handler_doubles import TOPIC, Metadata, coordinator
from support.requests import entry_type, fill, request

GROUP = ResourceType.GROUP
TOPIC_TYPE = ResourceType.TOPIC
TXN = ResourceType.TRANSACTIONAL_ID
CLUSTER = ResourceType.CLUSTER


class Untouchable:
    """A coordinator that fails the test if the handler asks it anything."""

    def __getattr__(self, name):
        raise AssertionError(f"the coordinator was asked ({name}) though authorization failed")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def call(module, version, req, authorizer, **broker):
    values = {"groups": Untouchable(), "transactions": Untouchable(), "producer_ids": None}
    ctx = handler_context(SimpleNamespace(**(values | broker)), version, authorizer=authorizer)
    return run(module.handle(ctx, req))


# -- FindCoordinator


def test_find_coordinator_needs_describe_on_the_group_or_transactional_id():
    denied = MemoryAuthorizer()
    v3 = call(find_coordinator, 3, request(ApiKey.FIND_COORDINATOR, 3, key="g"), denied)
    assert (v3.error_code, v3.node_id, v3.host, v3.port) == (
        E.group_authorization_failed,
        -1,
        "",
        -1,
    )
    txn = call(
        find_coordinator, 3, request(ApiKey.FIND_COORDINATOR, 3, key="tx", key_type=1), denied
    )
    assert txn.error_code == E.transactional_id_authorization_failed
    v4 = call(
        find_coordinator,
        4,
        request(ApiKey.FIND_COORDINATOR, 4, coordinator_keys=("a", "b")),
        denied,
    )
    assert [c.error_code for c in v4.coordinators] == [E.group_authorization_failed] * 2


# -- the classic group protocol and KIP-848's heartbeat: READ on the group


def test_the_group_membership_apis_need_read_on_the_group():
    denied = MemoryAuthorizer().allow(Op.DESCRIBE, GROUP, "g")  # DESCRIBE is not READ
    cases = [
        (join_group, 9, request(ApiKey.JOIN_GROUP, 9, group_id="g", member_id="m")),
        (sync_group, 5, request(ApiKey.SYNC_GROUP, 5, group_id="g")),
        (heartbeat, 4, request(ApiKey.HEARTBEAT, 4, group_id="g")),
        (leave_group, 2, request(ApiKey.LEAVE_GROUP, 2, group_id="g", member_id="m")),
        (leave_group, 5, request(ApiKey.LEAVE_GROUP, 5, group_id="g")),
        (
            consumer_group_heartbeat,
            0,
            request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id="g", member_epoch=0),
        ),
    ]
    for module, version, req in cases:
        answer = call(module, version, req, denied)
        assert answer.error_code == E.group_authorization_failed, module.__name__
    join = call(*cases[0][:2], cases[0][2], denied)
    assert join.member_id == "m"
    leave = call(*cases[4][:2], cases[4][2], denied)
    assert leave.members == ()


def test_consumer_group_heartbeat_needs_describe_on_the_subscribed_topics():
    authorizer = MemoryAuthorizer().allow(Op.READ, GROUP, "g").allow(Op.DESCRIBE, TOPIC_TYPE, "a")
    req = request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id="g",
        member_epoch=0,
        subscribed_topic_names=("a", "secret", "b"),
    )
    answer = call(consumer_group_heartbeat, 0, req, authorizer)
    assert answer.error_code == E.topic_authorization_failed
    assert answer.error_message == "The following topic names are not authorized: b, secret"


def test_consumer_group_describe_refuses_groups_not_describable():
    req = request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=("g",))
    answer = call(consumer_group_describe, 0, req, MemoryAuthorizer())
    assert [g.error_code for g in answer.groups] == [E.group_authorization_failed]


# -- offsets, over a real coordinator


def commit_request(version, group, topics):
    request_type = schemas.request_schema(ApiKey.OFFSET_COMMIT, version)
    topic_type = entry_type(request_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    return fill(
        request_type,
        group_id=group,
        generation_id_or_member_epoch=-1,
        topics=tuple(
            fill(
                topic_type,
                name=name,
                partitions=(fill(partition_type, partition_index=0, committed_offset=5),),
            )
            for name in topics
        ),
    )


def offset_fetch_request(version, group, topics):
    request_type = schemas.request_schema(ApiKey.OFFSET_FETCH, version)
    group_type = entry_type(request_type, "groups")
    topic_type = entry_type(group_type, "topics")
    asked = None
    if topics is not None:
        asked = tuple(fill(topic_type, name=t, partition_indexes=(0,)) for t in topics)
    return fill(request_type, groups=(fill(group_type, group_id=group, topics=asked),))


async def offsets_flow():
    groups = await coordinator(MemoryLog())

    async def handle(module, version, req, authorizer):
        broker = SimpleNamespace(groups=groups, metadata=Metadata())
        ctx = handler_context(broker, version, authorizer=authorizer)
        return await module.handle(ctx, req)

    everyone = MemoryAuthorizer(super_users={"User:alice"})
    await handle(offset_commit, 9, commit_request(9, "g", [TOPIC]), everyone)

    # OffsetCommit: READ on the group, then READ on each topic
    denied = await handle(offset_commit, 9, commit_request(9, "g", [TOPIC]), MemoryAuthorizer())
    assert [p.error_code for t in denied.topics for p in t.partitions] == [
        E.group_authorization_failed
    ]
    reader = MemoryAuthorizer().allow(Op.READ, GROUP, "g")
    mixed = await handle(offset_commit, 9, commit_request(9, "g", [TOPIC, "other"]), reader)
    assert [(t.name, t.partitions[0].error_code) for t in mixed.topics] == [
        (TOPIC, E.topic_authorization_failed),
        ("other", E.topic_authorization_failed),
    ]
    reader.allow(Op.READ, TOPIC_TYPE, TOPIC)
    mixed = await handle(offset_commit, 9, commit_request(9, "g", [TOPIC, "other"]), reader)
    assert [(t.name, t.partitions[0].error_code) for t in mixed.topics] == [
        (TOPIC, E.none),
        ("other", E.topic_authorization_failed),
    ]

    # OffsetFetch: DESCRIBE on the group, DESCRIBE on each topic
    no_group = await handle(offset_fetch, 9, offset_fetch_request(9, "g", None), reader)
    assert no_group.groups[0].error_code == E.group_authorization_failed
    viewer = MemoryAuthorizer().allow(Op.DESCRIBE, GROUP, "g")
    every = await handle(offset_fetch, 9, offset_fetch_request(9, "g", None), viewer)
    assert every.groups[0].error_code == E.none and every.groups[0].topics == ()
    named = await handle(offset_fetch, 9, offset_fetch_request(9, "g", [TOPIC]), viewer)
    partition = named.groups[0].topics[0].partitions[0]
    assert (partition.error_code, partition.committed_offset) == (E.topic_authorization_failed, -1)
    viewer.allow(Op.DESCRIBE, TOPIC_TYPE, TOPIC)
    every = await handle(offset_fetch, 9, offset_fetch_request(9, "g", None), viewer)
    assert [(t.name, t.partitions[0].committed_offset) for t in every.groups[0].topics] == [
        (TOPIC, 5)
    ]
    v1 = offset_fetch.handle(
        handler_context(SimpleNamespace(groups=groups), 1, authorizer=MemoryAuthorizer()),
        fill(
            schemas.request_schema(ApiKey.OFFSET_FETCH, 1),
            group_id="g",
            topics=(
                fill(
                    entry_type(schemas.request_schema(ApiKey.OFFSET_FETCH, 1), "topics"),
                    name=TOPIC,
                    partition_indexes=(0,),
                ),
            ),
        ),
    )
    v1 = await v1
    assert v1.topics[0].partitions[0].error_code == E.group_authorization_failed

    # OffsetDelete: DELETE on the group, READ on each topic
    delete_type = schemas.request_schema(ApiKey.OFFSET_DELETE, 0)
    topic_type = entry_type(delete_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    delete = fill(
        delete_type,
        group_id="g",
        topics=(
            fill(topic_type, name=TOPIC, partitions=(fill(partition_type, partition_index=0),)),
        ),
    )
    refused = await handle(offset_delete, 0, delete, reader)
    assert (refused.error_code, refused.topics) == (E.group_authorization_failed, ())
    deleter = MemoryAuthorizer().allow(Op.DELETE, GROUP, "g")
    no_topic = await handle(offset_delete, 0, delete, deleter)
    assert no_topic.topics[0].partitions[0].error_code == E.topic_authorization_failed
    kept = await handle(offset_fetch, 9, offset_fetch_request(9, "g", [TOPIC]), everyone)
    assert kept.groups[0].topics[0].partitions[0].committed_offset == 5


def test_offset_commit_fetch_and_delete_authorize_the_group_then_each_topic():
    run(offsets_flow())


# -- transactions


def test_init_producer_id_needs_write_on_the_transactional_id_or_an_idempotent_right():
    txn = request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id="tx", producer_id=-1)
    answer = call(init_producer_id, 4, txn, MemoryAuthorizer())
    assert (answer.error_code, answer.producer_id) == (E.transactional_id_authorization_failed, -1)
    idempotent = request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, producer_id=-1)
    answer = call(init_producer_id, 4, idempotent, MemoryAuthorizer())
    assert answer.error_code == E.cluster_authorization_failed

    class Ids:
        async def init_producer_id(self, transactional_id):
            return InitProducerIdResult(E.none, producer_id=7, producer_epoch=0)

    for authorizer in (
        MemoryAuthorizer().allow(Op.IDEMPOTENT_WRITE, CLUSTER),
        MemoryAuthorizer().allow(Op.WRITE, TOPIC_TYPE, "any-topic"),  # KIP-679
    ):
        answer = call(init_producer_id, 4, idempotent, authorizer, producer_ids=Ids())
        assert (answer.error_code, answer.producer_id) == (E.none, 7)


def test_end_txn_and_add_offsets_need_write_on_the_transactional_id_then_read_on_the_group():
    end = request(ApiKey.END_TXN, 3, transactional_id="tx", committed=True)
    assert call(end_txn, 3, end, MemoryAuthorizer()).error_code == (
        E.transactional_id_authorization_failed
    )
    add = request(ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id="tx", group_id="g")
    assert call(add_offsets_to_txn, 3, add, MemoryAuthorizer()).error_code == (
        E.transactional_id_authorization_failed
    )
    writer = MemoryAuthorizer().allow(Op.WRITE, TXN, "tx")
    assert call(add_offsets_to_txn, 3, add, writer).error_code == E.group_authorization_failed


def add_partitions_request(topics):
    request_type = schemas.request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    topic_type = entry_type(request_type, "v3_and_below_topics")
    return fill(
        request_type,
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=1,
        v3_and_below_topics=tuple(fill(topic_type, name=t, partitions=(0,)) for t in topics),
    )


def add_partitions_errors(answer):
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def test_add_partitions_to_txn_needs_write_on_the_transactional_id_and_each_topic():
    topics = {
        "t": SimpleNamespace(partitions={0: None}),
        "u": SimpleNamespace(partitions={0: None}),
    }
    metadata = SimpleNamespace(topic=topics.get)
    req = add_partitions_request(["t", "u", "__consumer_offsets"])
    answer = call(add_partitions_to_txn, 3, req, MemoryAuthorizer(), metadata=metadata)
    assert set(add_partitions_errors(answer).values()) == {E.transactional_id_authorization_failed}
    writer = (
        MemoryAuthorizer()
        .allow(Op.WRITE, TXN, "tx")
        .allow(Op.WRITE, TOPIC_TYPE, "t")
        .allow(Op.WRITE, TOPIC_TYPE, "__consumer_offsets")  # internal: never writable here
    )
    answer = call(add_partitions_to_txn, 3, req, writer, metadata=metadata)
    assert add_partitions_errors(answer) == {
        ("t", 0): E.operation_not_attempted,
        ("u", 0): E.topic_authorization_failed,
        ("__consumer_offsets", 0): E.topic_authorization_failed,
    }


def test_txn_offset_commit_checks_the_transactional_id_then_the_group():
    request_type = schemas.request_schema(ApiKey.TXN_OFFSET_COMMIT, 3)
    topic_type = entry_type(request_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    req = fill(
        request_type,
        transactional_id="tx",
        group_id="g",
        topics=(fill(topic_type, name="t", partitions=(fill(partition_type, partition_index=0),)),),
    )

    def errors(authorizer):
        answer = call(txn_offset_commit, 3, req, authorizer)
        return [p.error_code for t in answer.topics for p in t.partitions]

    assert errors(MemoryAuthorizer()) == [E.transactional_id_authorization_failed]
    assert errors(MemoryAuthorizer().allow(Op.WRITE, TXN, "tx")) == [E.group_authorization_failed]
    allowed = MemoryAuthorizer().allow(Op.WRITE, TXN, "tx").allow(Op.READ, GROUP, "g")
    assert errors(allowed) == [E.topic_authorization_failed]


def test_list_transactions_lists_only_describable_transactional_ids():
    class Transactions:
        async def list_transactions(self, *_):
            listings = [TransactionListing("a", 1, "Ongoing"), TransactionListing("b", 2, "Empty")]
            return E.none, listings, []

    authorizer = MemoryAuthorizer().allow(Op.DESCRIBE, TXN, "b")
    answer = call(
        list_transactions,
        1,
        request(ApiKey.LIST_TRANSACTIONS, 1),
        authorizer,
        transactions=Transactions(),
    )
    assert [s.transactional_id for s in answer.transaction_states] == ["b"]
