"""The controller: elected through ZooKeeper, it makes partitions live and keeps them led.

Several controller processes may run; the one holding ``/controller`` is active, with an epoch
one above its predecessor's (``zk.election``). Everything it does is an event processed one at a
time, in order, on its event loop (Kafka's ControllerEventManager); watches, session changes,
the election, the brokers' answers and the listener's requests only enqueue events. Pending
watch events are coalesced per key and never dropped (``events``).

The rules are Kafka's state machines (``partition_state_machine``, ``replica_state_machine``,
with the legal transitions of ``states``); this module says which event runs which rules:

- elected (Kafka's ``onControllerFailover``): load brokers, topics and partition states; each
  partition's state from ZooKeeper (New, Online, Offline), each replica's from its broker's
  liveness; New and Offline partitions -> Online; every live broker gets UpdateMetadata and its
  LeaderAndIsr; pending deletions proceed.
- brokers changed (``broker_events``): a broker that left, one that arrived, one that registered
  again with a new broker epoch (both).
- topics created or grown, topics to delete (``topic_events``).
- failed log dirs: notifications and LeaderAndIsr answers (``log_dir_events``).
- AlterPartition from a leader (KIP-497, ``alter_partition``): checked against the model,
  written with a conditional write, answered with the new ISR and partition epoch; UpdateMetadata
  to every live broker (no LeaderAndIsr: an ISR change is not a leader change). For a partition
  being reassigned, another event then finishes the reassignment if its targets are in sync.
- leader balance (``leader_balance``): ElectLeaders (preferred or unclean, forwarded by a
  broker) and the periodic automatic preferred replica election (``check_leader_balance``,
  enqueued by the process's timer when ``auto.leader.rebalance.enable``): Online -> Online with
  the PREFERRED or UNCLEAN strategy; LeaderAndIsr and UpdateMetadata as for any election.
- ControlledShutdown from a broker about to stop (``controlled_shutdown``): it is recorded as
  shutting down (never a leader or a new ISR member again until it leaves or registers anew),
  the partitions it leads get another leader from their ISR, those it follows lose it from their
  ISR (StopReplica without delete to it); the answer lists what it still leads.
- reassignments (KIP-455, ``reassignment``): AlterPartitionReassignments starts, replaces or
  cancels them; an elected controller resumes every one its znodes show; a broker holding a
  target replica that arrives resumes those waiting for it.

The requests its listener serves reach it through typed methods (``alter_partition``,
``elect_leaders``, ``controlled_shutdown``, ``alter_partition_reassignments``,
``list_partition_reassignments``): domain values in, a domain answer or ``Refused`` out. Wire
types stay at the edge: ``handlers`` decodes and encodes them (a contract keeps kio and the
protocol layer out of this module), and ``requests`` builds what ``batch`` sends the brokers.

Its store, channel and election are given to it (``ports``), so unit tests run every event
against an in-memory store and a recording channel. Every state write is fenced by the controller
epoch (``FencedError``: the controller steps down), every request carries the controller epoch
and the receiving broker's epoch. Runs on one event loop; other threads only enqueue.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from odradek.cluster.election import ElectionType, Outcome
from odradek.common.partitions import TopicPartition
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.controller import alter_partition as ap
from odradek.controller import (
    broker_events,
    leader_balance,
    log_dir_events,
    topic_events,
)
from odradek.controller import controlled_shutdown as cs
from odradek.controller.batch import RequestBatch
from odradek.controller.events import EventQueue
from odradek.controller.model import ClusterModel, ReplicaAssignment
from odradek.controller.partition_state_machine import PartitionStateMachine
from odradek.controller.pipelined import for_each
from odradek.controller.ports import (
    Channel,
    FencedError,
    StaleStateVersionError,
    Store,
    reload_state,
)
from odradek.controller.reassignment import Reassignments, Target, list_reassignments
from odradek.controller.reassignment import Result as ReassignmentResult
from odradek.controller.refused import Refused
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.errors import ErrorCode
from odradek.observability.metrics import ControllerMetrics
from odradek.zk.client import SessionEvent, WatchEvent

log = logging.getLogger(__name__)

PENDING_EVENTS_RUN_MAX = 10_000  # process_pending's bound (tests): more means a runaway loop

T = TypeVar("T")


class Election(Protocol):
    """What the controller reads of its election (``zk.election.ControllerElection``)."""

    @property
    def epoch(self) -> int | None: ...

    @property
    def epoch_zk_version(self) -> int | None: ...

    def start(self) -> None: ...

    async def resign(self) -> None: ...


class Controller:
    """One controller process's state and its event loop's work (the module docstring)."""

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
        await topic_events.load_topics(
            model,
            self.store,
            await self.store.topic_names(watch=self._watch("topics")),
            lambda topic: self._watch("topic", topic),
        )
        PartitionStateMachine.initialise(model)
        ReplicaStateMachine.initialise(model)
        batch = self._batch()
        await self.partition_machine.to_online(
            model, self.partition_machine.online_state_change_candidates(model), batch
        )
        batch.add_full_state(model.brokers)
        batch.send(self.channel)
        await self._on_deletions()
        await self._resume_reassignments(model.reassigning_partitions())
        await self._on_log_dir_events()
        self._update_gauges()

    # -- brokers (broker_events) ---------------------------------------------------------

    async def _on_brokers_change(self) -> None:
        if self.model is None:
            return
        model = self.model
        live = await self.store.live_brokers(watch=self._watch("brokers"))
        batch = self._batch()
        await broker_events.on_brokers_change(
            model,
            live,
            self.channel,
            self.partition_machine,
            self.replica_machine,
            self.reassignments,
            batch,
        )
        batch.send(self.channel)
        self._update_gauges()

    # -- topics (topic_events) -----------------------------------------------------------

    async def _on_topics_change(self) -> None:
        if self.model is None:
            return
        model = self.model
        names = await self.store.topic_names(watch=self._watch("topics"))
        created = await topic_events.on_topics_change(
            model, names, self.store, lambda topic: self._watch("topic", topic)
        )
        await self._new_partitions(created)

    async def _on_topic_change(self, topic: str) -> None:
        """A topic's assignment changed: CreatePartitions added partitions."""
        if self.model is None or topic not in self.model.topics:
            return
        await topic_events.load_topic(self.model, self.store, topic, self._watch("topic", topic))
        await self._new_partitions(list(self.model.partitions(topic)))

    async def _new_partitions(self, partitions: list[TopicPartition]) -> None:
        model = self._active()
        batch = self._batch()
        await topic_events.new_partitions(
            model, partitions, self.partition_machine, self.replica_machine, batch
        )
        batch.send(self.channel)
        self._update_gauges()

    async def _on_deletions(self) -> None:
        if self.model is None:
            return
        model = self.model
        topics = await self.store.topics_to_delete(watch=self._watch("deletions"))
        await topic_events.delete_topics(
            model, topics, self.store, self.channel, self.replica_machine, self._batch()
        )
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

    def leader_and_isr_answered(
        self, broker_id: int, answered: Sequence[log_dir_events.PartitionError]
    ) -> None:
        """A broker answered LeaderAndIsr with these partition errors (decoded by
        ``handlers.broker_responses``): judged as an event."""
        self._enqueue(
            f"leader and isr response #{next(self._event_ids)}",
            lambda: self._on_leader_and_isr_response(broker_id, answered),
        )

    async def _on_leader_and_isr_response(
        self, broker_id: int, answered: Sequence[log_dir_events.PartitionError]
    ) -> None:
        if self.model is None:
            return
        batch = self._batch()
        errors = log_dir_events.partition_errors(self.model, answered)
        await log_dir_events.on_leader_and_isr_response(
            self.model, broker_id, errors, self.partition_machine, self.replica_machine, batch
        )
        batch.send(self.channel)
        self._update_gauges()

    # -- decisions asked for by the listener (``handlers``) ------------------------------

    async def decide(self, name: str, decision: Callable[[], Awaitable[T]]) -> T | Refused:
        """Run ``decision`` as an event, in order with the others, and return its answer.

        A controller that is not active, or steps down meanwhile, answers
        ``Refused(NOT_CONTROLLER)``; a decision that fails (a bug) answers
        ``Refused(UNKNOWN_SERVER_ERROR)``. Called by the typed methods below, on the
        controller's event loop."""
        if self.model is None:
            return Refused(ErrorCode.not_controller)
        answered: asyncio.Future[T | Refused] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            if self.model is None:
                answered.set_result(Refused(ErrorCode.not_controller))
                return
            try:
                response = await decision()
            except FencedError:
                answered.set_result(Refused(ErrorCode.not_controller))
                raise
            except BaseException:
                answered.set_result(Refused(ErrorCode.unknown_server_error))
                raise
            answered.set_result(response)

        self.events.put(f"{name} #{next(self._event_ids)}", run)
        return await answered

    # -- AlterPartition (``alter_partition``) --------------------------------------------

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, proposals: Sequence[ap.ProposedIsr]
    ) -> list[ap.PartitionResult] | Refused:
        """An AlterPartition from leader ``broker_id`` (KIP-497): each proposal's result, in
        order, or the whole request refused (STALE_BROKER_EPOCH, NOT_CONTROLLER)."""
        return await self.decide(
            "alter partition", lambda: self._on_alter_partition(broker_id, broker_epoch, proposals)
        )

    async def _on_alter_partition(
        self, broker_id: int, broker_epoch: int, proposals: Sequence[ap.ProposedIsr]
    ) -> list[ap.PartitionResult] | Refused:
        model = self.model
        if model is None:
            return Refused(ErrorCode.not_controller)
        error = ap.check_broker(model, broker_id, broker_epoch)
        if error is not ErrorCode.none:
            log.info(
                "refusing AlterPartition from broker %d: broker epoch %d is not the live one (%s)",
                broker_id,
                broker_epoch,
                model.broker_epochs.get(broker_id),
            )
            return Refused(error)
        batch = self._batch()
        keys = [(p.topic_id, p.partition_index) for p in proposals]
        if len(set(keys)) == len(keys):  # the partitions' writes pipelined
            results = await for_each(
                proposals, lambda proposed: self._alter_one(model, broker_id, proposed, batch)
            )
        else:  # a partition named twice: in order, as sent
            results = [await self._alter_one(model, broker_id, p, batch) for p in proposals]
        batch.send(self.channel)
        return results

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
            await reload_state(self.store, model, tp)
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

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, Outcome] | Refused:
        """An ElectLeaders (forwarded by a broker): each partition's outcome (``partitions``
        None: every partition of the cluster)."""
        return await self.decide(
            "elect leaders", lambda: self._on_elect_leaders(election_type, partitions)
        )

    async def _on_elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, Outcome]:
        model = self._active()
        batch = self._batch()
        outcomes = await leader_balance.elect(
            model, self.partition_machine, partitions, election_type, batch
        )
        batch.send(self.channel)
        self._update_gauges()
        return outcomes

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
                model, self.partition_machine, candidates, ElectionType.PREFERRED, batch
            )
            batch.send(self.channel)
        self._update_gauges()

    def _being_reassigned(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is being reassigned (KIP-455): the automatic rebalance leaves it to
        the reassignment."""
        return self.model is not None and self.model.is_reassigning(tp)

    # -- ControlledShutdown --------------------------------------------------------------

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[TopicPartition] | Refused:
        """A ControlledShutdown from ``broker_id`` (``controlled_shutdown``): the partitions it
        still leads, or the whole request refused (BROKER_NOT_AVAILABLE, STALE_BROKER_EPOCH)."""
        return await self.decide(
            "controlled shutdown", lambda: self._on_controlled_shutdown(broker_id, broker_epoch)
        )

    async def _on_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[TopicPartition] | Refused:
        batch = self._batch()
        answer = await cs.decide(
            self._active(),
            broker_id,
            broker_epoch,
            self.partition_machine,
            self.replica_machine,
            batch,
            self.metrics,
        )
        batch.send(self.channel)
        self._update_gauges()
        return answer

    # -- reassignment (KIP-455: ``reassignment``) ----------------------------------------

    async def alter_partition_reassignments(
        self,
        wanted: list[tuple[TopicPartition, Target]],
        *,
        allow_replication_factor_change: bool,
    ) -> list[ReassignmentResult] | Refused:
        """An AlterPartitionReassignments: each partition's target replicas (None: cancel) to
        its result, in order."""
        return await self.decide(
            "alter partition reassignments",
            lambda: self._on_alter_partition_reassignments(wanted, allow_replication_factor_change),
        )

    async def list_partition_reassignments(
        self, named: Iterable[tuple[str, Iterable[int]]] | None
    ) -> list[tuple[TopicPartition, ReplicaAssignment]] | Refused:
        """A ListPartitionReassignments: the partitions of ``named`` (topic, partition indexes;
        None: every partition) being reassigned, each with its assignment."""

        async def listed() -> list[tuple[TopicPartition, ReplicaAssignment]]:
            return await list_reassignments(self._active(), named)

        return await self.decide("list partition reassignments", listed)

    async def _on_alter_partition_reassignments(
        self,
        wanted: list[tuple[TopicPartition, Target]],
        allow_replication_factor_change: bool,
    ) -> list[ReassignmentResult]:
        model = self._active()
        batch = self._batch()
        results = await self.reassignments.alter(
            model,
            wanted,
            batch,
            deleting=await self.store.topics_to_delete(watch=None),
            allow_replication_factor_change=allow_replication_factor_change,
        )
        batch.send(self.channel)
        self._update_gauges()
        return results

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

    def _update_gauges(self) -> None:
        if self.metrics is not None and self.model is not None:
            self.metrics.live_brokers.set(len(self.model.brokers))
            self.metrics.offline_partitions.set(len(self.model.offline_partitions()))
            self.metrics.preferred_replica_imbalance.set(leader_balance.imbalance_count(self.model))
            self.metrics.shutting_down_brokers.set(len(self.model.shutting_down))
            self.metrics.reassigning_partitions.set(len(self.model.reassigning_partitions()))
