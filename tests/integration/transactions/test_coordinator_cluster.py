"""Proves the transaction coordinator on a real 3-broker cluster with real clients: a
confluent-kafka transactional producer commits (visible to read_committed) and aborts (visible
only to read_uncommitted), and so do kafka-python's and aiokafka's; a second producer with the
same transactional.id fences the first (its commit fails fatally, its records are never
committed); kafka-python's admin client lists and describes the transactions; bad requests get
Kafka's error codes on the wire; a transaction is committed after kill -9 of its coordinator
(the next leader loads it)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.local import cluster
from odradek.local.cluster import ClusterState
from odradek.protocol import schemas
from support.clusters import running_cluster
from support.waiting import wait_until

pytestmark = [pytest.mark.integration]

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 10, 22, 24, 26
TIMEOUT_S = 60.0
OVERRIDES = {
    "transaction.state.log.num.partitions": "6",
    "offsets.topic.num.partitions": "6",
    "transaction.max.timeout.ms": "120000",
}


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    data_dir = tmp_path_factory.mktemp("txn-cluster")
    with running_cluster(data_dir, brokers=3, broker_overrides=OVERRIDES) as state:
        yield state


def new_topic(bootstrap: str, partitions: int = 2) -> str:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=30)

    def led() -> bool:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        return (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        )

    wait_until(led, f"{topic} led", 30)
    return topic


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
        }
    )


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value of ``topic`` up to its end for ``isolation`` (the LSO for read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    if len(at_end) == partitions:
                        return sorted(values)
                    continue
                raise KafkaException(message.error())
            at_end.discard(message.partition())
            values.append(message.value())
        raise AssertionError(f"{topic} was not read to its end")
    finally:
        consumer.close()


def produce(producer: Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % 2)
    assert producer.flush(30) == 0


def test_commit_is_read_committed_and_abort_only_read_uncommitted(txn_cluster):
    bootstrap = txn_cluster.bootstrap_servers
    topic = new_topic(bootstrap)
    producer = transactional_producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    produce(producer, topic, [b"committed-%d" % i for i in range(10)])
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    produce(producer, topic, [b"aborted-%d" % i for i in range(10)])
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()  # the next transaction waits for the abort's markers
    produce(producer, topic, [b"again-%d" % i for i in range(4)])
    producer.commit_transaction(TIMEOUT_S)

    committed = read_all(bootstrap, topic, 2, "read_committed")
    assert committed == sorted(
        [b"committed-%d" % i for i in range(10)] + [b"again-%d" % i for i in range(4)]
    )
    uncommitted = read_all(bootstrap, topic, 2, "read_uncommitted")
    assert uncommitted == sorted(committed + [b"aborted-%d" % i for i in range(10)])


def test_kafka_python_and_aiokafka_transactional_producers(txn_cluster):
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    bootstrap = txn_cluster.bootstrap_servers
    topic = new_topic(bootstrap)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=b"kafka-python-%d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"kafka-python-aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)

    async def aiokafka_transactions() -> None:
        aio = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:6]}"
        )
        await aio.start()
        try:
            async with aio.transaction():
                for i in range(3):
                    await aio.send_and_wait(topic, b"aiokafka-%d" % i, partition=i % 2)
            await aio.begin_transaction()
            await aio.send_and_wait(topic, b"aiokafka-aborted", partition=1)
            await aio.abort_transaction()
        finally:
            await aio.stop()

    asyncio.run(asyncio.wait_for(aiokafka_transactions(), TIMEOUT_S))
    committed = [b"kafka-python-%d" % i for i in range(3)] + [b"aiokafka-%d" % i for i in range(3)]
    assert read_all(bootstrap, topic, 2, "read_committed") == sorted(committed)
    assert read_all(bootstrap, topic, 2, "read_uncommitted") == sorted(
        committed + [b"kafka-python-aborted", b"aiokafka-aborted"]
    )


def test_a_second_producer_fences_the_first(txn_cluster):
    bootstrap = txn_cluster.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"zombie-{uuid.uuid4().hex[:6]}"
    zombie = transactional_producer(bootstrap, transactional_id)
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    produce(zombie, topic, [b"zombie-%d" % i for i in range(6)])

    # The new producer's InitProducerId aborts the zombie's open transaction and bumps the epoch.
    successor = transactional_producer(bootstrap, transactional_id)
    successor.init_transactions(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error

    successor.begin_transaction()
    produce(successor, topic, [b"successor-%d" % i for i in range(4)])
    successor.commit_transaction(TIMEOUT_S)
    assert read_all(bootstrap, topic, 2, "read_committed") == sorted(
        b"successor-%d" % i for i in range(4)
    )
    assert len(read_all(bootstrap, topic, 2, "read_uncommitted")) == 10


def test_admin_lists_and_describes_transactions(txn_cluster):
    bootstrap = txn_cluster.bootstrap_servers
    topic = new_topic(bootstrap)
    open_id, done_id = f"open-{uuid.uuid4().hex[:6]}", f"done-{uuid.uuid4().hex[:6]}"
    running = transactional_producer(bootstrap, open_id)
    running.init_transactions(TIMEOUT_S)
    running.begin_transaction()
    produce(running, topic, [b"a", b"b"])
    finished = transactional_producer(bootstrap, done_id)
    finished.init_transactions(TIMEOUT_S)
    finished.begin_transaction()
    produce(finished, topic, [b"c"])
    finished.commit_transaction(TIMEOUT_S)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:

        def listings(**filters) -> dict[str, tuple[int, object]]:
            """transactional id -> (the broker that listed it, its listing)."""
            per_broker = admin.list_transactions(**filters)
            return {
                t.transactional_id: (broker_id, t)
                for broker_id, found in per_broker.items()
                for t in found
            }

        def state(listing) -> str:
            return str(getattr(listing.state, "value", listing.state))

        def listed():
            # EndTxn is answered at PrepareCommit; the markers, then CompleteCommit, follow.
            found = listings()
            done = found.get(done_id)
            return (
                found if open_id in found and done and state(done[1]) == "CompleteCommit" else None
            )

        found = wait_until(listed, "both transactions listed, one complete", 30)
        broker_id, listing = found[open_id]
        assert state(listing) == "Ongoing"
        ongoing = listings(state_filters=["Ongoing"])
        assert open_id in ongoing and done_id not in ongoing

        described = admin.describe_transactions([open_id, done_id])
        running_txn = described[open_id]
        assert running_txn.coordinator_id == broker_id  # listed by its coordinator only
        assert {tp.topic for tp in running_txn.topic_partitions} == {topic}
        assert running_txn.transaction_timeout_ms == 60_000
        assert running_txn.producer_id == listing.producer_id
        assert described[done_id].topic_partitions == set()
    finally:
        admin.close()
    running.abort_transaction(TIMEOUT_S)


def address_of(state: ClusterState, broker_id: int) -> tuple[str, int]:
    member = next(m for m in state.members if m.role == "broker" and m.id == broker_id)
    host, port = member.address.rsplit(":", 1)
    return host, int(port)


async def send(state: ClusterState, broker_id: int, request):
    host, port = address_of(state, broker_id)
    async with await BrokerConnection.open(host, port) as conn:
        await conn.negotiate_versions()
        return await conn.send(request)


async def coordinator_of(state: ClusterState, transactional_id: str) -> int:
    request = schemas.request_schema(FIND_COORDINATOR, 3)(key=transactional_id, key_type=1)
    for _ in range(100):
        answer = await send(state, 1, request)
        if answer.error_code == ErrorCode.none:
            return answer.node_id
        await asyncio.sleep(0.2)
    raise AssertionError(f"no coordinator for {transactional_id}")


def test_bad_requests_get_kafkas_error_codes(txn_cluster):
    state = txn_cluster
    topic = new_topic(state.bootstrap_servers)
    transactional_id = f"wire-{uuid.uuid4().hex[:6]}"

    def init(timeout_ms: int, version: int = 4):
        return schemas.request_schema(INIT_PRODUCER_ID, version)(
            transactional_id=transactional_id,
            transaction_timeout=timedelta(milliseconds=timeout_ms),
        )

    async def scenario():
        coordinator = await coordinator_of(state, transactional_id)
        other = next(b for b in (1, 2, 3) if b != coordinator)
        elsewhere = await send(state, other, init(10_000))
        assert elsewhere.error_code == ErrorCode.not_coordinator
        too_long = await send(state, other, init(120_001))  # judged before the coordinator
        assert too_long.error_code == ErrorCode.invalid_transaction_timeout
        first = await send(state, coordinator, init(10_000))
        assert first.error_code == ErrorCode.none and first.producer_epoch == 0
        second = await send(state, coordinator, init(10_000))
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)

        add = schemas.request_schema(ADD_PARTITIONS_TO_TXN, 3)
        topic_type = add.__dataclass_fields__["v3_and_below_topics"].type.__args__[0]

        def add_request(epoch: int, *topics):
            return add(
                v3_and_below_transactional_id=transactional_id,
                v3_and_below_producer_id=first.producer_id,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=tuple(topic_type(name=n, partitions=p) for n, p in topics),
            )

        mixed = await send(state, coordinator, add_request(1, (topic, (0,)), ("nope", (0,))))
        errors = {
            (t.name, p.partition_index): p.partition_error_code
            for t in mixed.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        assert errors == {
            (topic, 0): ErrorCode.operation_not_attempted,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
        }
        fenced = await send(state, coordinator, add_request(0, (topic, (0,))))
        [result] = fenced.results_by_topic_v3_and_below[0].results_by_partition
        assert result.partition_error_code == ErrorCode.producer_fenced
        old = schemas.request_schema(END_TXN, 1)(
            transactional_id=transactional_id,
            producer_id=first.producer_id,
            producer_epoch=0,
            committed=True,
        )
        assert (await send(state, coordinator, old)).error_code == ErrorCode.invalid_producer_epoch
        nothing = schemas.request_schema(END_TXN, 3)(
            transactional_id=transactional_id,
            producer_id=first.producer_id,
            producer_epoch=1,
            committed=True,
        )
        assert (await send(state, coordinator, nothing)).error_code == ErrorCode.invalid_txn_state

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_a_transaction_survives_kill_9_of_its_coordinator(txn_cluster):
    """Last in the module: it kills a broker (and starts it again)."""
    state = txn_cluster
    bootstrap = state.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"failover-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(bootstrap, transactional_id)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    produce(producer, topic, [b"before-%d" % i for i in range(6)])
    coordinator = asyncio.run(coordinator_of(state, transactional_id))
    assert cluster.kill(state.member("broker", coordinator))
    try:
        # The new leader of the id's __transaction_state partition loads the Ongoing
        # transaction; librdkafka finds it and commits there.
        producer.commit_transaction(TIMEOUT_S)
        producer.begin_transaction()
        produce(producer, topic, [b"after-%d" % i for i in range(4)])
        producer.commit_transaction(TIMEOUT_S)
        expected = sorted(
            [b"before-%d" % i for i in range(6)] + [b"after-%d" % i for i in range(4)]
        )
        assert read_all(bootstrap, topic, 2, "read_committed") == expected
    finally:
        del producer
        wait_until(lambda: not state.member("broker", coordinator).is_ours(), "the broker gone", 30)
        cluster.restart_broker(Path(state.data_dir), coordinator)
