"""Fixtures for the admin APIs: a real ZooKeeper per module, real broker servers, a chroot per test.

``AdminBroker`` is the broker's servers (one per listener of its configuration: the client
listener and the control plane), handlers, replica manager and logs on their own event loop
thread, with a ZooKeeper session and a ``BrokerConfig`` in its context. It registers itself
in ``/brokers/ids`` (its real address) and tells its metadata cache that it is the controller, so
clients send it their admin requests. ``fake_broker`` registers more brokers that only exist in
ZooKeeper, so placement has several to choose from. There is no controller: topics never get
leaders, so nothing here waits for Metadata to show them, and CreateTopics is sent with a timeout
of 0 (answer once written, Kafka's rule: a longer one waits for leaders that never come).
``kafka_admin_client`` is kafka-python's admin client doing that.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.admin.producer_ids import ProducerIdManager
from odradek.broker.context import BrokerContext
from odradek.broker.metadata_cache import (
    LiveBroker,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.server import BrokerServer
from odradek.config.broker import BrokerConfig
from odradek.config.endpoints import HostPort
from odradek.protocol.codec import decode_response, encode_request
from odradek.storage.manager import LogManager
from odradek.zk.client import ZkClient
from odradek.zk.errors import NoNodeError
from odradek.zk.paths import BrokerInfo, Endpoint, broker_path

SESSION_TIMEOUT_S = 4.0
NO_WAIT = 0  # CreateTopics timeout: answer once the topic is written (no controller here)
CONNECT_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 30.0


def kafka_admin_client(**config: Any) -> Any:
    """kafka-python's ``KafkaAdminClient`` whose CreateTopics asks for the answer once written."""
    from kafka.admin import KafkaAdminClient

    class NoWaitAdmin(KafkaAdminClient):
        def create_topics(self, new_topics, timeout_ms=NO_WAIT, **kwargs):
            return super().create_topics(new_topics, timeout_ms=timeout_ms, **kwargs)

        def _validate_timeout(self, timeout_ms):
            # kafka-python reads 0 as "unset" (``timeout_ms or default``); Kafka's 0 means
            # "do not wait", which is what is meant here.
            return self.config["request_timeout_ms"] if timeout_ms is None else timeout_ms

    return NoWaitAdmin(**config)


class ZkView(ZkClient):
    """The test's own ZooKeeper session: looks at (and prepares) what brokers write."""

    def json(self, path: str) -> Any:
        return json.loads(self.get(path)[0])

    def kids(self, path: str) -> list[str]:
        try:
            return sorted(self.children(path))
        except NoNodeError:
            return []

    def fake_broker(self, broker_id: int, rack: str | None = None) -> None:
        """Register a broker that exists only in ZooKeeper (nothing listens at its address)."""
        info = BrokerInfo(endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 1),), rack=rack)
        self.create(broker_path(broker_id), info.encode())

    def snapshot(self) -> dict[str, list[str]]:
        """What admin requests may write, to check that a refused one wrote nothing."""
        return {
            path: self.kids(path)
            for path in (
                "/brokers/topics",
                "/config/topics",
                "/config/changes",
                "/admin/delete_topics",
            )
        }


@pytest.fixture
def zk(hosts: str) -> Iterator[ZkView]:
    client = ZkView(hosts, session_timeout_s=SESSION_TIMEOUT_S, connect_timeout_s=CONNECT_TIMEOUT_S)
    client.start()
    client.ensure_paths()
    yield client
    client.close()


class AdminBroker:
    """A broker server with a ZooKeeper session, on its own event loop thread."""

    def __init__(self, data_dir: Path, hosts: str, broker_id: int = 1, **props: str) -> None:
        self.broker_id = broker_id
        self.config = BrokerConfig.from_properties(
            {
                "broker.id": str(broker_id),
                "zookeeper.connect": hosts,
                "log.dirs": str(data_dir / f"broker-{broker_id}"),
                "odradek.admin.listener": "",
                **props,
            }
        )
        self.zk = ZkClient(
            hosts, session_timeout_s=SESSION_TIMEOUT_S, connect_timeout_s=CONNECT_TIMEOUT_S
        )
        self.zk.start()
        self.zk.ensure_paths()
        self.log_manager = LogManager(self.config.effective_log_dirs)
        self.log_manager.load()
        self.replicas = ReplicaManager(broker_id, self.log_manager)
        self.metadata = MetadataCache(cluster_id="admin-test")
        self.context = BrokerContext(
            broker_id,
            self.replicas,
            self.metadata,
            config=self.config,
            zk=self.zk,
            producer_ids=ProducerIdManager(self.zk, broker_id),
        )
        # One server per listener of the configuration, as the broker process runs them.
        self.servers = [BrokerServer(self.context, x) for x in self.config.listener_table]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        ports = {
            server.listener.name: self.call(server.start("127.0.0.1", 0)) for server in self.servers
        }
        self.port = ports["PLAINTEXT"]
        info = BrokerInfo(
            endpoints=tuple(Endpoint(name, "127.0.0.1", port) for name, port in ports.items())
        )
        self.zk.create(broker_path(broker_id), info.encode(), ephemeral=True)
        endpoints = {name: HostPort("127.0.0.1", port) for name, port in ports.items()}
        self.call_sync(lambda: self.metadata.update_brokers([LiveBroker(broker_id, endpoints)]))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_TIMEOUT_S)

    def call_sync(self, function: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return function()

        return self.call(run())

    def host_partitions(self, topic: str, partitions: int, leader: int | None = None) -> None:
        """Host ``topic`` here, as LeaderAndIsr and UpdateMetadata from a controller would."""
        leader = self.broker_id if leader is None else leader

        def lead() -> None:
            metadata = {}
            for p in range(partitions):
                state = PartitionState(
                    leader=leader, leader_epoch=0, isr=(leader,), replicas=(leader,)
                )
                config = self.config.topic_defaults()
                self.replicas.become_leader_or_follower(topic, p, state, config)
                metadata[p] = PartitionMetadata(p, leader, 0, (leader,), (leader,))
            self.metadata.update_topic(TopicMetadata(topic, uuid.uuid4(), metadata))

        self.call_sync(lead)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        for server in self.servers:
            self.call(server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
        self.zk.close()
        self.log_manager.shutdown()


@pytest.fixture
def make_broker(tmp_path: Path, hosts: str) -> Iterator[Callable[..., AdminBroker]]:
    """``make_broker(broker_id=1, **server_properties)``: started, closed after the test."""
    brokers: list[AdminBroker] = []

    def make(broker_id: int = 1, **props: str) -> AdminBroker:
        broker = AdminBroker(tmp_path, hosts, broker_id, **props)
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        broker.close()


class RawClient:
    """Sends one kio request at a time over a plain socket and reads the answer."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=CALL_TIMEOUT_S)
        self.correlation_id = 0

    def send(self, request: Any) -> Any:
        self.correlation_id += 1
        frame = encode_request(request, self.correlation_id, "admin-tests")
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._read(4))
        response = decode_response(
            int(request.__api_key__), int(request.__version__), self._read(size)
        )
        assert response.correlation_id == self.correlation_id
        return response.body

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_client() -> Iterator[Callable[[str], RawClient]]:
    clients: list[RawClient] = []

    def make(bootstrap: str) -> RawClient:
        client = RawClient(bootstrap)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
