"""Producer ids are unique across brokers and restarts; DeleteRecords answers low watermarks.

Idempotent producers of three clients get their id from InitProducerId and produce; two brokers
handing out ids at once (through the wire and through their managers) never give one twice; a
restarted broker starts after every block handed out before.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

from odradek.broker.admin.producer_ids import ProducerIdManager
from odradek.zk.client import ZkClient

pytestmark = pytest.mark.integration

TOPIC = "events"


def init_request(transactional_id=None):
    return InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=timedelta(seconds=60)
    )


def test_kafka_python_idempotent_producer_gets_an_id_and_produces(make_broker, zk):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    broker = make_broker(1)
    broker.host_partitions(TOPIC, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    futures = [producer.send(TOPIC, value=b"v%d" % i, partition=i % 2) for i in range(20)]
    producer.flush(timeout=20)
    assert all(f.get(timeout=10).offset >= 0 for f in futures)
    producer.close(timeout=5)
    assert zk.json("/latest_producer_id_block") == {
        "version": 1,
        "broker": 1,
        "block_start": "0",
        "block_end": "999",
    }
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.end_offsets([TopicPartition(TOPIC, 0)]) == {TopicPartition(TOPIC, 0): 10}
    consumer.close()


def test_confluent_and_aiokafka_idempotent_producers(make_broker):
    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer

    broker = make_broker(1)
    broker.host_partitions(TOPIC, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    delivered = []
    for i in range(50):
        producer.produce(
            TOPIC, value=b"%d" % i, partition=0, on_delivery=lambda e, m: delivered.append(e)
        )
    assert producer.flush(20) == 0
    assert delivered == [None] * 50
    del producer  # librdkafka's producer closes when collected

    async def aiokafka_produce():
        aio = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
        await aio.start()
        try:
            return [(await aio.send_and_wait(TOPIC, b"x", partition=0)).offset for _ in range(5)]
        finally:
            await aio.stop()

    assert asyncio.run(aiokafka_produce()) == [50, 51, 52, 53, 54]


def test_transactional_ids_need_a_transaction_coordinator(make_broker, raw_client):
    broker = make_broker(1)
    client = raw_client(broker.bootstrap)
    refused = client.send(init_request("my-transactions"))
    assert (refused.error_code.value, refused.producer_id, refused.producer_epoch) == (15, -1, -1)
    first, second = client.send(init_request()), client.send(init_request())
    assert (first.error_code.value, first.producer_epoch) == (0, 0)
    assert second.producer_id == first.producer_id + 1


def test_two_brokers_never_hand_out_the_same_id(make_broker, raw_client, zk):
    brokers = [make_broker(1), make_broker(2)]
    per_connection = 600
    ids: list[int] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def run(bootstrap):
        try:
            client = raw_client(bootstrap)
            got = [client.send(init_request()).producer_id for _ in range(per_connection)]
            with lock:
                ids.extend(got)
        except BaseException as e:  # reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=run, args=(b.bootstrap,)) for b in brokers for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures
    assert len(ids) == 4 * per_connection
    assert len(set(ids)) == len(ids)
    assert min(ids) >= 0
    last = zk.json("/latest_producer_id_block")
    assert max(ids) <= int(last["block_end"])
    assert int(last["block_end"]) - int(last["block_start"]) == 999

    # A restarted broker 1 starts after every block handed out so far.
    brokers[0].close()
    restarted = make_broker(1)
    again = raw_client(restarted.bootstrap).send(init_request()).producer_id
    assert again == int(last["block_end"]) + 1


def test_managers_racing_for_small_blocks_get_disjoint_blocks(hosts, zk):
    """Two sessions, blocks of 3 ids, 300 ids each: every compare-and-set loser retries."""

    async def scenario():
        clients = [ZkClient(hosts, session_timeout_s=4.0) for _ in range(2)]
        for client in clients:
            await client.astart()
        try:
            managers = [
                ProducerIdManager(client, broker_id, block_size=3)
                for broker_id, client in enumerate(clients, start=1)
            ]
            return await asyncio.gather(
                *(m.next_producer_id() for _ in range(300) for m in managers)
            )
        finally:
            for client in clients:
                await client.aclose()

    ids = asyncio.run(scenario())
    assert sorted(ids) == list(range(600))  # no id twice, no block lost
    assert zk.json("/latest_producer_id_block")["block_end"] == "599"


def test_delete_records_through_kafka_python(make_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NotLeaderForPartitionError

    broker = make_broker(1)
    broker.host_partitions(TOPIC, 1)
    broker.host_partitions("followed", 1, leader=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send(TOPIC, value=b"%d" % i, partition=0)
    producer.flush(timeout=20)
    producer.close(timeout=5)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(TOPIC, 0)
        result = admin.delete_records({tp: 4})
        assert result[tp]["low_watermark"] == 4
        assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 10
        with pytest.raises(NotLeaderForPartitionError):
            admin.delete_records({TopicPartition("followed", 0): 0}, partition_leader_id=1)
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.beginning_offsets([tp]) == {tp: 10}
    consumer.close()
