"""The controller: elected through ZooKeeper, it makes partitions live and keeps them led.

Several controller processes may run; the one holding ``/controller`` is active, with an epoch
one above its predecessor's (``zk.election``). Everything it does is an event processed one at a
time, in order, on its event loop (Kafka's ControllerEventManager); watches, session changes,
the election and AlterPartition requests only enqueue events. Pending watch events are coalesced
per key and never dropped (``events``).

The rules are Kafka's state machines (``partition_state_machine``, ``replica_state_machine``,
with the legal transitions of ``states``); this module says which transitions each event makes:

- elected (Kafka's ``onControllerFailover``): load brokers, topics and partition states; each
  partition's state from ZooKeeper (New, Online, Offline), each replica's from its broker's
  liveness; New and Offline partitions -> Online; every live broker gets UpdateMetadata and its
  LeaderAndIsr; pending deletions proceed.
- brokers changed: a broker that left (``onBrokerFailure``): the partitions it led -> Offline,
  then New and Offline partitions -> Online (a leader from the ISR; unclean only if the topic
  allows), then its replicas -> Offline (it leaves every ISR). A broker that arrived
  (``onBrokerStartup``): UpdateMetadata to all, its replicas -> Online (LeaderAndIsr), New and
  Offline partitions -> Online, then leadership of its preferred partitions back. A broker whose
  broker epoch changed (it registered again: a new session, or a restart quicker than this event)
  is both: it left, and it arrived, as Kafka handles a bounced broker.
- topics created or grown (``onNewPartitionCreation``): partitions and replicas -> New, then
  -> Online: LeaderAndIsr with ``is_new`` to the replicas.
- topics to delete: partitions -> Offline, replicas -> Offline -> DeletionStarted (StopReplica
  with delete) or DeletionIneligible (dead broker), UpdateMetadata with leader -2 to all, the
  znodes go, then everything -> NonExistent.
- AlterPartition from a leader (KIP-497, ``alter_partition``): checked against the model,
  written with a conditional write, answered with the new ISR and partition epoch; UpdateMetadata
  to every live broker (no LeaderAndIsr: an ISR change is not a leader change).
- leader balance (``leader_balance``): ElectLeaders (preferred or unclean, forwarded by a
  broker) and the periodic automatic preferred replica election (``check_leader_balance``,
  enqueued by the process's timer when ``auto.leader.rebalance.enable``): Online -> Online with
  the PREFERRED or UNCLEAN strategy; LeaderAndIsr and UpdateMetadata as for any election.
- ControlledShutdown from a broker about to stop (``controlled_shutdown``): it is recorded as
  shutting down (never a leader or a new ISR member again until it leaves or registers anew),
  the partitions it leads get another leader from their ISR, those it follows lose it from their
  ISR (StopReplica without delete to it); the answer lists what it still leads.
  to every live broker (no LeaderAndIsr: an ISR change is not a leader change). For a partition
  being reassigned, another event then finishes the reassignment if its targets are in sync.
- reassignments (KIP-455, ``reassignment``): AlterPartitionReassignments starts, replaces or
  cancels them; an elected controller resumes every one its znodes show; a broker holding a
  target replica that arrives resumes those waiting for it.

Its store, channel and election are given to it (``ports``), so unit tests run every event
against an in-memory store and a recording channel. Every state write is fenced by the controller
epoch (``FencedError``: the controller steps down), every request carries the controller epoch
and the receiving broker's epoch. Runs on one event loop; other threads only enqueue.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from odradek.cluster import elect_leaders as el
from odradek.common.partitions import TopicPartition
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.controller import alter_partition as ap
from odradek.controller import controlled_shutdown as cs
from odradek.controller import leader_balance, log_dir_events, reassignment_api
from odradek.controller.batch import RequestBatch
from odradek.controller.events import EventQueue
from odradek.controller.model import ClusterModel
from odradek.controller.partition_state_machine import ElectionStrategy, PartitionStateMachine
from odradek.controller.ports import Channel, FencedError, StaleStateVersionError, Store
from odradek.controller.reassignment import Reassignments
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.server import Served
from odradek.controller.states import PartitionState, ReplicaState
from odradek.errors import ErrorCode
from odradek.observability.metrics import ControllerMetrics
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.zk.client import SessionEvent, WatchEvent

log = logging.getLogger(__name__)

PENDING_EVENTS_RUN_MAX = 10_000  # process_pending's bound (tests): more means a runaway loop


class Election(Protocol):
    """What the controller reads of its election (``zk.election.ControllerElection``)."""

    @property
    def epoch(self) -> int | None: ...

    @property
    def epoch_zk_version(self) -> int | None: ...

    def start(self) -> None: ...

    async def resign(self) -> None: ...


class Controller:
    def __init__(
        self,
        controller_id: int,
        store: Store,
        channel: Channel,
        *,
        metrics: ControllerMetrics | None = None,
        unclean_leader_election_enable: bool = False,
        control_plane_listener_name: str = CONTROL_PLANE_LISTENER_NAME,
        leader_imbalance_per_broker_percentage: int = 10,
    ):
        self.controller_id = controller_id
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage
        self.store = store
        self.channel = channel
        self.metrics = metrics
        self.control_plane_listener_name = control_plane_listener_name
        self.partition_machine = PartitionStateMachine(
            store, unclean_leader_election_enable=unclean_leader_election_enable, metrics=metrics
        )
        self.replica_machine = ReplicaStateMachine(store)
        self.reassignments = Reassignments(store, self.replica_machine, metrics)
        self.election: Election | None = None  # set by whoever wires the election
        self.model: ClusterModel | None = None
        self.events = EventQueue()
        self._event_ids = itertools.count()  # events that must never coalesce
        self.loop: asyncio.AbstractEventLoop | None = None

    # -- running -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign (if an election is wired), then process events until ``stop`` is set."""
        self.loop = asyncio.get_running_loop()
        if self.election is not None:
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
            if self.election is not None:
                await self.election.resign()
            await self.channel.close()

    async def process_pending(self) -> int:
        """Run every event pending now and those they queue (tests drive the controller so)."""
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        ran = 0
        await asyncio.sleep(0)  # let call_soon_threadsafe puts land
        while len(self.events):
            if ran >= PENDING_EVENTS_RUN_MAX:
                raise RuntimeError(f"more than {PENDING_EVENTS_RUN_MAX} events in a row")
            name, action = await self.events.get()
            await self._process(name, action)
            ran += 1
            await asyncio.sleep(0)
        return ran

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

    # -- election and session ------------------------------------------------------------

    def elected(self, epoch: int) -> None:
        """The election's ``on_elect``."""
        self._enqueue(f"elected #{next(self._event_ids)}", lambda: self._on_elected(epoch))

    def resigned(self, reason: str) -> None:
        """The election's ``on_resign``."""
        self._enqueue(f"resigned #{next(self._event_ids)}", self._step_down)

    def on_session(self, event: SessionEvent, session_id: int | None) -> None:
        if event == SessionEvent.RECONNECTED and self.model is not None:
            # kazoo dropped the watches with the connection: read everything again.
            self._enqueue("refresh", self._refresh_all)

    @property
    def active(self) -> bool:
        return self.model is not None

    async def _step_down(self) -> None:
        if self.model is not None:
            log.info(
                "controller %d stepping down from epoch %d", self.controller_id, self.model.epoch
            )
        self.model = None
        await self.channel.set_brokers({})
        if self.metrics is not None:
            self.metrics.active.set(0)
            self.metrics.preferred_replica_imbalance.set(0)

    async def _on_elected(self, epoch: int) -> None:
        election = self.election
        zk_version = election.epoch_zk_version if election is not None else None
        if zk_version is None or election is None or election.epoch != epoch:
            return  # lost again before this event ran
        log.info("controller %d is active with epoch %d", self.controller_id, epoch)
        self.model = ClusterModel(epoch, zk_version)
        if self.metrics is not None:
            self.metrics.active.set(1)
            self.metrics.epoch.set(epoch)
        await self._refresh_all()

    def _active(self) -> ClusterModel:
        if self.model is None:
            raise FencedError("not the active controller")
        return self.model

    def _batch(self) -> RequestBatch:
        return RequestBatch(
            self._active(),
            self.controller_id,
            control_plane_listener_name=self.control_plane_listener_name,
        )

    # -- watches -------------------------------------------------------------------------

    def _watch(self, what: str, topic: str | None = None) -> Callable[[WatchEvent], None]:
        actions = {
            "brokers": self._on_brokers_change,
            "topics": self._on_topics_change,
            "deletions": self._on_deletions,
            "log dir events": self._on_log_dir_events,
        }

        def fired(event: WatchEvent) -> None:
            if what == "topic" and topic is not None:
                self._enqueue(f"topic {topic}", lambda: self._on_topic_change(topic))
            else:
                self._enqueue(what, actions[what])

        return fired

    # -- events --------------------------------------------------------------------------

    async def _refresh_all(self) -> None:
        model = self._active()
        model.set_brokers(await self.store.live_brokers(watch=self._watch("brokers")))
        await self.channel.set_brokers(model.brokers)
        model.topics.clear()
        model.states.clear()
        model.state_versions.clear()
        for topic in await self.store.topic_names(watch=self._watch("topics")):
            await self._load_topic(topic)
        PartitionStateMachine.initialise(model)
        ReplicaStateMachine.initialise(model)
        batch = self._batch()
        await self._online_partition_state_change(batch)
        self._full_state(batch, model.brokers)
        batch.send(self.channel)
        await self._on_deletions()
        await self._resume_reassignments(model.reassigning_partitions())
        await self._on_log_dir_events()
        self._update_gauges()

    async def _on_brokers_change(self) -> None:
        if self.model is None:
            return
        model = self.model
        live = await self.store.live_brokers(watch=self._watch("brokers"))
        known = set(model.brokers)
        bounced = {b for b in set(live) & known if live[b].epoch != model.broker_epochs[b]}
        departed = (known - set(live)) | bounced
        arrived = (set(live) - known) | bounced
        if bounced:
            log.info("brokers registered again (new broker epochs): %s", sorted(bounced))
        batch = self._batch()
        if departed:
            log.info("brokers left: %s", sorted(departed))
            model.set_brokers({b: r for b, r in live.items() if b not in bounced})
            await self.channel.set_brokers(model.brokers)
            await self._on_brokers_failure(departed, batch)
        model.set_brokers(live)
        await self.channel.set_brokers(model.brokers)
        if arrived:
            log.info("brokers arrived: %s", sorted(arrived))
            log_dir_events.forget_brokers(model, arrived)
            await self._on_brokers_startup(arrived, batch)
        batch.send(self.channel)
        self._update_gauges()

    async def _on_brokers_failure(self, departed: set[int], batch: RequestBatch) -> None:
        model = self._active()
        led = [tp for tp, s in model.states.items() if s.leader in departed]
        PartitionStateMachine.to_offline(model, led)
        await self._online_partition_state_change(batch)
        replicas = [
            r
            for r in ReplicaStateMachine.replicas_on(model, departed)
            if r[0][0] not in model.deleting
        ]
        await self.replica_machine.to_offline(model, replicas, batch)
        batch.add_update_metadata(model.brokers, [])  # the live brokers changed

    async def _on_brokers_startup(self, arrived: set[int], batch: RequestBatch) -> None:
        model = self._active()
        self._full_state(batch, set())
        replicas = ReplicaStateMachine.replicas_on(model, arrived)
        ReplicaStateMachine.to_online(model, replicas, batch)
        await self._online_partition_state_change(batch)
        preferred = [
            tp
            for tp in model.partitions()
            if model.replicas(tp)[0] in arrived
            and model.partition_states.get(tp) is PartitionState.ONLINE
        ]
        await self.partition_machine.to_online(
            model, preferred, batch, strategy=ElectionStrategy.PREFERRED
        )
        # Reassignments waiting for a target replica on these brokers go on (Kafka's
        # onBrokerStartup): their replicas hear the current replica set again.
        for tp in model.reassigning_partitions():
            if arrived & set(model.assignment(tp).target):
                await self.reassignments.resume(model, tp, batch)

    async def _on_topics_change(self) -> None:
        if self.model is None:
            return
        model = self.model
        names = await self.store.topic_names(watch=self._watch("topics"))
        created = [t for t in names if t not in model.topics]
        for topic in created:
            await self._load_topic(topic)
        await self._new_partitions(
            [tp for t in created if t in model.topics for tp in model.partitions(t)]
        )

    async def _on_topic_change(self, topic: str) -> None:
        """A topic's assignment changed: CreatePartitions added partitions."""
        if self.model is None or topic not in self.model.topics:
            return
        await self._load_topic(topic)
        await self._new_partitions(list(self.model.partitions(topic)))

    async def _new_partitions(self, partitions: list[TopicPartition]) -> None:
        model = self._active()
        fresh = [
            tp for tp in partitions if model.partition_states.get(tp) is PartitionState.NON_EXISTENT
        ]
        # A partition whose state znode exists already (its creation was under way when the
        # previous controller died) keeps that state; its replicas are told, as new ones.
        PartitionStateMachine.adopt(model, fresh)
        replicas = ReplicaStateMachine.replicas_of(model, fresh)
        ReplicaStateMachine.move(model, replicas, ReplicaState.NEW)
        batch = self._batch()
        for tp in fresh:
            if tp in model.states:
                batch.add_leader_and_isr(model.replicas(tp), tp, new=True)
                batch.add_update_metadata(model.brokers, [tp])
        pending = (PartitionState.NEW, PartitionState.OFFLINE)
        await self.partition_machine.to_online(
            model, [tp for tp in fresh if model.partition_states.get(tp) in pending], batch
        )
        ReplicaStateMachine.to_online(model, [r for r in replicas if r[1] in model.brokers], batch)
        await self.replica_machine.to_offline(
            model, [r for r in replicas if r[1] not in model.brokers], batch
        )
        batch.send(self.channel)
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
            model.deleting.add(topic)
            batch = self._batch()
            PartitionStateMachine.to_offline(model, partitions)
            replicas = ReplicaStateMachine.replicas_of(model, partitions)
            await self.replica_machine.to_offline(model, replicas, batch)
            live = [r for r in replicas if r[1] in model.brokers]
            ReplicaStateMachine.to_deletion_started(model, live, batch)
            ReplicaStateMachine.move(
                model,
                [r for r in replicas if r[1] not in model.brokers],
                ReplicaState.DELETION_INELIGIBLE,
            )
            if partitions:
                batch.add_deleted_partitions(model.brokers, partitions)
            batch.send(self.channel)
            await self.store.delete_topic(model, topic)
            # A deletion does not wait for the brokers' StopReplica answers (yet).
            ReplicaStateMachine.move(model, live, ReplicaState.DELETION_SUCCESSFUL)
            ReplicaStateMachine.move(model, live, ReplicaState.NON_EXISTENT)
            for replica in replicas:
                model.replica_states.forget(replica)
            PartitionStateMachine.to_non_existent(model, partitions)
            model.topics.pop(topic, None)
            model.deleting.discard(topic)
            for tp in partitions:
                model.states.pop(tp, None)
                model.state_versions.pop(tp, None)
        self._update_gauges()

    # -- failed log dirs (log_dir_events) -------------------------------------------------

    async def _on_log_dir_events(self) -> None:
        if self.model is None:
            return
        batch = self._batch()
        await log_dir_events.on_notifications(
            self.model,
            self.store,
            batch,
            self._watch("log dir events"),  # type: ignore[arg-type]
        )
        batch.send(self.channel)

    def on_broker_response(self, broker_id: int, response: Any) -> None:
        """The channel's ``on_response``: a LeaderAndIsr answer is judged as an event."""
        if getattr(response, "__api_key__", None) == ApiKey.LEADER_AND_ISR:
            self._enqueue(
                f"leader and isr response #{next(self._event_ids)}",
                lambda: self._on_leader_and_isr_response(broker_id, response),
            )

    async def _on_leader_and_isr_response(self, broker_id: int, response: Any) -> None:
        if self.model is None:
            return
        batch = self._batch()
        errors = log_dir_events.partition_errors(self.model, response)
        await log_dir_events.on_leader_and_isr_response(
            self.model, broker_id, errors, self.partition_machine, self.replica_machine, batch
        )
        batch.send(self.channel)
        self._update_gauges()

    # -- AlterPartition ------------------------------------------------------------------

    def handlers(self) -> dict[int, Served]:
        """What the controller's listener serves (``server``): api key -> versions, handler."""
        return {
            ApiKey.ALTER_PARTITION: Served((2, 3), self.alter_partition, ap.error_response),
            ApiKey.ELECT_LEADERS: Served(
                SUPPORTED_VERSIONS[ApiKey.ELECT_LEADERS], self.elect_leaders, el.error_response
            ),
            ApiKey.CONTROLLED_SHUTDOWN: Served(
                (3, 3), self.controlled_shutdown, lambda _, error: cs.response(error)
            ),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: Served(
                (0, 1), self.alter_partition_reassignments, reassignment_api.alter_error_response
            ),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: Served(
                (0, 0), self.list_partition_reassignments, reassignment_api.list_error_response
            ),
        }

    async def decide(
        self,
        name: str,
        decision: Callable[[], Awaitable[Any]],
        refusal: Callable[[ErrorCode], Any],
    ) -> Any:
        """Run ``decision`` as an event, in order with the others, and return its answer.

        A controller that is not active, or steps down meanwhile, answers ``refusal``
        (NOT_CONTROLLER); a decision that fails (a bug) answers UNKNOWN_SERVER_ERROR. Called by
        the listener's handlers on the controller's event loop."""
        if self.model is None:
            return refusal(ErrorCode.not_controller)
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            if self.model is None:
                answered.set_result(refusal(ErrorCode.not_controller))
                return
            try:
                response = await decision()
            except FencedError:
                answered.set_result(refusal(ErrorCode.not_controller))
                raise
            except BaseException:
                answered.set_result(refusal(ErrorCode.unknown_server_error))
                raise
            answered.set_result(response)

        self.events.put(f"{name} #{next(self._event_ids)}", run)
        return await answered

    async def alter_partition(self, request: Any) -> Any:
        """Answer an AlterPartition request (KIP-497)."""
        return await self.decide(
            "alter partition",
            lambda: self._on_alter_partition(request),
            lambda error: ap.error_response(request, error),
        )

    async def _on_alter_partition(self, request: Any) -> Any:
        model = self.model
        if model is None:
            return ap.error_response(request, ErrorCode.not_controller)
        error = ap.check_broker(model, int(request.broker_id), int(request.broker_epoch))
        if error is not ErrorCode.none:
            log.info(
                "refusing AlterPartition from broker %d: broker epoch %d is not the live one (%s)",
                request.broker_id,
                request.broker_epoch,
                model.broker_epochs.get(int(request.broker_id)),
            )
            return ap.error_response(request, error)
        results = []
        batch = self._batch()
        for proposed in ap.proposals(request):
            results.append(await self._alter_one(model, int(request.broker_id), proposed, batch))
        batch.send(self.channel)
        return ap.build_response(request.__version__, ErrorCode.none, results)

    async def _alter_one(
        self, model: ClusterModel, broker_id: int, proposed: ap.ProposedIsr, batch: RequestBatch
    ) -> ap.PartitionResult:
        def result(error: ErrorCode, tp: TopicPartition | None = None) -> ap.PartitionResult:
            if error is not ErrorCode.none or tp is None:
                return ap.PartitionResult(proposed.topic_id, proposed.partition_index, error)
            return ap.PartitionResult(
                proposed.topic_id,
                proposed.partition_index,
                error,
                model.states[tp],
                model.state_versions[tp],
            )

        tp = ap.resolve(model, proposed)
        if isinstance(tp, ErrorCode):
            return result(tp)
        decided = ap.check_partition(model, broker_id, tp, proposed)
        if isinstance(decided, ErrorCode):
            log.info(
                "AlterPartition from broker %d for %s-%d refused: %s", broker_id, *tp, decided.name
            )
            return result(decided)
        if decided is model.states[tp]:
            return result(ErrorCode.none, tp)
        try:
            await self.store.write_state(model, tp, decided)
        except StaleStateVersionError as e:
            log.warning("AlterPartition for %s-%d: %s", *tp, e)
            loaded = await self.store.partition_state(tp)
            if loaded is not None:
                model.states[tp], model.state_versions[tp] = loaded
            return result(ErrorCode.invalid_update_version)
        log.info(
            "ISR of %s-%d is now %s (partition epoch %d), as leader %d asked",
            *tp,
            list(decided.isr),
            model.state_versions[tp],
            broker_id,
        )
        batch.add_update_metadata(model.brokers, [tp])
        if model.is_reassigning(tp):
            self._enqueue(
                f"reassignment isr change {tp[0]}-{tp[1]}", lambda: self._on_reassignment_isr(tp)
            )
        return result(ErrorCode.none, tp)

    # -- leader balance ------------------------------------------------------------------

    async def elect_leaders(self, request: Any) -> Any:
        """Answer an ElectLeaders request (forwarded by a broker)."""
        return await self.decide(
            "elect leaders",
            lambda: self._on_elect_leaders(request),
            lambda error: el.error_response(request, error),
        )

    async def _on_elect_leaders(self, request: Any) -> Any:
        model = self._active()
        try:
            asked = await el.parse_in_slices(request)
        except el.InvalidElectionRequest as e:
            return await el.error_response_in_slices(request, ErrorCode.invalid_request, str(e))
        batch = self._batch()
        outcomes = await leader_balance.elect(
            model, self.partition_machine, asked.partitions, asked.election_type, batch
        )
        batch.send(self.channel)
        self._update_gauges()
        return await el.build_response_in_slices(
            request.__version__, outcomes, all_partitions=asked.partitions is None
        )

    def check_leader_balance(self) -> None:
        """Kafka's AutoPreferredReplicaLeaderElection event; the process's timer calls it."""
        self._enqueue("auto leader rebalance", self._on_check_leader_balance)

    async def _on_check_leader_balance(self) -> None:
        if self.model is None:
            return
        model = self.model
        candidates = leader_balance.rebalance_candidates(
            model, self.leader_imbalance_per_broker_percentage, self._being_reassigned
        )
        if candidates:
            batch = self._batch()
            await leader_balance.elect(
                model, self.partition_machine, candidates, el.ElectionType.PREFERRED, batch
            )
            batch.send(self.channel)
        self._update_gauges()

    def _being_reassigned(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is being reassigned (KIP-455): the automatic rebalance leaves it to
        the reassignment."""
        return self.model is not None and self.model.is_reassigning(tp)

    # -- ControlledShutdown --------------------------------------------------------------

    async def controlled_shutdown(self, request: Any) -> Any:
        """Answer a ControlledShutdown request (``controlled_shutdown``)."""
        return await self.decide(
            "controlled shutdown", lambda: self._on_controlled_shutdown(request), cs.response
        )

    async def _on_controlled_shutdown(self, request: Any) -> Any:
        batch = self._batch()
        answer = await cs.decide(
            self._active(),
            request,
            self.partition_machine,
            self.replica_machine,
            batch,
            self.metrics,
        )
        batch.send(self.channel)
        self._update_gauges()
        return answer

    # -- reassignment (KIP-455: ``reassignment``, ``reassignment_api``) -------------------

    async def alter_partition_reassignments(self, request: Any) -> Any:
        return await self.decide(
            "alter partition reassignments",
            lambda: self._on_alter_partition_reassignments(request),
            lambda error: reassignment_api.alter_error_response(request, error),
        )

    async def list_partition_reassignments(self, request: Any) -> Any:
        async def listed() -> Any:
            return await reassignment_api.list_response(request, self._active())

        return await self.decide(
            "list partition reassignments",
            listed,
            lambda error: reassignment_api.list_error_response(request, error),
        )

    async def _on_alter_partition_reassignments(self, request: Any) -> Any:
        model = self._active()
        batch = self._batch()
        results = await self.reassignments.alter(
            model,
            await reassignment_api.wanted_in_slices(request),
            batch,
            deleting=await self.store.topics_to_delete(watch=None),
            allow_replication_factor_change=reassignment_api.allow_replication_factor_change(
                request
            ),
        )
        batch.send(self.channel)
        self._update_gauges()
        return await reassignment_api.alter_response_in_slices(request, results)

    async def _on_reassignment_isr(self, tp: TopicPartition) -> None:
        """An ISR change of a partition being reassigned was committed: maybe it is done."""
        if self.model is None:
            return
        batch = self._batch()
        if await self.reassignments.maybe_complete(self.model, tp, batch):
            batch.send(self.channel)
            self._update_gauges()

    async def _resume_reassignments(self, partitions: list[TopicPartition]) -> None:
        model = self._active()
        for tp in partitions:
            batch = self._batch()
            log.info("resuming the reassignment of %s-%d", *tp)
            await self.reassignments.resume(model, tp, batch)
            batch.send(self.channel)

    # -- helpers -------------------------------------------------------------------------

    async def _online_partition_state_change(self, batch: RequestBatch) -> None:
        model = self._active()
        candidates = self.partition_machine.online_state_change_candidates(model)
        await self.partition_machine.to_online(model, candidates, batch)

    def _full_state(self, batch: RequestBatch, leader_and_isr_to: Iterable[int]) -> None:
        """UpdateMetadata of every partition to every live broker; LeaderAndIsr of its
        partitions to each of ``leader_and_isr_to``."""
        model = self._active()
        with_state = [tp for tp in model.partitions() if tp in model.states]
        batch.add_update_metadata(model.brokers, with_state)
        for broker_id in leader_and_isr_to:
            for tp in with_state:
                if broker_id in model.replicas(tp):
                    batch.add_leader_and_isr([broker_id], tp)

    def _update_gauges(self) -> None:
        if self.metrics is not None and self.model is not None:
            self.metrics.live_brokers.set(len(self.model.brokers))
            self.metrics.offline_partitions.set(len(self.model.offline_partitions()))
            self.metrics.preferred_replica_imbalance.set(leader_balance.imbalance_count(self.model))
            self.metrics.shutting_down_brokers.set(len(self.model.shutting_down))
            self.metrics.reassigning_partitions.set(len(self.model.reassigning_partitions()))
