"""The controller's reads and writes in ZooKeeper, every write fenced by the controller epoch.

A write to partition state is one ZooKeeper transaction: a check that ``/controller_epoch`` still
has the version this controller set when it was elected, then the write itself (with the state
znode's expected version). If another controller has been elected since, the check fails and
nothing is written: a deposed controller cannot overwrite its successor (no split brain).

Watches are registered by the caller's callbacks; kazoo fires each once, so every read that
must keep watching passes its callback again. This is the production ``ports.Store``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping

from odradek.common.partitions import TopicPartition
from odradek.controller.model import (
    BrokerRegistration,
    ClusterModel,
    ReplicaAssignment,
    with_assignments,
)
from odradek.controller.ports import FencedError, StaleStateVersionError
from odradek.zk.client import (
    CheckOp,
    CreateOp,
    DeleteOp,
    SetDataOp,
    WatchCallback,
    ZkClient,
)
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError, ZkDataError
from odradek.zk.paths import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    DELETE_TOPICS_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    TOPICS_PATH,
    BrokerInfo,
    EntityConfig,
    LogDirEventNotification,
    PartitionState,
    TopicAssignment,
    broker_id_from_name,
    broker_path,
    delete_topic_path,
    partition_path,
    partition_state_path,
    topic_config_path,
    topic_partitions_path,
    topic_path,
)

log = logging.getLogger(__name__)

# A state create that met an existing node tries again this often (the node, or a parent, was
# made by someone else: adopted, or no longer created).
STATE_CREATE_RETRIES = 2


__all__ = ["ControllerStore", "FencedError", "StaleStateVersionError"]

ASSIGNMENT_WRITE_ATTEMPTS_MAX = 5  # the topic znode moved under us (CreatePartitions): reread


class ControllerStore:
    def __init__(self, zk: ZkClient):
        self.zk = zk

    # -- reads ---------------------------------------------------------------------------

    async def live_brokers(self, watch: WatchCallback | None) -> dict[int, BrokerRegistration]:
        """Each registered broker with its broker epoch (the czxid of its znode, as Kafka's)."""
        brokers = {}
        for name in await self.zk.achildren(BROKER_IDS_PATH, watch=watch):
            broker_id = broker_id_from_name(name)
            try:
                data, stat = await self.zk.aget(broker_path(broker_id))
                info = BrokerInfo.decode(data, broker_path(broker_id))
                brokers[broker_id] = BrokerRegistration(info, stat.czxid)
            except NoNodeError:
                continue  # gone between the listing and the read
            except ZkDataError as e:
                log.error("ignoring broker %d: %s", broker_id, e)
        return brokers

    async def topic_names(self, watch: WatchCallback | None) -> list[str]:
        return sorted(await self.zk.achildren(TOPICS_PATH, watch=watch))

    async def assignment(self, topic: str, watch: WatchCallback | None) -> TopicAssignment | None:
        try:
            data, _ = await self.zk.aget(topic_path(topic), watch=watch)
        except NoNodeError:
            return None
        return TopicAssignment.decode(data, topic_path(topic))

    async def partition_state(self, tp: TopicPartition) -> tuple[PartitionState, int] | None:
        try:
            data, stat = await self.zk.aget(partition_state_path(*tp))
        except NoNodeError:
            return None
        return PartitionState.decode(data, partition_state_path(*tp)), stat.version

    async def log_dir_event_notifications(
        self, watch: WatchCallback | None
    ) -> list[tuple[str, int]]:
        """Each ``log_dir_event_<seq>`` node's name and the broker it names, oldest first; a
        node that does not decode is logged and skipped (and deleted with the others)."""
        names = sorted(await self.zk.achildren(LOG_DIR_EVENT_NOTIFICATION_PATH, watch=watch))
        found = []
        for name in names:
            path = f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}"
            try:
                data, _ = await self.zk.aget(path)
                found.append((name, LogDirEventNotification.decode(data, path).broker_id))
            except NoNodeError:
                continue
            except ZkDataError as e:
                log.error("ignoring %s: %s", path, e)
                found.append((name, -1))
        return found

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            with contextlib.suppress(NoNodeError):
                await self.zk.adelete(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}")

    async def topics_to_delete(self, watch: WatchCallback | None) -> list[str]:
        return sorted(await self.zk.achildren(DELETE_TOPICS_PATH, watch=watch))

    async def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides (``/config/topics/<topic>``), read when they are needed, as
        Kafka's controller reads ``unclean.leader.election.enable`` at election time."""
        try:
            data, _ = await self.zk.aget(topic_config_path(topic))
        except NoNodeError:
            return {}
        return dict(EntityConfig.decode(data, topic_config_path(topic)).config)

    # -- fenced writes -------------------------------------------------------------------

    def _fence(self, model: ClusterModel) -> CheckOp:
        return CheckOp(CONTROLLER_EPOCH_PATH, model.epoch_zk_version)

    async def write_state(
        self,
        model: ClusterModel,
        tp: TopicPartition,
        state: PartitionState,
        *,
        attempts_left: int = STATE_CREATE_RETRIES,
    ) -> None:
        """Create or update a partition's state znode; updates the model on success."""
        path = partition_state_path(*tp)
        version = model.state_versions.get(tp)
        ops: list = [self._fence(model)]
        if version is None:
            for parent in (topic_partitions_path(tp[0]), partition_path(*tp)):
                if await self.zk.aexists(parent) is None:
                    ops.append(CreateOp(parent))
            ops.append(CreateOp(path, state.encode()))
        else:
            ops.append(SetDataOp(path, state.encode(), version))
        try:
            await self.zk.atransaction(ops)
        except NodeExistsError:
            # A state left by an earlier controller: adopt its version and write over it. Or a
            # parent that another partition's write of this event created meanwhile (they are
            # pipelined): the next attempt no longer creates it.
            if attempts_left == 0:
                raise
            stat = await self.zk.aexists(path)
            if stat is not None:
                model.state_versions[tp] = stat.version
            return await self.write_state(model, tp, state, attempts_left=attempts_left - 1)
        except Exception as e:
            if await self._fenced(model):
                raise FencedError(f"controller epoch {model.epoch} was superseded") from e
            if isinstance(e, BadVersionError):
                raise StaleStateVersionError(
                    f"{path} is no longer at version {version}: written by someone else"
                ) from e
            raise
        model.states[tp] = state
        model.state_versions[tp] = 0 if version is None else version + 1

    async def write_assignment(
        self, model: ClusterModel, topic: str, changes: Mapping[int, ReplicaAssignment]
    ) -> None:
        """Rewrite the partitions of ``changes`` in ``/brokers/topics/<topic>`` (see ``ports``):
        read, merge, then a fenced write conditional on the version read."""
        path = topic_path(topic)
        for _ in range(ASSIGNMENT_WRITE_ATTEMPTS_MAX):
            data, stat = await self.zk.aget(path)
            updated = with_assignments(TopicAssignment.decode(data, path), changes)
            try:
                await self.zk.atransaction(
                    [self._fence(model), SetDataOp(path, updated.encode(), stat.version)]
                )
            except Exception as e:
                if await self._fenced(model):
                    raise FencedError(f"controller epoch {model.epoch} was superseded") from e
                if isinstance(e, BadVersionError):
                    continue
                raise
            model.topics[topic] = with_assignments(model.topics[topic], changes)
            return
        raise StaleStateVersionError(
            f"{path} changed {ASSIGNMENT_WRITE_ATTEMPTS_MAX} times while it was rewritten"
        )

    async def _fenced(self, model: ClusterModel) -> bool:
        try:
            _, stat = await self.zk.aget(CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return True
        return stat.version != model.epoch_zk_version

    async def delete_topic(self, model: ClusterModel, topic: str) -> None:
        """Remove a deleted topic's znodes (states, assignment, config, the deletion request)."""
        for partition in sorted(model.topics.get(topic, TopicAssignment({})).partitions):
            for path in (partition_state_path(topic, partition), partition_path(topic, partition)):
                await self._delete_fenced(model, path)
        # The config goes before the topic: once the topic znode is gone the name may be
        # created again, and its new config must not be deleted by this deletion.
        for path in (
            topic_config_path(topic),
            topic_partitions_path(topic),
            topic_path(topic),
            delete_topic_path(topic),
        ):
            await self._delete_fenced(model, path)

    async def _delete_fenced(self, model: ClusterModel, path: str) -> None:
        with contextlib.suppress(NoNodeError):
            await self.zk.atransaction([self._fence(model), DeleteOp(path)])
