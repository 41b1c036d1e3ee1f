"""Transactional offsets on a real 3-broker cluster with librdkafka (confluent-kafka): a consumer's
offsets sent with ``send_offsets_to_transaction`` become the group's committed offsets when the
transaction commits and not when it aborts; while it is open, OffsetFetch with require_stable is
UNSTABLE_OFFSET_COMMIT (and librdkafka's ``committed()`` waits it out), without it the last
committed offsets; after kill -9 of the group coordinator with offsets pending, the new
coordinator loads them from the log as pending and the commit marker makes them committed."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import BrokerConnection
from odradek.coordinator.partitioner import partition_for
from odradek.errors import ErrorCode, OdradekError
from odradek.local import cluster
from odradek.local.cluster import pid_alive
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

WAIT_S = 30.0
OFFSETS_PARTITIONS = 3
PARTITIONS = (0, 1, 2)
OVERRIDES = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory, local_cluster):
    data_dir = tmp_path_factory.mktemp("txn-offsets")
    with local_cluster(data_dir, brokers=3, broker_overrides=OVERRIDES) as state:
        state.data_dir = data_dir  # for a broker's restart
        yield state


# -- the wire, through odradek's client ---------------------------------------------------------


async def _send(host: str, port: int, request):
    connection = await BrokerConnection.open(host, port)
    try:
        return await connection.send(request, timeout_s=WAIT_S)
    finally:
        await connection.close()


def call(host: str, port: int, request):
    return asyncio.run(_send(host, port, request))


def coordinator_of(bootstrap: str, group: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    def found():
        request = schemas.request_schema(ApiKey.FIND_COORDINATOR, 3)(key=group, key_type=0)
        response = call(host, int(port), request)
        return (response.host, response.port) if response.error_code == ErrorCode.none else None

    return wait_until(found, f"the coordinator of {group}", WAIT_S, poll_s=0.2)


def offset_fetch(bootstrap: str, group: str, topic: str, *, stable: bool) -> dict[int, tuple]:
    """OffsetFetch v8 at the group's coordinator: partition -> (offset, error)."""
    request_type = schemas.request_schema(ApiKey.OFFSET_FETCH, 8)
    group_type = request_type.__dataclass_fields__["groups"].type.__args__[0]
    topics_type = group_type.__dataclass_fields__["topics"].type.__args__[0].__args__[0]
    request = request_type(
        groups=(
            group_type(
                group_id=group, topics=(topics_type(name=topic, partition_indexes=PARTITIONS),)
            ),
        ),
        require_stable=stable,
    )
    response = call(*coordinator_of(bootstrap, group), request)
    answer = response.groups[0]
    assert answer.error_code == ErrorCode.none
    return {
        p.partition_index: (p.committed_offset, p.error_code)
        for t in answer.topics
        for p in t.partitions
    }


# -- clients ---------------------------------------------------------------------------------------


def create_topics(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, len(PARTITIONS)) for t in topics]).values():
        future.result(timeout=WAIT_S)

    def led() -> bool:
        metadata = admin.list_topics(timeout=WAIT_S).topics
        return all(
            t in metadata
            and len(metadata[t].partitions) == len(PARTITIONS)
            and all(p.leader >= 0 for p in metadata[t].partitions.values())
            for t in topics
        )

    wait_until(led, f"leaders for {topics}", WAIT_S, poll_s=0.2)


def member(bootstrap: str, group: str, topic: str, protocol: str = "classic") -> Consumer:
    """A consumer of the group (``group.protocol``) with every partition of ``topic``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])

    def assigned() -> bool:
        consumer.poll(0.2)
        return len(consumer.assignment()) == len(PARTITIONS)

    try:
        wait_until(assigned, f"{group} to get {topic}", WAIT_S, poll_s=0.01)
    except BaseException:
        consumer.close()  # a consumer left open outlives the test and its cluster
        raise
    return consumer


def transactional_producer(bootstrap: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(WAIT_S)
    return producer


def send_offsets(producer: Producer, consumer: Consumer, topic: str, offset: int) -> None:
    """A transaction: one output record and the consumer's offsets at ``offset``."""
    producer.begin_transaction()
    producer.produce(f"{topic}-out", b"result")
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, p, offset) for p in PARTITIONS],
        consumer.consumer_group_metadata(),
        WAIT_S,
    )


