"""Test doubles for the controller's unit tests: an in-memory store, a recording channel, an
election that is told who won; and the reassignment requests two test modules send.

They stand in for ZooKeeper and the brokers' connections only in tests of the controller's state
logic; ``tests/integration`` runs the same controller against a real ZooKeeper and real brokers.
The store keeps ZooKeeper's semantics that the controller relies on: one-shot watches, writes
fenced by the controller epoch's znode version, conditional writes on the state znode's version
(each write bumps it by one), broker epochs that are new for every registration (czxids).
"""

from __future__ import annotations

import base64
import itertools
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from odradek.common.partitions import TopicPartition
from odradek.controller.controller import Controller
from odradek.controller.handlers import served
from odradek.controller.model import (
    BrokerRegistration,
    ClusterModel,
    ReplicaAssignment,
    with_assignments,
)
from odradek.controller.ports import FencedError, StaleStateVersionError
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.zk.client import WatchEvent, WatchKind
from odradek.zk.paths import BrokerInfo, Endpoint, TopicAssignment
from odradek.zk.paths import PartitionState as LeaderAndIsr

Watch = Callable[[WatchEvent], None]


def broker_info(broker_id: int) -> BrokerInfo:
    return BrokerInfo(
        endpoints=(
            Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),
            Endpoint("CONTROL_PLANE", "127.0.0.1", 9100 + broker_id),
        )
    )


def new_topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class InMemoryStore:
    """``ports.Store`` in memory; the ``register_*``/``create_*`` helpers play the cluster."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, tuple[LeaderAndIsr, int]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.deletions: set[str] = set()
        self.log_dir_events: dict[str, int] = {}  # log_dir_event_<seq> -> broker id
        self.epoch_zk_version = 0  # /controller_epoch's version: the fence
        self.writes: list[tuple[TopicPartition, LeaderAndIsr]] = []
        self.assignment_writes: list[tuple[str, TopicAssignment]] = []
        self._watches: dict[str, list[Watch]] = {}
        self._czxids = itertools.count(100)

    # -- playing the cluster -------------------------------------------------------------

    def _fire(self, key: str) -> None:
        for watch in self._watches.pop(key, []):
            watch(WatchEvent(WatchKind.CHILD, key))

    def _arm(self, key: str, watch: Watch | None) -> None:
        if watch is not None:
            self._watches.setdefault(key, []).append(watch)

    def register_broker(self, broker_id: int) -> int:
        """A broker (re)registers: a new znode, so a new broker epoch; returns it."""
        epoch = next(self._czxids)
        self.brokers[broker_id] = BrokerRegistration(broker_info(broker_id), epoch)
        self._fire("brokers")
        return epoch

    def unregister_broker(self, broker_id: int) -> None:
        del self.brokers[broker_id]
        self._fire("brokers")

    def create_topic(
        self, topic: str, partitions: Mapping[int, tuple[int, ...]], **config: str
    ) -> str:
        topic_id = new_topic_id()
        self.topics[topic] = TopicAssignment(dict(partitions), topic_id)
        if config:
            self.configs[topic] = {k.replace("_", "."): v for k, v in config.items()}
        self._fire("topics")
        return topic_id

    def add_partitions(self, topic: str, partitions: Mapping[int, tuple[int, ...]]) -> None:
        before = self.topics[topic]
        self.topics[topic] = TopicAssignment({**before.partitions, **partitions}, before.topic_id)
        self._fire(f"topic {topic}")

    def request_deletion(self, topic: str) -> None:
        self.deletions.add(topic)
        self._fire("deletions")

    def notify_log_dir_failure(self, broker_id: int) -> None:
        """A broker writes a log dir event notification (a sequential znode)."""
        self.log_dir_events[f"log_dir_event_{len(self.log_dir_events):010d}"] = broker_id
        self._fire("log dir events")

    def write_behind_the_controller(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """Someone else writes a partition's state (its znode version moves on)."""
        _, version = self.states[tp]
        self.states[tp] = (state, version + 1)

    def another_controller_elected(self) -> None:
        self.epoch_zk_version += 1

    # -- ports.Store ---------------------------------------------------------------------

    async def live_brokers(self, watch: Watch | None) -> dict[int, BrokerRegistration]:
        self._arm("brokers", watch)
        return dict(self.brokers)

    async def topic_names(self, watch: Watch | None) -> list[str]:
        self._arm("topics", watch)
        return sorted(self.topics)

    async def assignment(self, topic: str, watch: Watch | None) -> TopicAssignment | None:
        self._arm(f"topic {topic}", watch)
        return self.topics.get(topic)

    async def partition_state(self, tp: TopicPartition) -> tuple[LeaderAndIsr, int] | None:
        return self.states.get(tp)

    async def topics_to_delete(self, watch: Watch | None) -> list[str]:
        self._arm("deletions", watch)
        return sorted(self.deletions)

    async def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get(topic, {}))

    async def log_dir_event_notifications(self, watch: Watch | None) -> list[tuple[str, int]]:
        self._arm("log dir events", watch)
        return sorted(self.log_dir_events.items())

    async def delete_log_dir_event_notifications(self, names: Any) -> None:
        for name in names:
            self.log_dir_events.pop(name, None)

    def _fence(self, model: ClusterModel) -> None:
        if model.epoch_zk_version != self.epoch_zk_version:
            raise FencedError(f"controller epoch {model.epoch} was superseded")

    async def write_state(self, model: ClusterModel, tp: TopicPartition, state: Any) -> None:
        self._fence(model)
        expected = model.state_versions.get(tp)
        current = self.states.get(tp)
        if current is not None and expected is None:
            expected = current[1]  # a state left by an earlier controller: adopted, as ZK's
        if current is not None and current[1] != expected:
            raise StaleStateVersionError(f"{tp} is at version {current[1]}, not {expected}")
        version = 0 if current is None else current[1] + 1
        self.states[tp] = (state, version)
        self.writes.append((tp, state))
        model.states[tp] = state
        model.state_versions[tp] = version

    async def write_assignment(
        self, model: ClusterModel, topic: str, changes: Mapping[int, ReplicaAssignment]
    ) -> None:
        self._fence(model)
        self.topics[topic] = with_assignments(self.topics[topic], changes)
        self.assignment_writes.append((topic, self.topics[topic]))
        model.topics[topic] = with_assignments(model.topics[topic], changes)
        self._fire(f"topic {topic}")  # a data watch on the topic znode fires, as ZooKeeper's

    async def delete_topic(self, model: ClusterModel, topic: str) -> None:
        self._fence(model)
        for partition in self.topics.get(topic, TopicAssignment({})).partitions:
            self.states.pop((topic, partition), None)
        self.topics.pop(topic, None)
        self.configs.pop(topic, None)
        self.deletions.discard(topic)


