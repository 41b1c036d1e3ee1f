"""What ``read_committed`` and ``read_uncommitted`` see of transactions, with confluent-kafka's
transactional producer on the replicated cluster: an aborted transaction is invisible to
``read_committed`` and visible to ``read_uncommitted``; an open one holds ``read_committed`` at
its first record (the last stable offset) until it ends; a zombie producer (same transactional
id, older epoch) is fenced and nothing it writes afterwards is visible; a transaction left open
past its timeout is aborted by the coordinator."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer
from txn_proof.traffic import create_topic, read_all

from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

STEP_TIMEOUT_S = 30.0
WAIT_S = 60.0
PARTITIONS = 2


def transactional(bootstrap: str, transactional_id: str, **config: object) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **config,
        }
    )
    producer.init_transactions(STEP_TIMEOUT_S)
    return producer


def send(producer: Producer, topic: str, prefix: str, count: int = 10) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    return values


def values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    return sorted(v for _, _, v in read_all(bootstrap, topic, PARTITIONS, isolation))


def test_aborted_transactions_are_invisible_to_read_committed(txn_cluster, unique):
    bootstrap = txn_cluster.bootstrap_servers
    topic = unique("topic")
    create_topic(bootstrap, topic, PARTITIONS)
    producer = transactional(bootstrap, unique("txn"))
    producer.begin_transaction()
    first = send(producer, topic, "committed-1")
    producer.commit_transaction(STEP_TIMEOUT_S)
    producer.begin_transaction()
    aborted = send(producer, topic, "aborted")
    producer.flush(STEP_TIMEOUT_S)  # written to the partitions, then aborted
    producer.abort_transaction(STEP_TIMEOUT_S)
    producer.begin_transaction()
    second = send(producer, topic, "committed-2")
    producer.commit_transaction(STEP_TIMEOUT_S)

    assert values(bootstrap, topic, "read_committed") == sorted(first + second)
    assert values(bootstrap, topic, "read_uncommitted") == sorted(first + aborted + second)


def test_an_open_transaction_holds_read_committed_at_its_first_record(txn_cluster, unique):
    bootstrap = txn_cluster.bootstrap_servers
    topic = unique("topic")
    create_topic(bootstrap, topic, PARTITIONS)
    producer = transactional(bootstrap, unique("txn"))
    producer.begin_transaction()
    committed = send(producer, topic, "committed")
    producer.commit_transaction(STEP_TIMEOUT_S)
    producer.begin_transaction()
    pending = send(producer, topic, "pending")
    producer.flush(STEP_TIMEOUT_S)
    other = transactional(bootstrap, unique("other"))  # a later transaction, committed
    other.begin_transaction()
    later = send(other, topic, "later")
    other.commit_transaction(STEP_TIMEOUT_S)

    # The last stable offset stops at the open transaction: the committed one after it waits.
    assert values(bootstrap, topic, "read_committed") == sorted(committed)
    assert values(bootstrap, topic, "read_uncommitted") == sorted(committed + pending + later)
    producer.commit_transaction(STEP_TIMEOUT_S)
    assert values(bootstrap, topic, "read_committed") == sorted(committed + pending + later)


def test_a_zombie_producer_is_fenced_and_its_writes_invisible(txn_cluster, unique):
    bootstrap = txn_cluster.bootstrap_servers
    topic = unique("topic")
    create_topic(bootstrap, topic, PARTITIONS)
    transactional_id = unique("txn")
    zombie = transactional(bootstrap, transactional_id)
    zombie.begin_transaction()
    before = send(zombie, topic, "zombie-before")
    zombie.flush(STEP_TIMEOUT_S)  # on the partitions, in an open transaction

    successor = transactional(bootstrap, transactional_id)  # bumps the epoch: aborts the open one
    successor.begin_transaction()
    current = send(successor, topic, "current")
    successor.commit_transaction(STEP_TIMEOUT_S)

    after = send(zombie, topic, "zombie-after")
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(STEP_TIMEOUT_S)
    error = fenced.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), error
    assert error.name() in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), error
    with pytest.raises(KafkaException):  # a fenced producer cannot start again
        zombie.begin_transaction()

    assert values(bootstrap, topic, "read_committed") == sorted(current)
    seen = values(bootstrap, topic, "read_uncommitted")
    assert sorted(set(seen) & set(after)) == [], "the fenced producer's writes reached the log"
    assert set(before) <= set(seen)  # written before the fence, then aborted by it


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(txn_cluster, unique):
    bootstrap = txn_cluster.bootstrap_servers
    topic = unique("topic")
    create_topic(bootstrap, topic, PARTITIONS)
    producer = transactional(bootstrap, unique("txn"), **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    abandoned = send(producer, topic, "abandoned")
    producer.flush(STEP_TIMEOUT_S)
    other = transactional(bootstrap, unique("other"))
    other.begin_transaction()
    later = send(other, topic, "later")
    other.commit_transaction(STEP_TIMEOUT_S)

    # Cleanup every second, timeout 2 s: the coordinator aborts it and the LSO moves on.
    wait_until(
        lambda: values(bootstrap, topic, "read_committed") == sorted(later),
        "the abandoned transaction aborted and the later one visible",
        WAIT_S,
    )
    assert set(abandoned) <= set(values(bootstrap, topic, "read_uncommitted"))
    with pytest.raises(KafkaException):  # its producer learns it was aborted
        producer.commit_transaction(STEP_TIMEOUT_S)