def committed(consumer: Consumer, topic: str, timeout_s: float = WAIT_S) -> dict[int, int]:
    found = consumer.committed([TopicPartition(topic, p) for p in PARTITIONS], timeout_s)
    return {tp.partition: tp.offset for tp in found}


def everything(offset: int) -> dict[int, int]:
    return dict.fromkeys(PARTITIONS, offset)


# -- the proofs ------------------------------------------------------------------------------------


def test_committed_with_the_transaction_dropped_with_its_abort_unstable_while_open(txn_cluster):
    bootstrap = txn_cluster.bootstrap_servers
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic, f"{topic}-out")
    consumer = member(bootstrap, group, topic)
    producer = transactional_producer(bootstrap)
    try:
        send_offsets(producer, consumer, topic, 5)
        producer.commit_transaction(WAIT_S)
        assert committed(consumer, topic) == everything(5)

        send_offsets(producer, consumer, topic, 9)
        producer.abort_transaction(WAIT_S)
        assert committed(consumer, topic) == everything(5)

        send_offsets(producer, consumer, topic, 12)  # left open for now
        unstable = (-1, ErrorCode.unstable_offset_commit)
        assert offset_fetch(bootstrap, group, topic, stable=True) == dict.fromkeys(
            PARTITIONS, unstable
        )
        assert offset_fetch(bootstrap, group, topic, stable=False) == dict.fromkeys(
            PARTITIONS, (5, ErrorCode.none)
        )
        with pytest.raises(KafkaException):  # librdkafka retries UNSTABLE_OFFSET_COMMIT
            committed(consumer, topic, timeout_s=2)
        waited: dict[str, object] = {}
        waiter = threading.Thread(
            target=lambda: waited.update(offsets=committed(consumer, topic)), daemon=True
        )
        waiter.start()
        producer.commit_transaction(WAIT_S)
        waiter.join(WAIT_S)
        assert waited.get("offsets") == everything(12)
        assert offset_fetch(bootstrap, group, topic, stable=True) == dict.fromkeys(
            PARTITIONS, (12, ErrorCode.none)
        )
    finally:
        consumer.close()
        producer.flush(5)


def test_a_kip_848_members_offsets_commit_with_the_transaction(txn_cluster):
    """librdkafka's ``group.protocol=consumer``: the group metadata names a KIP-848 member and
    its epoch, which the consumer group validates."""
    bootstrap = txn_cluster.bootstrap_servers
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic, f"{topic}-out")
    consumer = member(bootstrap, group, topic, "consumer")
    producer = transactional_producer(bootstrap)
    try:
        send_offsets(producer, consumer, topic, 4)
        producer.commit_transaction(WAIT_S)
        assert committed(consumer, topic) == everything(4)
        send_offsets(producer, consumer, topic, 8)
        producer.abort_transaction(WAIT_S)
        assert committed(consumer, topic) == everything(4)
    finally:
        consumer.close()
        producer.flush(5)