class RecordingChannel:
    """``ports.Channel`` that records each request sent to a live broker, in order."""

    def __init__(self) -> None:
        self.live: set[int] = set()
        self.sent: list[tuple[int, Any]] = []
        self.closed = False

    async def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        self.live = set(brokers)

    def send(self, broker_id: int, request: Any) -> None:
        if broker_id in self.live:
            self.sent.append((broker_id, request))

    async def close(self) -> None:
        self.closed = True

    def take(self) -> list[tuple[int, Any]]:
        """What was sent since the last ``take``."""
        sent, self.sent = self.sent, []
        return sent

    def of_type(
        self, name: str, sent: list[tuple[int, Any]] | None = None
    ) -> list[tuple[int, Any]]:
        return [
            (b, r) for b, r in (self.sent if sent is None else sent) if type(r).__name__ == name
        ]


class FakeElection:
    """The election, decided by the test: ``win(epoch)`` makes the controller active."""

    def __init__(self, controller: Controller, store: InMemoryStore):
        self.controller = controller
        self.store = store
        self.epoch: int | None = None
        self.epoch_zk_version: int | None = None

    def start(self) -> None:
        pass

    async def resign(self) -> None:
        self.epoch = self.epoch_zk_version = None

    def win(self, epoch: int) -> None:
        self.store.another_controller_elected()
        self.epoch, self.epoch_zk_version = epoch, self.store.epoch_zk_version
        self.controller.elected(epoch)


def partition_states(request: Any) -> dict[TopicPartition, Any]:
    """The partition states a LeaderAndIsr or UpdateMetadata request carries, by partition."""
    return {
        (topic.topic_name, p.partition_index): p
        for topic in request.topic_states
        for p in topic.partition_states
    }


# Requests for the reassignment tests (test_reassignment, test_reassignment_forwarding).


def element_type(cls, name):
    """The class of the entries of ``cls``'s array field ``name``."""
    return cls.__dataclass_fields__[name].type.__args__[0]


def alter_request(targets: dict, version: int = 0, **fields):
    """AlterPartitionReassignments: ``targets`` maps (topic, partition) to replicas or None."""
    request_type = schemas.request_schema(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
    topic_type = element_type(request_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list] = {}
    for (topic, index), replicas in targets.items():
        by_topic.setdefault(topic, []).append(
            partition_type(
                partition_index=index, replicas=None if replicas is None else tuple(replicas)
            )
        )
    return request_type(
        topics=tuple(topic_type(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        **fields,
    )


def list_request(topics: dict | None = None):
    request_type = schemas.request_schema(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0)
    if topics is None:
        return request_type(topics=None)
    optional = request_type.__dataclass_fields__["topics"].type.__args__[0]  # tuple[X, ...]
    topic_type = optional.__args__[0]
    return request_type(
        topics=tuple(topic_type(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items())
    )


def serve(controller: Controller, request: Any) -> Any:
    """The controller listener's answer to a kio ``request`` (its handler's coroutine), as
    ``server.ControllerServer`` dispatches it, without a socket."""
    return served(controller)[request.__api_key__].handler(request)
