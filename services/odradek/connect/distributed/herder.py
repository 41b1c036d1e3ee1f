"""``DistributedHerder``: a worker of a group (Kafka's ``DistributedHerder``), and ``run()``, the
process ``odradek connect distributed`` runs.

Who does what:

- The *leader* (chosen by the group coordinator) assigns connectors and tasks
  (``IncrementalCooperativeAssignor``) from the config topic read to its end, and is the one
  writer of user changes: connector configs, deletions, target states (pause/resume/stop), restart
  requests (KIP-745) and KIP-875 offset changes. A follower asked for one raises
  ``NotLeaderError(leader_url)``; the REST layer forwards the request.
- Every member applies its assignment: it stops what was revoked (tasks first, then connectors),
  starts what is new, and rejoins at once when something was revoked (the next round hands it to
  its new owner) or after the delay a departed member's work is held for.
- The worker running a connector generates its task configs (when the connector starts, when
  its config changes, when it asks for it, when it is resumed from STOPPED) and, when they
  differ from the config topic's, writes them itself: ``task-<name>-<n>`` records then
  ``commit-<name>``. Kafka forwards them to the leader instead; we do not, since only the
  connector's owner writes a connector's task records, the config topic has one partition (so
  the commit follows its task records), and readers take task configs only from a complete
  commit. A zombie owner (one that lost its membership without knowing) could still write:
  Kafka's session keys and fencing (KIP-507, KIP-618) are not implemented.
- Every worker follows the config topic: a connector created or deleted, or a new task commit,
  makes it rejoin (the assignment changes); a changed connector config restarts the connector
  where it runs; changed task configs restart those tasks where they run; target states and
  restart requests are applied to what runs here.

Reads (``connectors``, ``connector_info``, statuses, offsets) are served by any worker from its
copy of the topics. Concurrency: every coroutine runs on the worker's event loop; one
``asyncio.Lock`` (``_lock``) serialises what changes what runs here; the Worker's and the stores'
blocking calls run in threads (``asyncio.to_thread``), each bounded by its own timeout.

Requests that check the config topic and then write it (create, update, delete, target states,
restarts, KIP-875 offsets) run one at a time under a second lock (``_requests``), as Kafka runs
each of them on its one herder thread: the check (``already exists``, ``not found``, ``stopped``)
and the write it leads to are never interleaved with another request's, and each write is read
back (the config topic read to its end) before the next request checks. Requests a follower
forwards reach the leader's herder like any other, so they queue on the same lock. Validation of
a connector config runs before the lock, as Kafka validates off its herder thread.

Its length: the herder is the one owner of a worker's group state (its generation, assignment
and the REST requests queued on it), so its tick, rebalance and request paths share a class, as
Kafka's ``DistributedHerder`` does; the protocol, assignor, membership and stores are modules
of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from odradek.client.security import client_security
from odradek.connect import storage_format as sf
from odradek.connect.connector_checks import (
    check_connector_config,
    connector_type,
    raise_on_config_errors,
    require_stopped,
    tasks_max,
)
from odradek.connect.distributed.assignor import IncrementalCooperativeAssignor
from odradek.connect.distributed.membership import Generation, GroupMember, MembershipError
from odradek.connect.distributed.protocol import CONFIG_MISMATCH, Assignment, MemberMetadata
from odradek.connect.distributed.stores import (
    ConfigSnapshot,
    ConfigStore,
    StatusStore,
    StoreError,
    TopicOffsetStore,
)
from odradek.connect.herder import (
    AlreadyExistsError,
    ConflictError,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    NotFoundError,
    NotLeaderError,
    ServiceUnavailableError,
    State,
    StatusEntry,
    TargetState,
)
from odradek.connect.worker_config import WorkerConfig

__all__ = ["DistributedHerder", "run"]

log = logging.getLogger(__name__)

JOIN_WAIT_S = 30.0  # how long a request waits for the first assignment before 409
RECONFIGURE_RETRY_S = 1.0
RECONFIGURE_ATTEMPTS = 10


class DistributedHerder:
    """See the module docstring. ``start()`` joins the group; ``close()`` leaves it."""

    def __init__(
        self,
        config: WorkerConfig,
        worker: Any,
        configs: ConfigStore,
        statuses: StatusStore,
        offsets: TopicOffsetStore,
        *,
        worker_id: str,
        url: str,
        validate: Callable[[Mapping[str, str]], dict[str, Any]],
        sink_offsets: Any,
        kafka_cluster_id: str | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
    ):
        self._config = config
        self._worker = worker
        self._configs = configs
        self._statuses = statuses
        self._offsets = offsets
        self._worker_id = worker_id
        self.url = url
        self._validate = validate
        self._sink_offsets = sink_offsets
        self._cluster_id = kafka_cluster_id
        self._clock_ms = clock_ms
        self._assignor = IncrementalCooperativeAssignor(
            config.get("scheduled.rebalance.max.delay.ms")
        )
        self._member = GroupMember(
            bootstrap_servers=config.bootstrap_servers,
            group_id=config.group_id or "",
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            metadata=self._metadata,
            assign=self._assign,
            on_assignment=self._on_assignment,
            on_revoke_all=self._revoke_all,
            security=client_security(config.security_settings()),
        )
        self._lock = asyncio.Lock()
        self._requests = asyncio.Lock()  # one check-then-write request at a time
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generation: Generation | None = None
        self._leader_url: str | None = None
        self._connectors: set[str] = set()  # assigned here
        self._tasks: set[ConnectorTaskId] = set()
        self._started_with: dict[ConnectorTaskId, dict[str, str]] = {}
        self._connector_configs: dict[str, dict[str, str]] = {}  # those started here
        self._known: set[str] = set()  # the connectors the last assignment was computed from
        self._owners: dict[ConnectorTaskId | str, str] = {}  # leader: who runs what (urls)
        self._assigned = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self._member_task: asyncio.Task[None] | None = None
        self._delay_handle: asyncio.TimerHandle | None = None
        self._closed = False
        self.failure: BaseException | None = None

    # -------------------------------------------------------------- identity

    @property
    def worker_id(self) -> str:
        return self._worker_id

    @property
    def kafka_cluster_id(self) -> str | None:
        return self._cluster_id

    @property
    def is_leader(self) -> bool:
        return self._generation is not None and self._generation.is_leader

    @property
    def generation(self) -> Generation | None:
        return self._generation

    @property
    def assigned(self) -> tuple[frozenset[str], frozenset[ConnectorTaskId]]:
        return frozenset(self._connectors), frozenset(self._tasks)

    # -------------------------------------------------------------- life cycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._configs.on_change = self._config_record
        self._member_task = self._loop.create_task(self._run_member(), name="connect-member")

    async def _run_member(self) -> None:
        try:
            await self._member.run()
        except MembershipError as e:
            self.failure = e
            log.error("this worker cannot be a member of its group: %s", e)

    async def close(self) -> None:
        """Stop the work here, leave the group, stop the stores; bounded by the callers.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._delay_handle is not None:
            self._delay_handle.cancel()
        for task in list(self._background):
            task.cancel()
        async with self._lock:
            await asyncio.to_thread(self._worker.close)
            self._connectors.clear()
            self._tasks.clear()
        await self._member.stop()
        if self._member_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._member_task, 5.0)
        for store in (self._configs, self._statuses, self._offsets):
            await asyncio.to_thread(store.stop)

    def _spawn(self, coroutine: Any) -> None:
        if self._closed:
            coroutine.close()
            return
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background step failed", exc_info=task.exception())

    # -------------------------------------------------------------- group callbacks

    def _metadata(self) -> MemberMetadata:
        snapshot = self._configs.snapshot()
        return MemberMetadata(
            self.url, snapshot.offset, tuple(self._connectors), tuple(self._tasks)
        )

    async def _assign(
        self, generation: Generation, members: Mapping[str, MemberMetadata]
    ) -> Mapping[str, Assignment]:
        snapshot = await asyncio.to_thread(self._configs.read_to_end)
        assignments = self._assignor.assign(
            leader=generation.member_id,
            leader_url=self.url,
            generation=generation.generation_id,
            config_offset=snapshot.offset,
            members=members,
            connectors=list(snapshot.connectors),
            tasks=snapshot.task_ids(),
            now_ms=self._clock_ms(),
        )
        owners: dict[ConnectorTaskId | str, str] = {}
        for member, a in assignments.items():
            for item in (*a.connectors, *a.tasks):
                owners[item] = members[member].url
        self._owners = owners
        return assignments

    async def _revoke_all(self) -> None:
        async with self._lock:
            log.warning("membership lost: stopping everything that runs here")
            await asyncio.to_thread(self._worker.stop_tasks, list(self._tasks))
            for name in list(self._connectors):
                await asyncio.to_thread(self._worker.stop_connector, name)
            self._connectors.clear()
            self._tasks.clear()
            self._generation = None
            self._assigned.clear()

    async def _on_assignment(self, generation: Generation, assignment: Assignment) -> None:
        async with self._lock:
            if assignment.error == CONFIG_MISMATCH:
                log.info("the leader had not read the config topic as far as us; rejoining")
                await asyncio.to_thread(self._configs.read_to_end)
                self._member.request_rejoin()
                return
            self._generation = generation
            self._leader_url = assignment.leader_url
            self._worker.generation = generation.generation_id
            self._statuses.generation = generation.generation_id
            snapshot = await asyncio.to_thread(self._configs.read_to_end)
            self._known = set(snapshot.connectors)
            connectors, tasks = set(assignment.connectors), set(assignment.tasks)
            stop_tasks = (self._tasks - tasks) | (set(assignment.revoked_tasks) & self._tasks)
            stop_connectors = (self._connectors - connectors) | (
                set(assignment.revoked_connectors) & self._connectors
            )
            if stop_tasks:
                await asyncio.to_thread(self._worker.stop_tasks, sorted(stop_tasks))
            for name in sorted(stop_connectors):
                await asyncio.to_thread(self._worker.stop_connector, name)
            self._tombstone_deleted(snapshot, stop_connectors, stop_tasks)
            self._tasks -= stop_tasks
            self._connectors -= stop_connectors
            for t in stop_tasks:
                self._started_with.pop(t, None)
            for name in sorted(connectors - self._connectors):
                await self._start_connector(snapshot, name)
            for task_id in sorted(tasks - self._tasks):
                await self._start_task(snapshot, task_id)
            log.info(
                "generation %d%s: running %d connectors, %d tasks; revoked %d/%d; delay %d ms",
                generation.generation_id,
                " (leader)" if generation.is_leader else "",
                len(self._connectors),
                len(self._tasks),
                len(assignment.revoked_connectors),
                len(assignment.revoked_tasks),
                assignment.delay_ms,
            )
            self._assigned.set()
        if assignment.revoked_connectors or assignment.revoked_tasks:
            self._member.request_rejoin()
        if self._delay_handle is not None:
            self._delay_handle.cancel()
            self._delay_handle = None
        if assignment.delay_ms:
            loop = asyncio.get_running_loop()
            self._delay_handle = loop.call_later(
                assignment.delay_ms / 1000, self._member.request_rejoin
            )

    def _tombstone_deleted(
        self, snapshot: ConfigSnapshot, connectors: set[str], tasks: set[ConnectorTaskId]
    ) -> None:
        """The statuses of a deleted connector go once its owner stopped it (after the
        UNASSIGNED its stop reported), as Kafka's DESTROYED does."""
        for name in connectors - set(snapshot.connectors):
            self._statuses.delete_connector(name)
            self._connector_configs.pop(name, None)
        for t in tasks:
            if t.connector not in snapshot.connectors:
                self._statuses.delete_task(t)

    async def _start_connector(self, snapshot: ConfigSnapshot, name: str) -> None:
        config = snapshot.connectors.get(name)
        if config is None:
            return
        self._connectors.add(name)
        self._connector_configs[name] = dict(config)
        target = snapshot.target_state(name)
        try:
            await asyncio.to_thread(
                self._worker.start_connector, name, config, target, self._on_reconfigure(name)
            )
        except Exception as e:  # noqa: BLE001 - reported as the connector's failure
            log.error("connector %s could not start: %s", name, e)
            self._statuses.connector(
                name, StatusEntry(State.FAILED, self._worker_id, f"{type(e).__name__}: {e}")
            )
            return
        if target is TargetState.STARTED:
            self._spawn(self._reconfigure(name))

    async def _start_task(self, snapshot: ConfigSnapshot, task_id: ConnectorTaskId) -> None:
        configs = snapshot.tasks.get(task_id.connector, ())
        connector_config = snapshot.connectors.get(task_id.connector)
        if connector_config is None or task_id.task >= len(configs):
            return
        self._tasks.add(task_id)
        task_config = dict(configs[task_id.task])
        self._started_with[task_id] = task_config
        target = snapshot.target_state(task_id.connector)
        await asyncio.to_thread(
            self._worker.start_task, task_id, connector_config, task_config, target
        )

    # -------------------------------------------------------------- task configs

    def _on_reconfigure(self, name: str) -> Callable[[], None]:
        loop = self._loop

        def request() -> None:  # the connector's thread
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(lambda: self._spawn(self._reconfigure(name)))

        return request

    async def _reconfigure(self, name: str, attempt: int = 0) -> None:
        """Generate ``name``'s task configs where it runs; write them if they changed. A write
        that fails is tried again after ``RECONFIGURE_RETRY_S``, ``RECONFIGURE_ATTEMPTS`` times
        in all (Kafka retries too; a new assignment or config change starts over)."""
        async with self._lock:
            snapshot = self._configs.snapshot()
            config = snapshot.connectors.get(name)
            if (
                name not in self._connectors
                or config is None
                or snapshot.target_state(name) is not TargetState.STARTED
            ):
                return
            try:
                max_tasks = tasks_max(config)
                configs = await asyncio.to_thread(
                    self._worker.connector_task_configs, name, max_tasks
                )
            except Exception as e:  # noqa: BLE001 - the connector reports its own failure
                log.warning("connector %s: could not generate task configs: %s", name, e)
                return
            if [dict(c) for c in snapshot.tasks.get(name, ())] == configs:
                return
            try:
                await asyncio.to_thread(self._configs.put_task_configs, name, configs)
            except StoreError as e:
                if attempt + 1 >= RECONFIGURE_ATTEMPTS:
                    log.error("connector %s: task configs not written, giving up: %s", name, e)
                    return
                log.warning("connector %s: task configs not written (%s); retrying", name, e)
                loop = asyncio.get_running_loop()
                loop.call_later(
                    RECONFIGURE_RETRY_S, lambda: self._spawn(self._reconfigure(name, attempt + 1))
                )
                return
            log.info("connector %s: wrote %d task configs", name, len(configs))

    # -------------------------------------------------------------- config topic changes

    def _config_record(self, record: sf.ConfigRecord) -> None:
        """From the config log's thread: hand the record to the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: self._spawn(self._apply_config_record(record)))

    async def _apply_config_record(self, record: sf.ConfigRecord) -> None:
        if not self._assigned.is_set():
            return  # the first assignment reads the whole topic anyway
        if isinstance(record, sf.ConnectorConfigRecord):
            if (record.properties is None) == (record.name in self._known):
                self._known ^= {record.name}  # created or deleted: the assignment changes
                self._member.request_rejoin()
            if record.properties is not None and record.name in self._connectors:
                await self._restart_connector_here(record.name)
        elif isinstance(record, sf.CommitRecord):
            self._member.request_rejoin()
            await self._restart_changed_tasks(record.name)
        elif isinstance(record, sf.TargetStateRecord) and record.state is not None:
            await self._apply_target_state(record.name, record.state)
        elif isinstance(record, sf.RestartRecord):
            await self._apply_restart(record)

    async def _restart_connector_here(self, name: str) -> None:
        async with self._lock:
            snapshot = self._configs.snapshot()
            config = snapshot.connectors.get(name)
            if name not in self._connectors or config is None:
                return
            if self._connector_configs.get(name) == config:
                return
            await asyncio.to_thread(self._worker.stop_connector, name)
            self._connectors.discard(name)
            await self._start_connector(snapshot, name)

    async def _restart_changed_tasks(self, name: str) -> None:
        async with self._lock:
            snapshot = self._configs.snapshot()
            configs = snapshot.tasks.get(name, ())
            changed = [
                t
                for t in self._tasks
                if t.connector == name
                and t.task < len(configs)
                and self._started_with.get(t) != dict(configs[t.task])
            ]
            if not changed:
                return
            await asyncio.to_thread(self._worker.stop_tasks, changed)
            self._tasks -= set(changed)
            for t in changed:
                await self._start_task(snapshot, t)

    async def _apply_target_state(self, name: str, state: TargetState) -> None:
        async with self._lock:
            mine = name in self._connectors or any(t.connector == name for t in self._tasks)
            if not mine:
                return
            await asyncio.to_thread(self._worker.set_target_state, name, state)
            if state is TargetState.STOPPED:
                stopped = {t for t in self._tasks if t.connector == name}
                self._tasks -= stopped  # stopped by the worker; the next rebalance revokes them
        if state is TargetState.STARTED and name in self._connectors:
            self._spawn(self._reconfigure(name))

    async def _apply_restart(self, record: sf.RestartRecord) -> None:
        async with self._lock:
            snapshot = self._configs.snapshot()
            name = record.name
            if name not in snapshot.connectors:
                return
            if name in self._connectors:
                entry = self._statuses.get_connector(name)
                failed = entry is not None and entry.state is State.FAILED
                if not record.only_failed or failed:
                    await asyncio.to_thread(self._worker.stop_connector, name)
                    self._connectors.discard(name)
                    await self._start_connector(snapshot, name)
            if record.include_tasks:
                restart = []
                for t in sorted(self._tasks):
                    entry = self._statuses.get_task(t)
                    failed = entry is not None and entry.state is State.FAILED
                    if t.connector == name and (not record.only_failed or failed):
                        restart.append(t)
                if restart:
                    await asyncio.to_thread(self._worker.stop_tasks, restart)
                    self._tasks -= set(restart)
                    for t in restart:
                        await self._start_task(snapshot, t)

    # -------------------------------------------------------------- helpers for requests

    async def _require_leader(self) -> None:
        if self._generation is None:
            try:
                await asyncio.wait_for(self._assigned.wait(), JOIN_WAIT_S)
            except TimeoutError:
                raise ConflictError(
                    "Cannot complete request momentarily due to no known leader URL, "
                    "likely because a rebalance was underway."
                ) from None
        if not self.is_leader:
            raise NotLeaderError("only the leader can do this", self._leader_url)

    @contextlib.asynccontextmanager
    async def _leader_request(self) -> AsyncIterator[ConfigSnapshot]:
        """Run the body as the leader's one request at a time (Kafka's herder thread), with the
        config topic read to its end: the snapshot the body checks before it writes."""
        await self._require_leader()  # waits for a first assignment outside the queue
        async with self._requests:
            if not self.is_leader:  # leadership may have moved while this request queued
                raise NotLeaderError("only the leader can do this", self._leader_url)
            yield await self._fresh()

    def _snapshot(self) -> ConfigSnapshot:
        return self._configs.snapshot()

    async def _fresh(self) -> ConfigSnapshot:
        try:
            return await asyncio.to_thread(self._configs.read_to_end)
        except StoreError as e:
            raise ServiceUnavailableError(f"the config topic cannot be read: {e}") from e

    def _config_of(self, snapshot: ConfigSnapshot, name: str) -> Mapping[str, str]:
        config = snapshot.connectors.get(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return config

    def _type(self, config: Mapping[str, str]) -> ConnectorType:
        return connector_type(self._worker.connector_class, config)

    def _info(self, snapshot: ConfigSnapshot, name: str) -> ConnectorInfo:
        config = self._config_of(snapshot, name)
        ids = [ConnectorTaskId(name, i) for i in range(len(snapshot.tasks.get(name, ())))]
        return ConnectorInfo(name, dict(config), ids, self._type(config))

    async def _write(self, fn: Callable[..., None], *args: Any, **kwargs: Any) -> ConfigSnapshot:
        try:
            await asyncio.to_thread(fn, *args, **kwargs)
        except StoreError as e:
            raise ServiceUnavailableError(f"the config topic cannot be written: {e}") from e
        return await self._fresh()

    # -------------------------------------------------------------- Herder: configs

    async def connectors(self) -> list[str]:
        return sorted(self._snapshot().connectors)

    async def connector_info(self, name: str) -> ConnectorInfo:
        return self._info(self._snapshot(), name)

    async def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._config_of(self._snapshot(), name))

    async def task_configs(self, name: str) -> list[tuple[ConnectorTaskId, dict[str, str]]]:
        snapshot = self._snapshot()
        self._config_of(snapshot, name)
        return [
            (ConnectorTaskId(name, i), dict(c)) for i, c in enumerate(snapshot.tasks.get(name, ()))
        ]

    async def validate(self, config: Mapping[str, str]) -> dict[str, Any]:
        return await asyncio.to_thread(self._validate, dict(config))

    async def put_connector_config(
        self,
        name: str,
        config: Mapping[str, str],
        *,
        allow_replace: bool,
        initial_state: TargetState = TargetState.STARTED,
    ) -> tuple[bool, ConnectorInfo]:
        config = check_connector_config(name, config)
        await self._require_leader()
        raise_on_config_errors(await self.validate(config))
        async with self._leader_request() as snapshot:
            exists = name in snapshot.connectors
            if exists and not allow_replace:
                raise AlreadyExistsError(f"Connector {name} already exists")
            target = None if exists else initial_state
            await self._write(self._configs.put_connector_config, name, config, target)
            log.info("connector %s %s", name, "updated" if exists else "created")
        # As Kafka: the answer is the config written, with the task ids known before the write
        # (not a read-back, which a later request's delete could already have emptied).
        ids = [ConnectorTaskId(name, i) for i in range(len(snapshot.tasks.get(name, ())))]
        return not exists, ConnectorInfo(name, dict(config), ids, self._type(config))

    async def delete_connector(self, name: str) -> None:
        async with self._leader_request() as snapshot:
            self._config_of(snapshot, name)
            await self._write(self._configs.remove_connector_config, name)
            log.info("connector %s deleted", name)

    # -------------------------------------------------------------- Herder: status

    def _task_entries(self, snapshot: ConfigSnapshot, name: str) -> dict[int, StatusEntry]:
        reported = self._statuses.tasks_of(name)
        unassigned = StatusEntry(State.UNASSIGNED, self._worker_id)
        count = len(snapshot.tasks.get(name, ()))
        return {i: reported.get(i, unassigned) for i in range(count)}

    async def connector_status(self, name: str) -> ConnectorStateInfo:
        snapshot = self._snapshot()
        config = self._config_of(snapshot, name)
        entry = self._statuses.get_connector(name) or StatusEntry(State.UNASSIGNED, "")
        return ConnectorStateInfo(
            name, entry, self._task_entries(snapshot, name), self._type(config)
        )

    async def task_status(self, task: ConnectorTaskId) -> StatusEntry:
        snapshot = self._snapshot()
        self._config_of(snapshot, task.connector)
        entries = self._task_entries(snapshot, task.connector)
        if task.task not in entries:
            raise NotFoundError(f"No status found for task {task.connector}-{task.task}")
        return entries[task.task]

    # -------------------------------------------------------------- Herder: restarts

    async def restart_connector(
        self, name: str, *, include_tasks: bool, only_failed: bool
    ) -> ConnectorStateInfo:
        async with self._leader_request():
            status = await self.connector_status(name)
            restart_connector = not only_failed or status.connector.state is State.FAILED
            restarting = StatusEntry(State.RESTARTING, status.connector.worker_id)
            tasks = {
                i: StatusEntry(State.RESTARTING, e.worker_id)
                if include_tasks and (not only_failed or e.state is State.FAILED)
                else e
                for i, e in status.tasks.items()
            }
            await self._write(
                self._configs.put_restart_request,
                name,
                include_tasks=include_tasks,
                only_failed=only_failed,
            )
        connector = restarting if restart_connector else status.connector
        return ConnectorStateInfo(name, connector, tasks, status.type)

    async def restart_task(self, task: ConnectorTaskId) -> None:
        await self.task_status(task)
        if task in self._tasks:
            async with self._lock:
                snapshot = self._configs.snapshot()
                await asyncio.to_thread(self._worker.stop_tasks, [task])
                self._tasks.discard(task)
                await self._start_task(snapshot, task)
            return
        await self._require_leader()
        owner = self._owners.get(task)
        if owner is None or owner == self.url:
            raise ConflictError(f"Task {task.connector}-{task.task} is not assigned yet")
        raise NotLeaderError(f"task {task.connector}-{task.task} runs on {owner}", owner)

    # -------------------------------------------------------------- Herder: target states

    async def set_target_state(self, name: str, state: TargetState) -> None:
        async with self._leader_request() as snapshot:
            self._config_of(snapshot, name)
            if state is TargetState.STOPPED:
                # KIP-875: the task configs are emptied, so the next rebalance revokes the tasks.
                await self._write(self._configs.put_task_configs, name, [])
            await self._write(self._configs.put_target_state, name, state)
            log.info("connector %s: target state %s", name, state.value)

    # -------------------------------------------------------------- Herder: offsets (KIP-875)

    def _require_stopped(self, snapshot: ConfigSnapshot, name: str) -> None:
        require_stopped(name, snapshot.target_state(name))

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        from odradek.connect.sink_offsets import sink_group_id

        config = self._config_of(self._snapshot(), name)
        if self._type(config) is ConnectorType.SINK:
            return await asyncio.to_thread(self._sink_offsets.get, sink_group_id(name, config))
        pairs = await asyncio.to_thread(self._offsets.all, name)
        return [{"partition": p, "offset": o} for p, o in pairs]

    async def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> str:
        from odradek.connect.sink_offsets import parse_sink_offsets, sink_group_id

        # Under the request lock: a resume cannot slip between the STOPPED check and the write.
        async with self._leader_request() as snapshot:
            config = self._config_of(snapshot, name)
            self._require_stopped(snapshot, name)
            if self._type(config) is ConnectorType.SINK:
                parsed = parse_sink_offsets(offsets)
                group = sink_group_id(name, config)
                await asyncio.to_thread(self._sink_offsets.alter, group, parsed)
            else:
                pairs = [(dict(o["partition"]), o["offset"]) for o in offsets]
                await asyncio.to_thread(self._offsets.put, name, pairs)
        return "The offsets for this connector have been altered successfully"

    async def reset_offsets(self, name: str) -> str:
        from odradek.connect.sink_offsets import sink_group_id

        async with self._leader_request() as snapshot:
            config = self._config_of(snapshot, name)
            self._require_stopped(snapshot, name)
            if self._type(config) is ConnectorType.SINK:
                await asyncio.to_thread(self._sink_offsets.reset, sink_group_id(name, config))
            else:
                pairs = await asyncio.to_thread(self._offsets.all, name)
                await asyncio.to_thread(self._offsets.put, name, [(p, None) for p, _ in pairs])
        return "The offsets for this connector have been reset successfully"


# ------------------------------------------------------------------ the process


async def run(config: WorkerConfig) -> int:
    """The entry point ``odradek connect distributed`` calls: see
    ``odradek.connect.distributed.process.run_distributed``."""
    from odradek.connect.distributed.process import run_distributed

    return await run_distributed(config)
