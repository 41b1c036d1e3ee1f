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
    LiveBroker,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.server import BrokerServer
from odradek.config.endpoints import HostPort, Listener, ListenerRole, SecurityProtocol
from odradek.config.topic import TopicConfig
from odradek.observability.metrics import broker_metrics, new_registry
from odradek.storage.manager import LogManager

BROKER_ID = 1
TOPIC = "events"
PARTITIONS = 3
CLIENT_LISTENER = Listener(
    "PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 0, ListenerRole.CLIENT
)
CONTROL_PLANE_LISTENER = Listener(
    "CONTROL_PLANE", SecurityProtocol.PLAINTEXT, "127.0.0.1", 0, ListenerRole.CONTROL_PLANE
)


class RunningBroker:
    """A broker's two servers on their own event loop thread, stopped in ``close``.

    ``port`` is the client listener's (on ``host``, with ``server_options`` for its limits),
    ``control_port`` the control plane's.
    """

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
        self.server = BrokerServer(self.context, CLIENT_LISTENER, **server_options)
        # given ``quotas`` (connection_quotas), both servers share them, as a broker's do
        self.control_plane = BrokerServer(
            self.context, CONTROL_PLANE_LISTENER, quotas=server_options.get("quotas")
        )
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.host = host
        self.port = self.call(self.server.start(host, 0))
        self.control_port = self.call(self.control_plane.start("127.0.0.1", 0))
        self.call_sync(self._lead_topic)

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    def call_sync(self, function):
        async def run():
            return function()

        return self.call(run())

    def _lead_topic(self) -> None:
        self.metadata.update_brokers([self.live_broker()])
        partitions = {}
        for p in range(PARTITIONS):
            state = PartitionState(
                leader=BROKER_ID, leader_epoch=0, isr=(BROKER_ID,), replicas=(BROKER_ID,)
            )
            self.replicas.become_leader_or_follower(TOPIC, p, state, TopicConfig())
            partitions[p] = PartitionMetadata(p, BROKER_ID, 0, (BROKER_ID,), (BROKER_ID,))
        self.metadata.update_topic(TopicMetadata(TOPIC, uuid.uuid4(), partitions))

    def live_broker(self, rack: str | None = None) -> LiveBroker:
        endpoints = {
            CLIENT_LISTENER.name: HostPort(self.host, self.port),
            CONTROL_PLANE_LISTENER.name: HostPort("127.0.0.1", self.control_port),
        }
        return LiveBroker(BROKER_ID, endpoints, rack)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self.call(self.server.stop())
        self.call(self.control_plane.stop())
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
