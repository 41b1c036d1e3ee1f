"""What the controller is given rather than builds: its store, its channel and its clock.

The controller's rules (``controller``, ``partition_state_machine``, ``replica_state_machine``,
``alter_partition``) see ZooKeeper and the brokers only through these protocols, so unit tests
drive them with an in-memory store and a channel that records what it is asked to send
(``tests/unit/controller/controller_doubles.py``), and production wires the ZooKeeper store
(``store.ControllerStore``) and the per-broker connections (``channel.ControllerChannels``).

Store contract (``ControllerStore``'s, and every double's): reads take an optional watch callback
fired once on the next change (ZooKeeper's one-shot watches); every write is fenced by the
controller epoch (``FencedError`` if another controller was elected since) and is conditional on
the state znode's version (``StaleStateVersionError`` if it moved), and on success updates the
model's ``states`` and ``state_versions``. ``write_assignment`` (a reassignment) rewrites
only the partitions it is given, on top of what the topic's znode holds (partitions added
meanwhile are kept: the write is conditional on the znode's version, read again if it moved),
and on success updates those partitions in the model's ``topics``. ``reload_state`` is the one
way the rules read a partition's state back into the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from odradek.common.partitions import TopicPartition
from odradek.controller.model import BrokerRegistration, ClusterModel, ReplicaAssignment
from odradek.zk.client import WatchCallback
from odradek.zk.paths import BrokerInfo, TopicAssignment
from odradek.zk.paths import PartitionState as LeaderAndIsr

WallClockMs = Callable[[], int]


class FencedError(Exception):
    """A write was refused because another controller was elected meanwhile."""


class StaleStateVersionError(Exception):
    """A conditional write found the partition's state znode at another version than expected:
    something else wrote it (Kafka answers INVALID_UPDATE_VERSION)."""


class Store(Protocol):
    async def live_brokers(self, watch: WatchCallback | None) -> dict[int, BrokerRegistration]: ...

    async def topic_names(self, watch: WatchCallback | None) -> list[str]: ...

    async def assignment(
        self, topic: str, watch: WatchCallback | None
    ) -> TopicAssignment | None: ...

    async def partition_state(self, tp: TopicPartition) -> tuple[LeaderAndIsr, int] | None: ...

    async def topics_to_delete(self, watch: WatchCallback | None) -> list[str]: ...

    async def topic_config(self, topic: str) -> Mapping[str, str]: ...

    async def write_state(
        self, model: ClusterModel, tp: TopicPartition, state: LeaderAndIsr
    ) -> None: ...

    async def delete_topic(self, model: ClusterModel, topic: str) -> None: ...

    async def write_assignment(
        self, model: ClusterModel, topic: str, changes: Mapping[int, ReplicaAssignment]
    ) -> None: ...


async def reload_state(store: Store, model: ClusterModel, tp: TopicPartition) -> bool:
    """Read ``tp``'s state znode (again) into the model: after a ``StaleStateVersionError``, or
    for a partition the model has no state of yet. False when there is no state znode."""
    loaded = await store.partition_state(tp)
    if loaded is None:
        return False
    model.states[tp], model.state_versions[tp] = loaded
    return True


class Channel(Protocol):
    async def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None: ...

    def send(self, broker_id: int, request: Any) -> None: ...

    async def close(self) -> None: ...
