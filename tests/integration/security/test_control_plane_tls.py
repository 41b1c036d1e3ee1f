"""A cluster whose own links are mutual TLS: brokers replicate over an SSL inter-broker listener,
the controller reaches their SSL control-plane listeners and they reach its SSL listener, each
with its certificate (``ssl.client.auth=required`` everywhere); clients stay on PLAINTEXT.

One local cluster for the module (ZooKeeper, a controller, three brokers); certificates are
made by the test (trustme): one for the brokers (CN=broker), one for the controller
(CN=controller), one for an outsider (CN=mallory) signed by the same CA.
"""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from support.listener_ports import listener_ports
from support.tls_cluster import cluster_overrides, write_pki
from support.waiting import wait_equal

pytestmark = pytest.mark.integration

WAIT_S = 30.0
RECORDS = 300


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return write_pki(tmp_path_factory.mktemp("pki"), ("broker", "controller", "mallory"))


@pytest.fixture(scope="module")
def cluster(pki, local_cluster, tmp_path_factory):
    """The running cluster's state."""
    broker_overrides, controller_overrides = cluster_overrides(pki)
    data_dir = tmp_path_factory.mktemp("mtls-cluster")
    with local_cluster(
        data_dir,
        brokers=3,
        broker_overrides=broker_overrides,
        controller_overrides=controller_overrides,
    ) as state:
        yield state


def test_brokers_replicate_and_the_controller_leads_over_mutual_tls(cluster):
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "over-mtls"
    futures = admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])
    futures[topic].result(timeout=WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(topic, b"%d" % i)
    assert producer.flush(WAIT_S) == 0
    wait_equal(  # every replica in sync: the followers fetch over the INTERNAL listener
        lambda: [
            len(p.isrs)
            for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        ],
        [3, 3],
        "the ISR sizes",
        WAIT_S,
    )
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "mtls", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(int(message.value()))
    finally:
        consumer.close()
    assert values == set(range(RECORDS))


def test_the_internal_listeners_refuse_a_peer_without_a_certificate(cluster, pki):
    broker = next(m for m in cluster.members if m.role == "broker")
    controller = next(m for m in cluster.members if m.role == "controller")
    ports = [
        *(port for name, port in listener_ports(broker).items() if name != "PLAINTEXT"),
        int(controller.address.rsplit(":", 1)[1]),
    ]
    no_certificate = ssl.create_default_context(cafile=str(pki["ca"]))

    async def refused(port: int, tls: ssl.SSLContext | None) -> bool:
        try:
            async with await BrokerConnection.open(
                "127.0.0.1", port, tls=tls, connect_timeout_s=5, request_timeout_s=5
            ) as connection:
                await connection.negotiate_versions()
        except ClientError:
            return True
        return False

    for port in ports:
        assert asyncio.run(refused(port, no_certificate)), port
        assert asyncio.run(refused(port, None)), port  # plaintext on a TLS port