def txn_offset_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, tuple], **fields):
    """TxnOffsetCommit v3 at the group's coordinator, built by hand: partition -> error."""
    request_type = schemas.request_schema(ApiKey.TXN_OFFSET_COMMIT, 3)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    values = {
        "transactional_id": "by-hand",
        "group_id": group,
        "producer_id": 1 << 40,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        **fields,
    }
    partitions = tuple(
        partition_type(
            partition_index=p,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata=metadata,
        )
        for p, (offset, metadata) in offsets.items()
    )
    request = request_type(**values, topics=(topic_type(name=topic, partitions=partitions),))
    response = call(*coordinator_of(bootstrap, group or "any"), request)
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def test_bad_requests_on_the_wire_get_kafka_errors_and_a_fenced_epoch_is_refused(txn_cluster):
    bootstrap = txn_cluster.bootstrap_servers
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic)
    ok = {0: (1, ""), 1: (1, "")}
    assert txn_offset_commit(bootstrap, "", topic, ok) == dict.fromkeys(
        (0, 1), ErrorCode.invalid_group_id
    )
    assert txn_offset_commit(bootstrap, group, topic, ok, generation_id=3) == dict.fromkeys(
        (0, 1), ErrorCode.illegal_generation
    )
    assert txn_offset_commit(
        bootstrap, group, topic, {0: (1, "x" * 5000), 7: (1, ""), 1: (1, "")}
    ) == {
        0: ErrorCode.offset_metadata_too_large,
        7: ErrorCode.unknown_topic_or_partition,
        1: ErrorCode.none,
    }
    # This producer's transaction is never ended (nobody added the partition to it): its offset
    # stays pending, and the group's offset of partition 1 unstable.
    assert offset_fetch(bootstrap, group, topic, stable=True)[1] == (
        -1,
        ErrorCode.unstable_offset_commit,
    )
    pid = 1 << 40
    assert txn_offset_commit(bootstrap, group, topic, ok, producer_id=pid, producer_epoch=5) == {
        0: ErrorCode.none,
        1: ErrorCode.none,
    }
    assert txn_offset_commit(
        bootstrap, group, topic, ok, producer_id=pid, producer_epoch=4
    ) == dict.fromkeys((0, 1), ErrorCode.invalid_producer_epoch)


def test_pending_offsets_survive_a_failover_of_the_group_coordinator(txn_cluster):
    bootstrap = txn_cluster.bootstrap_servers
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, topic, f"{topic}-out")
    consumer = member(bootstrap, group, topic)
    producer = transactional_producer(bootstrap)
    victim = None
    try:
        send_offsets(producer, consumer, topic, 3)
        producer.commit_transaction(WAIT_S)
        send_offsets(producer, consumer, topic, 20)  # pending on the coordinator

        offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
        before = wait_until(
            lambda: (s := offsets_state(txn_cluster, offsets_partition)) and len(s.isr) == 3 and s,
            "__consumer_offsets in sync",
            WAIT_S,
        )
        victim = txn_cluster.member("broker", before.leader)
        assert cluster.kill(victim)
        wait_until(lambda: not pid_alive(victim.pid), "the coordinator gone", WAIT_S)
        wait_until(
            lambda: (
                (s := offsets_state(txn_cluster, offsets_partition))
                and s.leader not in (-1, before.leader)
            ),
            "a new group coordinator",
            WAIT_S,
        )
        alive = ",".join(
            m.address for m in txn_cluster.members if m.role == "broker" and m is not victim
        )
        unstable = (-1, ErrorCode.unstable_offset_commit)
        assert wait_until(
            lambda: _fetch_or_none(alive, group, topic) == dict.fromkeys(PARTITIONS, unstable),
            "the new coordinator to have the offsets pending",
            WAIT_S,
        )
        producer.commit_transaction(WAIT_S)
        assert committed(consumer, topic) == everything(20)
    finally:
        consumer.close()
        producer.flush(5)
        if victim is not None and not pid_alive(victim.pid):
            cluster.restart_broker(txn_cluster.data_dir, victim.id)


def offsets_state(state, partition: int):
    return cluster.partition_state(state, "__consumer_offsets", partition)


def _fetch_or_none(bootstrap: str, group: str, topic: str):
    try:
        return offset_fetch(bootstrap, group, topic, stable=True)
    except (TimeoutError, AssertionError, OSError, OdradekError):
        return None
