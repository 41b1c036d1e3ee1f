"""An in-process broker for the broker tests: the real server, handlers and logs on their own
event loop thread; leadership of one topic is handed out by the test, as the controller does.

``broker`` is one with default limits; ``make_broker(**server_options)`` builds one with the
server's limits set (``BrokerServer`` keyword arguments), stopped at the end of the test.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from odradek.broker.context import BrokerContext
from odradek.broker.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.server import BrokerServer
from odradek.config.topic import TopicConfig
from odradek.observability.metrics import broker_metrics, new_registry
from odradek.storage.manager import LogManager

BROKER_ID = 1
TOPIC = "events"
PARTITIONS = 3


class RunningBroker:
    """A broker server on its own event loop thread, stopped in ``close``."""

    topic = TOPIC  # the topic it leads, with ``partitions`` partitions
    partitions = PARTITIONS

    def __init__(self, tmp_path, host: str = "127.0.0.1", **server_options):
        self.loop = asyncio.new_event_loop()
        self.log_manager = LogManager([tmp_path / "disk-0", tmp_path / "disk-1"])
        self.log_manager.load()
        self.replicas = ReplicaManager(BROKER_ID, self.log_manager)
        self.metadata = MetadataCache(cluster_id="test-cluster")
        self.registry = new_registry()
        self.metrics = broker_metrics(self.registry)
        self.context = BrokerContext(BROKER_ID, self.replicas, self.metadata, self.metrics)
        self.server = BrokerServer(self.context, **server_options)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.host = host
        self.port = self.call(self.server.start(host, 0))
        self.call_sync(self._lead_topic)

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    def call_sync(self, function):
        async def run():
            return function()

        return self.call(run())

    def _lead_topic(self) -> None:
        self.metadata.update_brokers([BrokerEndpoint(BROKER_ID, self.host, self.port)])
        partitions = {}
        for p in range(PARTITIONS):
            state = PartitionState(
                leader=BROKER_ID, leader_epoch=0, isr=(BROKER_ID,), replicas=(BROKER_ID,)
            )
            self.replicas.become_leader_or_follower(TOPIC, p, state, TopicConfig())
            partitions[p] = PartitionMetadata(p, BROKER_ID, 0, (BROKER_ID,), (BROKER_ID,))
        self.metadata.update_topic(TopicMetadata(TOPIC, uuid.uuid4(), partitions))

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.log_manager.shutdown()


@pytest.fixture
def broker(tmp_path) -> Iterator[RunningBroker]:
    running = RunningBroker(tmp_path)
    yield running
    running.close()


@pytest.fixture
def make_broker(tmp_path) -> Iterator[Callable[..., RunningBroker]]:
    started: list[RunningBroker] = []

    def make(**server_options) -> RunningBroker:
        running = RunningBroker(tmp_path / f"broker-{len(started)}", **server_options)
        started.append(running)
        return running

    yield make
    for running in started:
        running.close()
