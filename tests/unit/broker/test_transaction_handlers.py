"""The transaction APIs' handlers and their wiring at every version they serve, over a real
coordinator (runtime, shards, in-memory log, fake marker sender): answers per version
(PRODUCER_FENCED or INVALID_PRODUCER_EPOCH), unknown topics in AddPartitionsToTxn, per-id
Describe errors, ListTransactions, and the leadership listener loading, unloading and cancelling
markers of ``__transaction_state`` partitions only."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from datetime import timedelta
from types import SimpleNamespace

from odradek.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
)
from odradek.broker.transaction_coordinator import start_transaction_coordinator, state_topic
from odradek.common.topics import TRANSACTION_STATE_TOPIC
from odradek.config.broker import BrokerConfig
from odradek.coordinator.partitioner import partition_for
from odradek.errors import ErrorCode as E
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.codec import decode_response, encode_response
from odradek.protocol.header import RequestHeader
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.coordinator import TransactionCoordinator
from support.authorizer import handler_context
from support.coordinator_memory import MemoryLog, in_loop, loaded


def versions(api_key: ApiKey) -> list[int]:
    low, high = SUPPORTED_VERSIONS[api_key]
    return list(range(low, high + 1))


class Ids:
    def __init__(self) -> None:
        self.next = 100

    async def next_producer_id(self) -> int:
        self.next += 1
        return self.next


class Sender:
    def __init__(self) -> None:
        self.submitted: list = []
        self.cancelled: list[int] = []

    def submit(self, marker, on_written, *, owner):
        self.submitted.append((marker, on_written, owner))

    def cancel_owner(self, owner):
        self.cancelled.append(owner)


async def broker_with_coordinator():
    log, sender = MemoryLog(), Sender()
    config = dataclasses.replace(
        TransactionCoordinatorConfig(), transaction_state_log_num_partitions=1, write_timeout_ms=50
    )
    coordinator = TransactionCoordinator(
        log, config, Ids(), markers=lambda: sender, clock_ms=lambda: 1_000
    )
    log.leader_epoch[0] = 1
    coordinator.on_elected(0, 1)
    await loaded(coordinator.runtime, 0)
    topics = {"t": SimpleNamespace(partitions={0: None, 1: None})}
    broker = SimpleNamespace(
        transactions=coordinator, producer_ids=None, metadata=SimpleNamespace(topic=topics.get)
    )
    return broker, coordinator, sender


def ctx(broker, version: int):
    return handler_context(broker, version)


def request(api_key: ApiKey, version: int, **values):
    return schemas.request_schema(api_key, version)(**values)


async def init(broker, version: int, tid: str = "tx", timeout_ms: int = 60_000, **more):
    answer = await init_producer_id.handle(
        ctx(broker, version),
        request(
            ApiKey.INIT_PRODUCER_ID,
            version,
            transactional_id=tid,
            transaction_timeout=timedelta(milliseconds=timeout_ms),
            **more,
        ),
    )
    return answer.error_code, answer.producer_id, answer.producer_epoch


async def add(broker, version: int, pid: int, epoch: int, topics):
    topic_type = (
        schemas.request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        .__dataclass_fields__["v3_and_below_topics"]
        .type.__args__[0]
    )
    answer = await add_partitions_to_txn.handle(
        ctx(broker, version),
        request(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            version,
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(topic_type(name=n, partitions=p) for n, p in topics),
        ),
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


@in_loop
async def test_init_add_end_at_every_version_and_fencing_as_each_version_knows_it():
    broker, coordinator, sender = await broker_with_coordinator()
    error, pid, epoch = await init(broker, 0)
    assert (error, epoch) == (E.none, 0)
    for version in versions(ApiKey.INIT_PRODUCER_ID)[1:]:
        error, same_pid, epoch = await init(broker, version)
        assert (error, same_pid) == (E.none, pid)
    assert epoch == len(versions(ApiKey.INIT_PRODUCER_ID)) - 1
    assert (await init(broker, 4, timeout_ms=0))[0] is E.invalid_transaction_timeout
    assert (await init(broker, 4, tid=""))[0] is E.invalid_request

    for version in versions(ApiKey.ADD_PARTITIONS_TO_TXN):
        fenced = await add(broker, version, pid, epoch - 1, [("t", (0,))])
        expected = E.producer_fenced if version >= 2 else E.invalid_producer_epoch
        assert fenced == {("t", 0): expected}
        assert await add(broker, version, pid, epoch, [("t", (0, 1, 0))]) == {
            ("t", 0): E.none,
            ("t", 1): E.none,
        }
    unknown = await add(broker, 3, pid, epoch, [("t", (0, 7)), ("gone", (0,))])
    assert unknown == {
        ("t", 0): E.operation_not_attempted,
        ("t", 7): E.unknown_topic_or_partition,
        ("gone", 0): E.unknown_topic_or_partition,
    }

    for version in versions(ApiKey.ADD_OFFSETS_TO_TXN):
        answer = await add_offsets_to_txn.handle(
            ctx(broker, version),
            request(
                ApiKey.ADD_OFFSETS_TO_TXN,
                version,
                transactional_id="tx",
                producer_id=pid,
                producer_epoch=epoch,
                group_id="g",
            ),
        )
        assert answer.error_code is E.none

    def end(version: int, producer_epoch: int):
        return end_txn.handle(
            ctx(broker, version),
            request(
                ApiKey.END_TXN,
                version,
                transactional_id="tx",
                producer_id=pid,
                producer_epoch=producer_epoch,
                committed=True,
            ),
        )

    assert (await end(1, epoch - 1)).error_code is E.invalid_producer_epoch
    assert (await end(3, epoch - 1)).error_code is E.producer_fenced
    assert (await end(3, epoch)).error_code is E.none
    [(marker, _, owner)] = sender.submitted
    group_partition = ("__consumer_offsets", partition_for("g", 50))
    assert owner == 0 and set(marker.partitions) == {("t", 0), ("t", 1), group_partition}
    await coordinator.close()


@in_loop
async def test_describe_and_list_answers():
    broker, coordinator, _ = await broker_with_coordinator()
    _, pid, epoch = await init(broker, 4)
    await add(broker, 3, pid, epoch, [("t", (1, 0))])
    described = await describe_transactions.handle(
        ctx(broker, 0),
        request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx", "nobody", "")),
    )
    found, nobody, empty = described.transaction_states
    assert (found.error_code, found.transaction_state, found.producer_id) == (
        E.none,
        "Ongoing",
        pid,
    )
    assert found.transaction_timeout == timedelta(seconds=60)
    assert found.transaction_start_time.timestamp() * 1000 == 1_000
    assert [(t.topic, t.partitions) for t in found.topics] == [("t", (0, 1))]
    assert nobody.error_code is E.transactional_id_not_found
    assert empty.error_code is E.invalid_request

    for version in versions(ApiKey.LIST_TRANSACTIONS):
        values = {"state_filters": ("Ongoing", "Bogus"), "producer_id_filters": ()}
        if version >= 1:
            values["duration_filter"] = -1
        listed = await list_transactions.handle(
            ctx(broker, version), request(ApiKey.LIST_TRANSACTIONS, version, **values)
        )
        assert listed.error_code is E.none and listed.unknown_state_filters == ("Bogus",)
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            ("tx", "Ongoing")
        ]
    await coordinator.close()


@in_loop
async def test_an_empty_transactions_start_is_minus_one_on_the_wire_and_reads_back():
    broker, coordinator, _ = await broker_with_coordinator()
    await init(broker, 4)  # Empty: no transaction started
    described = await describe_transactions.handle(
        ctx(broker, 0),
        request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx", "nobody")),
    )
    header = RequestHeader(ApiKey.DESCRIBE_TRANSACTIONS, 0, 7, None, 2, 0)
    frame = encode_response(header, described)
    assert struct.pack(">q", -1) in frame  # Kafka's "no start time"
    decoded = decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, frame).body
    empty, nobody = decoded.transaction_states
    assert (empty.transaction_state, empty.transaction_start_time) == ("Empty", None)
    assert nobody.error_code is E.transactional_id_not_found
    assert (nobody.producer_id, nobody.transaction_start_time.timestamp()) == (0, 0)
    await coordinator.close()


@in_loop
async def test_without_a_coordinator_transactional_requests_are_coordinator_not_available():
    broker = SimpleNamespace(transactions=None, producer_ids=None, metadata=None)
    assert (await init(broker, 4))[0] is E.coordinator_not_available
    assert (await init(broker, 4, tid=None))[0] is E.coordinator_not_available  # no ZooKeeper


class FakeLog:
    log_start_offset = log_end_offset = 0

    def batches(self, _start):
        return iter(())


@in_loop
async def test_the_leadership_listener_follows_transaction_state_partitions_only():
    sender = Sender()
    replicas = SimpleNamespace(
        leadership_listeners=[],
        clock_ms=lambda: 0,
        get_partition=lambda topic, p: SimpleNamespace(log=FakeLog()),
    )
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/nonexistent"}
    )
    coordinator = start_transaction_coordinator(
        config,
        replicas,
        Ids(),
        markers=lambda: sender,  # type: ignore[arg-type]
    )
    [listener] = replicas.leadership_listeners
    listener("__consumer_offsets", 3, 1)
    assert not coordinator.runtime.is_loading(3) and not coordinator.runtime.is_active(3)
    listener(TRANSACTION_STATE_TOPIC, 3, 4)
    await loaded(coordinator.runtime, 3)
    assert coordinator._contexts[3].coordinator_epoch == 4
    listener(TRANSACTION_STATE_TOPIC, 3, 5)  # a newer epoch while loaded: markers carry it
    assert coordinator._contexts[3].coordinator_epoch == 5
    listener(TRANSACTION_STATE_TOPIC, 3, None)
    assert not coordinator.runtime.is_active(3) and sender.cancelled == [3]
    await coordinator.close()
    await asyncio.sleep(0)


def test_the_state_topic_is_created_as_kafka_creates_it():
    topic = state_topic(
        dataclasses.replace(
            TransactionCoordinatorConfig(),
            transaction_state_log_num_partitions=7,
            transaction_state_log_replication_factor=2,
            transaction_state_log_min_isr=1,
        )
    )
    assert (topic.name, topic.num_partitions, topic.replication_factor) == (
        "__transaction_state",
        7,
        2,
    )
    assert dict(topic.configs) == {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": "1",
        "segment.bytes": "104857600",
        "unclean.leader.election.enable": "false",
    }
