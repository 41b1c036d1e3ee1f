"""Executing a plan, following it, cancelling it: kafka-reassign-partitions' --execute, --verify
and --cancel as library calls, over AlterPartitionReassignments and ListPartitionReassignments
(KIP-455; any broker forwards them to the controller).

- ``execute``: refuses while other reassignments are running (as Kafka does without
  ``--additional``), sets the throttles (``odradek.ops.throttles``) when given a rate, then
  submits the targets. A partition the controller refuses is reported with its Kafka error code
  and message (``ClusterRequestError.refusals``); the others were accepted and run.
- ``status``: per partition IN_PROGRESS (listed by ListPartitionReassignments), DONE (not listed,
  replicas equal the target) or DIFFERENT (not listed, replicas differ: cancelled, or never
  submitted), with bytes copied: each adding replica's size against the leader's, from
  DescribeLogDirs (unknown when the cluster does not serve it). When nothing is in progress the
  throttles are cleared, as ``--verify`` does.
- ``cancel``: AlterPartitionReassignments with null replicas for the plan's partitions still in
  progress, then the throttles are cleared.
- ``watch``: ``status`` every ``interval_s`` until nothing is in progress or ``timeout_s``.

Every call opens its own connections and closes them; each request is bounded by
``request_timeout_s``. Async, one task per call.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from odradek.client.admin import (
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    ClusterClient,
    build,
    element_type,
)
from odradek.client.errors import ClusterRequestError, UnsupportedByClusterError
from odradek.client.security import ClientSecurity
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.ops.cluster import partition_sizes, read_cluster, replica_sizes
from odradek.ops.errors import OpsError, PlanError, ReassignmentInProgressError
from odradek.ops.model import ClusterView
from odradek.ops.plan import PartitionMove, Plan
from odradek.ops.throttles import clear_throttles, set_throttles

__all__ = [
    "OngoingReassignment",
    "PartitionState",
    "PartitionProgress",
    "StatusReport",
    "list_reassignments",
    "execute",
    "status",
    "cancel",
    "watch",
]

REQUEST_TIMEOUT_S = 30.0
REASSIGNMENT_MAX_VERSION = 0  # AlterPartitionReassignments v1 adds allow_replication_factor_change
LIST_MAX_VERSION = 0
WATCH_INTERVAL_S = 2.0
WATCH_TIMEOUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class PartitionState(enum.Enum):
    IN_PROGRESS = "in progress"
    DONE = "done"
    DIFFERENT = "not running, replicas differ from the target"


@dataclass(frozen=True, slots=True)
class PartitionProgress:
    move: PartitionMove
    state: PartitionState
    replicas: tuple[int, ...]  # as Metadata shows them now
    adding: tuple[int, ...]  # the replicas still catching up (empty unless in progress)
    bytes_copied: int | None  # None: DescribeLogDirs gave no size
    bytes_total: int | None

    @property
    def percent(self) -> float | None:
        if self.state is PartitionState.DONE:
            return 100.0
        if self.bytes_copied is None or not self.bytes_total:
            return None
        return min(100.0, 100.0 * self.bytes_copied / self.bytes_total)


@dataclass(frozen=True)
class StatusReport:
    partitions: tuple[PartitionProgress, ...]
    throttles_cleared: bool = False
    sizes_known: bool = True
    at_s: float = field(default_factory=time.time)

    @property
    def in_progress(self) -> tuple[PartitionProgress, ...]:
        return tuple(p for p in self.partitions if p.state is PartitionState.IN_PROGRESS)

    @property
    def finished(self) -> bool:
        return not self.in_progress

    @property
    def bytes_copied(self) -> int | None:
        values = [p.bytes_copied for p in self.partitions if p.state is not PartitionState.DONE]
        return None if None in values else sum(v or 0 for v in values)

    @property
    def bytes_total(self) -> int | None:
        values = [p.bytes_total for p in self.partitions if p.state is not PartitionState.DONE]
        return None if None in values else sum(v or 0 for v in values)


# --- the calls -----------------------------------------------------------------------------


async def list_reassignments(client: ClusterClient) -> dict[TopicPartition, OngoingReassignment]:
    """Every reassignment the controller is running (ListPartitionReassignments, all topics)."""
    timeout = timedelta(seconds=client.request_timeout_s)
    response = await client.send_any(
        LIST_PARTITION_REASSIGNMENTS,
        LIST_MAX_VERSION,
        lambda t: build(t, timeout=timeout, topics=None),
    )
    if response.error_code != ErrorCode.none:
        raise _refused("ListPartitionReassignments", response.error_code, response.error_message)
    ongoing = {}
    for topic in response.topics:
        for p in topic.partitions:
            ongoing[TopicPartition(str(topic.name), int(p.partition_index))] = OngoingReassignment(
                tuple(map(int, p.replicas)),
                tuple(map(int, p.adding_replicas)),
                tuple(map(int, p.removing_replicas)),
            )
    return ongoing


async def execute(
    bootstrap: str,
    plan: Plan,
    throttle_bytes_per_s: int | None = None,
    *,
    additional: bool = False,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[int]:
    """Start the plan; returns the brokers throttled (empty without a throttle)."""
    if not len(plan):
        raise PlanError("the plan is empty: nothing to reassign")
    if throttle_bytes_per_s is not None and throttle_bytes_per_s <= 0:
        raise PlanError(f"--throttle must be a positive number of bytes/s: {throttle_bytes_per_s}")
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        Plan.from_targets(plan.targets(), view)  # the partitions and brokers still exist
        ongoing = await list_reassignments(client)
        if ongoing and not additional:
            raise ReassignmentInProgressError(
                "Cannot execute because there is an existing partition assignment "
                f"({len(ongoing)} partitions moving). Use --additional to override this and "
                "create a new partition assignment in addition to the existing one."
            )
        throttled: list[int] = []
        if throttle_bytes_per_s is not None:
            throttled = await set_throttles(client, plan, throttle_bytes_per_s)
        await _alter_reassignments(client, plan.targets())
        return throttled


async def status(
    bootstrap: str,
    plan: Plan,
    *,
    clear_when_done: bool = True,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> StatusReport:
    """Where each partition of the plan is (see the module docstring)."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        ongoing = await list_reassignments(client)
        report = await _progress(client, view, plan, ongoing)
        if report.finished and clear_when_done:
            await clear_throttles(client, plan.topics, _live_brokers(view))
            report = StatusReport(report.partitions, True, report.sizes_known, report.at_s)
        return report


