"""The controller: elected through ZooKeeper, it makes partitions live and keeps them led.

Several controller processes may run; the one holding ``/controller`` is active, with an epoch
one above its predecessor's (``zk.election``). Everything it does is an event processed one at a
time, in order, on its event loop (Kafka's ControllerEventManager):

- elected: load brokers, topics and partition states from ZooKeeper (the source of truth), give
  every partition without a state a leader (the first live replica of its assignment), re-elect
  partitions whose leader is gone, then send every live broker UpdateMetadata and its
  LeaderAndIsr.
- brokers changed (``/brokers/ids``): a departed broker's partitions get a new leader from the
  ISR (``placement.elect_leader_offline``; none if no ISR replica is live, unless unclean
  election is enabled); an arriving broker gets the full state, leads again what nobody could
  take over, and takes back the partitions it is the preferred leader of. A broker whose broker
  epoch changed (it registered again: a new session, or a restart quicker than this event) is
  treated as arriving: it gets the full state, under its new epoch.
- topics created (``/brokers/topics``) or grown: initialise their new partitions; their replicas
  are new (LeaderAndIsr ``is_new``), so a broker creates them on a healthy log dir even while
  another of its log dirs is offline.
- topics to delete (``/admin/delete_topics``): StopReplica with delete to every live replica,
  UpdateMetadata so caches forget them, then the topic's znodes go.

Every state written to ZooKeeper is fenced by the controller epoch (``store``), and every request
to brokers carries it, so a deposed controller can neither write nor be obeyed. Every request
also carries the receiving broker's epoch (the czxid of its registration), so a broker never
applies what was decided for an earlier incarnation of it. A leader epoch grows by one at every
leader change. If the session is lost the controller steps down at once and a new election
starts. Pending events are coalesced per key and never dropped (``events``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable

from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.controller import requests
from odradek.controller.channel import ControllerChannels
from odradek.controller.events import EventQueue
from odradek.controller.model import NO_LEADER, ClusterModel, TopicPartition
from odradek.controller.placement import (
    elect_leader_offline,
    elect_preferred_leader,
)
from odradek.controller.store import ControllerStore, FencedError
from odradek.observability.metrics import ControllerMetrics
from odradek.zk.client import SessionEvent, WatchEvent, ZkClient
from odradek.zk.election import ControllerElection
from odradek.zk.paths import PartitionState

log = logging.getLogger(__name__)


class Controller:
    def __init__(
        self,
        zk: ZkClient,
        controller_id: int,
        *,
        channels: ControllerChannels | None = None,
        metrics: ControllerMetrics | None = None,
        unclean_leader_election: Callable[[str], bool] = lambda topic: False,
        control_plane_listener_name: str = CONTROL_PLANE_LISTENER_NAME,
    ):
        self.zk = zk
        self.controller_id = controller_id
        self.control_plane_listener_name = control_plane_listener_name
        self.store = ControllerStore(zk)
        self.channels = channels or ControllerChannels(control_plane_listener_name)
        self.metrics = metrics
        self.unclean_leader_election = unclean_leader_election
        self.model: ClusterModel | None = None
        self.events = EventQueue()
        self._election_events = itertools.count()  # each election event has a key of its own
        self.loop: asyncio.AbstractEventLoop | None = None
        self.election = ControllerElection(
            zk, controller_id, on_elect=self._elected, on_resign=self._resigned
        )

    # -- running -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, then process events until ``stop`` is set."""
        self.loop = asyncio.get_running_loop()
        self.zk.add_session_listener(self._on_session, loop=self.loop)
        self.election.start()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                getting = asyncio.ensure_future(self.events.get())
                done, _ = await asyncio.wait(
                    {getting, stopping}, return_when=asyncio.FIRST_COMPLETED
                )
                if getting not in done:
                    getting.cancel()
                    break
                name, action = getting.result()
                await self._process(name, action)
        finally:
            stopping.cancel()
            if self.election.is_controller:
                await self.election.resign()
            await self.channels.close()

    async def _process(self, name: str, action: Callable[[], Awaitable[None]]) -> None:
        try:
            await action()
        except FencedError as e:
            log.warning("stepping down: %s", e)
            await self._step_down()
        except Exception:
            log.exception("controller event %s failed", name)

    def _enqueue(self, name: str, action: Callable[[], Awaitable[None]]) -> None:
        """Queue an event from any thread; one already pending under ``name`` absorbs it."""
        if self.loop is None:
            return
        self.loop.call_soon_threadsafe(self.events.put, name, action)

    # -- election ------------------------------------------------------------------------

    def _elected(self, epoch: int) -> None:
        self._enqueue(f"elected #{next(self._election_events)}", lambda: self._on_elected(epoch))

    def _resigned(self, reason: str) -> None:
        self._enqueue(f"resigned #{next(self._election_events)}", self._step_down)

    async def _step_down(self) -> None:
        if self.model is not None:
            log.info(
                "controller %d stepping down from epoch %d", self.controller_id, self.model.epoch
            )
        self.model = None
        await self.channels.set_brokers({})
        if self.metrics is not None:
            self.metrics.active.set(0)

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:
        if event == SessionEvent.RECONNECTED and self.model is not None:
            # kazoo dropped the watches with the connection: read everything again.
            self._enqueue("refresh", self._refresh_all)

    async def _on_elected(self, epoch: int) -> None:
        zk_version = self.election.epoch_zk_version
        if zk_version is None or self.election.epoch != epoch:
            return  # lost again before this event ran
        log.info("controller %d is active with epoch %d", self.controller_id, epoch)
        self.model = ClusterModel(epoch, zk_version)
        if self.metrics is not None:
            self.metrics.active.set(1)
            self.metrics.epoch.set(epoch)
        await self._refresh_all()

    async def _refresh_all(self) -> None:
        model = self._active()
        live = await self.store.live_brokers(watch=self._watch("brokers"))
        model.set_brokers(live)
        await self.channels.set_brokers(model.brokers)
        model.topics.clear()
        for topic in await self.store.topic_names(watch=self._watch("topics")):
            await self._load_topic(topic)
        await self._initialise_new_partitions(list(model.partitions()))
        await self._elect_leaders(model.offline_partitions())
        self._send_full_state(model.live_broker_ids)
        await self._on_deletions()
        self._update_gauges()

    def _active(self) -> ClusterModel:
        if self.model is None:
            raise FencedError("not the active controller")
        return self.model

    # -- watches -------------------------------------------------------------------------

    def _watch(self, what: str, topic: str | None = None) -> Callable[[WatchEvent], None]:
        actions = {
            "brokers": self._on_brokers_change,
            "topics": self._on_topics_change,
            "deletions": self._on_deletions,
        }

        def fired(event: WatchEvent) -> None:
            if what == "topic":
                self._enqueue(f"topic {topic}", lambda: self._on_topic_change(topic))
            else:
                self._enqueue(what, actions[what])

        return fired

    # -- events --------------------------------------------------------------------------

    async def _on_brokers_change(self) -> None:
        if self.model is None:
            return
        model = self.model
        live = await self.store.live_brokers(watch=self._watch("brokers"))
        departed = set(model.brokers) - set(live)
        bounced = {
            b for b in set(live) & set(model.brokers) if live[b].epoch != model.broker_epochs[b]
        }
        arrived = (set(live) - set(model.brokers)) | bounced
        if bounced:
            log.info("brokers registered again (new broker epochs): %s", sorted(bounced))
        model.set_brokers(live)
        await self.channels.set_brokers(model.brokers)
        if departed:
            log.info("brokers left: %s", sorted(departed))
            await self._elect_leaders(
                [
                    tp
                    for tp in model.partitions()
                    if model.states.get(tp) and model.states[tp].leader in departed
                ]
            )
        if arrived:
            log.info("brokers arrived: %s", sorted(arrived))
            self._send_full_state(arrived)
            await self._elect_leaders(model.offline_partitions())
            await self._return_preferred_leaders(arrived)
        self._update_gauges()

    async def _on_topics_change(self) -> None:
        if self.model is None:
            return
        model = self.model
        names = await self.store.topic_names(watch=self._watch("topics"))
        created = [t for t in names if t not in model.topics]
        for topic in created:
            await self._load_topic(topic)
        new_partitions = [tp for t in created if t in model.topics for tp in model.partitions(t)]
        await self._initialise_new_partitions(new_partitions)
        self._update_gauges()

    async def _on_topic_change(self, topic: str) -> None:
        """A topic's assignment changed: CreatePartitions added partitions."""
        if self.model is None or topic not in self.model.topics:
            return
        await self._load_topic(topic)
        await self._initialise_new_partitions(list(self.model.partitions(topic)))
        self._update_gauges()

    async def _load_topic(self, topic: str) -> None:
        model = self._active()
        assignment = await self.store.assignment(topic, watch=self._watch("topic", topic))
        if assignment is None:
            return
        model.topics[topic] = assignment
        for tp in model.partitions(topic):
            if tp not in model.states:
                loaded = await self.store.partition_state(tp)
                if loaded is not None:
                    model.states[tp], model.state_versions[tp] = loaded

    async def _on_deletions(self) -> None:
        if self.model is None:
            return
        model = self.model
        for topic in await self.store.topics_to_delete(watch=self._watch("deletions")):
            partitions = list(model.partitions(topic)) if topic in model.topics else []
            log.info("deleting topic %s (%d partitions)", topic, len(partitions))
            for broker_id in model.live_broker_ids:
                mine = [tp for tp in partitions if broker_id in model.replicas(tp)]
                if mine:
                    self.channels.send(
                        broker_id,
                        requests.stop_replica(
                            model, self.controller_id, broker_id, mine, delete=True
                        ),
                    )
            if partitions:
                self._send_update_metadata(model.live_broker_ids, partitions, deleted=True)
            await self.store.delete_topic(model, topic)
            model.topics.pop(topic, None)
            for tp in partitions:
                model.states.pop(tp, None)
                model.state_versions.pop(tp, None)
        self._update_gauges()

    # -- leadership ----------------------------------------------------------------------

    async def _initialise_new_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        model = self._active()
        fresh = [tp for tp in partitions if tp not in model.states]
        for tp in fresh:
            replicas = model.replicas(tp)
            live = [r for r in replicas if r in model.brokers]
            state = PartitionState(
                leader=live[0] if live else NO_LEADER,
                leader_epoch=0,
                isr=tuple(live) if live else tuple(replicas),
                controller_epoch=model.epoch,
            )
            await self.store.write_state(model, tp, state)
        if fresh:
            # Kafka's NewReplica state: these replicas exist nowhere yet.
            self._send_leader_and_isr(fresh, new=True)
            self._send_update_metadata(model.live_broker_ids, fresh)

    async def _elect_leaders(self, partitions: list[TopicPartition]) -> None:
        """New leaders for partitions whose leader is not live (clean unless the topic allows)."""
        model = self._active()
        changed = []
        for tp in partitions:
            current = model.states.get(tp)
            if current is None or current.leader in model.brokers:
                continue
            election = elect_leader_offline(
                list(model.replicas(tp)),
                list(current.isr),
                model.live_broker_ids,
                self.unclean_leader_election(tp[0]),
            )
            if election.leader is None:
                if current.leader != NO_LEADER:
                    await self._write(tp, current, NO_LEADER, current.isr)
                    changed.append(tp)
                continue
            if election.unclean:
                log.warning("unclean leader election for %s-%d: %d", *tp, election.leader)
            await self._write(tp, current, election.leader, tuple(election.isr))
            changed.append(tp)
        if changed:
            self._send_leader_and_isr(changed)
            self._send_update_metadata(model.live_broker_ids, changed)

    async def _return_preferred_leaders(self, arrived: set[int]) -> None:
        model = self._active()
        changed = []
        for tp in model.partitions():
            current = model.states.get(tp)
            preferred = model.replicas(tp)[0]
            if current is None or preferred not in arrived or current.leader == preferred:
                continue
            election = elect_preferred_leader(
                list(model.replicas(tp)), list(current.isr), model.live_broker_ids
            )
            if election.leader is not None:
                await self._write(tp, current, election.leader, tuple(election.isr))
                changed.append(tp)
        if changed:
            self._send_leader_and_isr(changed)
            self._send_update_metadata(model.live_broker_ids, changed)

    async def _write(
        self, tp: TopicPartition, current: PartitionState, leader: int, isr: tuple[int, ...]
    ) -> None:
        model = self._active()
        state = PartitionState(
            leader=leader,
            leader_epoch=current.leader_epoch + 1,
            isr=isr,
            controller_epoch=model.epoch,
        )
        await self.store.write_state(model, tp, state)

    # -- requests ------------------------------------------------------------------------

    def _send_full_state(self, brokers: Iterable[int]) -> None:
        model = self._active()
        all_partitions = [tp for tp in model.partitions() if tp in model.states]
        self._send_update_metadata(model.live_broker_ids, all_partitions)
        for broker_id in brokers:
            mine = [tp for tp in all_partitions if broker_id in model.replicas(tp)]
            if mine:
                self.channels.send(broker_id, self._leader_and_isr(broker_id, mine))

    def _leader_and_isr(
        self, broker_id: int, partitions: list[TopicPartition], *, new: bool = False
    ) -> requests.LeaderAndIsrRequest:
        return requests.leader_and_isr(
            self._active(),
            self.controller_id,
            broker_id,
            partitions,
            new=new,
            control_plane_listener_name=self.control_plane_listener_name,
        )

    def _send_leader_and_isr(self, partitions: list[TopicPartition], *, new: bool = False) -> None:
        model = self._active()
        for broker_id in model.live_broker_ids:
            mine = [tp for tp in partitions if broker_id in model.replicas(tp)]
            if mine:
                self.channels.send(broker_id, self._leader_and_isr(broker_id, mine, new=new))

    def _send_update_metadata(
        self, brokers: Iterable[int], partitions: list[TopicPartition], *, deleted: bool = False
    ) -> None:
        model = self._active()
        request = requests.update_metadata(model, self.controller_id, partitions, deleted=deleted)
        for broker_id in brokers:
            self.channels.send(broker_id, requests.addressed_to(request, model, broker_id))

    def _update_gauges(self) -> None:
        if self.metrics is not None and self.model is not None:
            self.metrics.live_brokers.set(len(self.model.brokers))
            self.metrics.offline_partitions.set(len(self.model.offline_partitions()))