async def cancel(
    bootstrap: str,
    plan: Plan,
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[TopicPartition]:
    """Cancel the plan's reassignments still running, clear the throttles; the cancelled ones."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        ongoing = await list_reassignments(client)
        running = sorted(tp for tp in plan.targets() if tp in ongoing)
        if running:
            await _alter_reassignments(client, dict.fromkeys(running))
        await clear_throttles(client, plan.topics, _live_brokers(view))
        return running


METADATA_SETTLE_S = 5.0


async def watch(
    bootstrap: str,
    plan: Plan,
    *,
    interval_s: float = WATCH_INTERVAL_S,
    timeout_s: float = WATCH_TIMEOUT_S,
    on_report: Callable[[StatusReport], Awaitable[None] | None] | None = None,
    clear_when_done: bool = True,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> StatusReport:
    """``status`` every ``interval_s`` until nothing is in progress (throttles then cleared) or
    ``timeout_s`` has passed (the last report, still in progress, is returned).

    A partition the controller has just finished can still show its old replicas for a moment
    (Metadata is answered from a broker's cache, which an UpdateMetadata round brings up to
    date): with nothing in progress but partitions DIFFERENT, polling goes on for up to
    ``METADATA_SETTLE_S`` before the report is final (a cancelled move stays DIFFERENT)."""
    deadline = time.monotonic() + timeout_s
    settled_by = None
    while True:
        report = await status(
            bootstrap,
            plan,
            clear_when_done=clear_when_done,
            request_timeout_s=request_timeout_s,
            security=security,
        )
        if on_report is not None:
            result = on_report(report)
            if asyncio.iscoroutine(result):
                await result
        if report.finished:
            if not any(p.state is PartitionState.DIFFERENT for p in report.partitions):
                return report
            settled_by = settled_by or time.monotonic() + METADATA_SETTLE_S
            if time.monotonic() >= settled_by:
                return report
        if time.monotonic() + interval_s > deadline:
            return report
        await asyncio.sleep(interval_s)


# --- helpers --------------------------------------------------------------------------------


async def _alter_reassignments(
    client: ClusterClient, targets: dict[TopicPartition, tuple[int, ...] | None]
) -> None:
    """One AlterPartitionReassignments: a target per partition, None to cancel."""
    by_topic: dict[str, list[tuple[int, tuple[int, ...] | None]]] = {}
    for tp, replicas in sorted(targets.items()):
        by_topic.setdefault(tp.topic, []).append((tp.partition, replicas))
    timeout = timedelta(seconds=client.request_timeout_s)

    def make(request_type):
        return reassignments_request(request_type, by_topic, timeout)

    response = await client.send_any(ALTER_PARTITION_REASSIGNMENTS, REASSIGNMENT_MAX_VERSION, make)
    if response.error_code != ErrorCode.none:
        raise _refused("AlterPartitionReassignments", response.error_code, response.error_message)
    refusals = {
        f"{topic.name}-{p.partition_index}": (p.error_code, p.error_message)
        for topic in response.responses
        for p in topic.partitions
        if p.error_code != ErrorCode.none
    }
    if refusals:
        detail = "; ".join(
            f"{where}: {code.name}{f' ({message})' if message else ''}"
            for where, (code, message) in sorted(refusals.items())
        )
        accepted = len(targets) - len(refusals)
        first = next(iter(refusals.values()))[0]
        raise ClusterRequestError(
            f"the controller refused {len(refusals)} of {len(targets)} partitions "
            f"({accepted} accepted): {detail}",
            first,
            refusals,
        )


def reassignments_request(
    request_type: type,
    by_topic: dict[str, list[tuple[int, tuple[int, ...] | None]]],
    timeout: timedelta,
):
    """An AlterPartitionReassignments request of ``request_type``'s version."""
    topic_type = element_type(request_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    return build(
        request_type,
        timeout=timeout,
        topics=tuple(
            topic_type(
                name=topic,
                partitions=tuple(
                    partition_type(partition_index=p, replicas=r) for p, r in partitions
                ),
            )
            for topic, partitions in by_topic.items()
        ),
    )


async def _progress(
    client: ClusterClient,
    view: ClusterView,
    plan: Plan,
    ongoing: dict[TopicPartition, OngoingReassignment],
) -> StatusReport:
    rows = []
    involved: set[int] = set()
    for move in plan:
        if move.tp in ongoing:
            involved.update(view.partitions[move.tp].replicas if move.tp in view.partitions else ())
            involved.update(ongoing[move.tp].replicas)
    sizes_known = True
    sizes: dict = {}
    answered: set[int] = set()
    if involved:
        try:
            sizes = await replica_sizes(client, involved & set(view.brokers), answered)
        except UnsupportedByClusterError:
            sizes_known = False
    leader_sizes = partition_sizes(view, sizes)
    for move in plan:
        partition = view.partitions.get(move.tp)
        replicas = partition.replicas if partition else ()
        if move.tp in ongoing:
            adding = ongoing[move.tp].adding
            total = leader_sizes.get(move.tp)
            copied: int | None = None
            if total is not None and all(b in answered for b in adding):
                # A broker that answered without the replica has not created it yet: 0 bytes.
                copied = sum(min(sizes.get((move.tp, b), 0), total) for b in adding)
                total *= len(adding)
            else:
                total = None
            rows.append(
                PartitionProgress(move, PartitionState.IN_PROGRESS, replicas, adding, copied, total)
            )
        else:
            state = PartitionState.DONE if replicas == move.target else PartitionState.DIFFERENT
            size = leader_sizes.get(move.tp, 0) * len(move.adding)
            rows.append(PartitionProgress(move, state, replicas, (), size, size))
    return StatusReport(tuple(rows), sizes_known=sizes_known)


def _live_brokers(view: ClusterView) -> list[int]:
    """Kafka clears the rates on every live broker and every target broker; only live ones
    can be reached, and every live one is cleared."""
    return sorted(view.brokers)


def _refused(api: str, code: ErrorCode, message: str | None) -> OpsError:
    detail = f": {message}" if message else ""
    if code == ErrorCode.unsupported_version:
        return UnsupportedByClusterError(f"{api} refused: UNSUPPORTED_VERSION{detail}")
    return ClusterRequestError(f"{api} refused: {code.name}{detail}", code)
