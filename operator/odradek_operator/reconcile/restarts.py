"""Rolling restarts: one pod at a time, brokers first, then controllers (the active one last),
then ZooKeeper, never taking a partition below its min.insync.replicas.

A pod is stale when its ``odradek.io/config-hash`` differs from its StatefulSet template's, or it
carries ``odradek.io/restart: "true"``. Restarting is deleting the pod: the broker's SIGTERM
handler does the controlled shutdown, and the StatefulSet (``OnDelete``) recreates it from the
current template. Nothing is remembered between passes: each pass reads the pods and the
cluster and decides again (``next_*`` are pure functions), so an operator restarted in the middle
carries on where the world is.

Rules for the next broker (``next_broker``): wait while any pod is terminating, missing, or fresh
but not ready (the previous restart is not finished); restart stale unready pods first (they
serve nothing); then wait for zero under-replicated partitions; then restart the lowest-ordinal
stale broker whose restart keeps every partition it is in the ISR of at or above the topic's
min.insync.replicas (len(isr) - 1 >= min ISR); if none can, wait and say which partitions block.
A topic whose replication factor is at most its min.insync.replicas is ignored, as Strimzi's
KafkaAvailability ignores it: every one of its replicas must be in sync for an acks=all write,
so no restart of a broker holding one can keep it writable, and waiting for it would block every
roll for good (the manual restart annotation too). The restart that ignores such topics names
them (``Decision.ignored``: status.operation.ignoredTopics, and the message an Event repeats).
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from odradek.ops import ClusterView
from odradek_operator.kube import Kube
from odradek_operator.reconcile.admin import ClusterAdmin
from odradek_operator.reconcile.world import (
    PodState,
    read_pods,
    sts_name,
    template_hash,
)

__all__ = [
    "Decision",
    "blocking_partitions",
    "ignored_topics",
    "next_broker",
    "next_in_order",
    "roll",
]

log = logging.getLogger(__name__)
DEFAULT_MIN_ISR = 1
METRICS_TIMEOUT_S = 3.0
IGNORED_NAMED_MAX = 10  # topics a restart's message names; status.operation lists more


@dataclass(frozen=True)
class Decision:
    action: str  # "restart" | "wait" | "done"
    pod: str | None = None
    reason: str = ""
    message: str = ""
    component: str = ""
    pending: tuple[str, ...] = field(default=())  # stale pods left, for status
    ignored: tuple[str, ...] = field(default=())  # topics the restart cannot keep writable


def _common(pods: list[PodState], stale: list[PodState], replicas: int) -> Decision | None:
    pending = tuple(p.name for p in stale)
    if not stale:
        return Decision("done")
    terminating = [p.name for p in pods if p.terminating]
    if terminating:
        return Decision(
            "wait", None, "PodTerminating", f"waiting for {terminating[0]} to stop", pending=pending
        )
    if len(pods) < replicas:
        return Decision(
            "wait",
            None,
            "PodMissing",
            f"{replicas - len(pods)} pod(s) not recreated yet",
            pending=pending,
        )
    fresh_unready = [p.name for p in pods if not p.ready and p not in stale]
    if fresh_unready:
        return Decision(
            "wait",
            None,
            "PodNotReady",
            f"waiting for {fresh_unready[0]} to be ready",
            pending=pending,
        )
    unready = [p for p in stale if not p.ready]
    if unready:
        return Decision(
            "restart",
            unready[0].name,
            "RestartingUnreadyPod",
            f"restarting {unready[0].name} (not ready)",
            pending=pending,
        )
    return None


def _min_isr_at_least_rf(p, topic: str, min_isr: Mapping[str, int]) -> bool:
    return len(p.replicas) <= min_isr.get(topic, DEFAULT_MIN_ISR)


def blocking_partitions(view: ClusterView, broker_id: int, min_isr: Mapping[str, int]) -> list[str]:
    """Partitions that restarting ``broker_id`` would take below min.insync.replicas; those of
    a topic with replication factor <= min.insync.replicas are ignored (``ignored_topics``)."""
    blocked = []
    for tp, p in view.partitions.items():
        if _min_isr_at_least_rf(p, tp.topic, min_isr):
            continue
        if broker_id in p.isr and len(p.isr) - 1 < min_isr.get(tp.topic, DEFAULT_MIN_ISR):
            blocked.append(f"{tp.topic}-{tp.partition}")
    return blocked


def ignored_topics(view: ClusterView, broker_id: int, min_isr: Mapping[str, int]) -> list[str]:
    """Topics with a replica on ``broker_id`` whose replication factor is at most their
    min.insync.replicas: no restart keeps them writable with acks=all, so none waits for them."""
    return sorted(
        {
            tp.topic
            for tp, p in view.partitions.items()
            if broker_id in p.replicas and _min_isr_at_least_rf(p, tp.topic, min_isr)
        }
    )


def under_replicated(view: ClusterView) -> list[str]:
    return [
        f"{tp.topic}-{tp.partition}"
        for tp, p in view.partitions.items()
        if len(p.isr) < len(p.replicas)
    ]


def next_broker(
    pods: list[PodState],
    template: str | None,
    replicas: int,
    view: ClusterView,
    min_isr: Mapping[str, int],
) -> Decision:
    stale = [p for p in pods if p.stale(template)]
    decided = _common(pods, stale, replicas)
    if decided is not None:
        return Decision(**{**decided.__dict__, "component": "broker"})
    pending = tuple(p.name for p in stale)
    urp = under_replicated(view)
    if urp:
        return Decision(
            "wait",
            None,
            "UnderReplicatedPartitions",
            f"{len(urp)} under-replicated partition(s), e.g. {urp[0]}",
            "broker",
            pending,
        )
    first_blocked: tuple[str, list[str]] | None = None
    for pod in stale:
        blocked = blocking_partitions(view, pod.ordinal, min_isr)
        if not blocked:
            ignored = tuple(ignored_topics(view, pod.ordinal, min_isr))
            message = f"restarting {pod.name}"
            if ignored:
                named = ", ".join(ignored[:IGNORED_NAMED_MAX])
                if len(ignored) > IGNORED_NAMED_MAX:
                    named += f" ({len(ignored)} in all)"
                message += (
                    f"; ignoring topic(s) {named}: their replication factor is at"
                    " most their min.insync.replicas, so acks=all writes to them fail while"
                    " it restarts (raise the replication factor to avoid it)"
                )
            return Decision(
                "restart", pod.name, "RestartingBroker", message, "broker", pending, ignored
            )
        first_blocked = first_blocked or (pod.name, blocked)
    name, blocked = first_blocked  # type: ignore[misc]
    return Decision(
        "wait",
        None,
        "MinInSyncReplicas",
        f"restarting {name} would take {len(blocked)} partition(s) below "
        f"min.insync.replicas, e.g. {blocked[0]}",
        "broker",
        pending,
    )


def next_in_order(
    pods: list[PodState],
    template: str | None,
    replicas: int,
    component: str,
    last: int | None = None,
) -> Decision:
    """Controllers and ZooKeeper: one at a time, unready first, the pod with ordinal ``last``
    (the active controller) after all the others."""
    stale = [p for p in pods if p.stale(template)]
    decided = _common(pods, stale, replicas)
    if decided is not None:
        return Decision(**{**decided.__dict__, "component": component})
    ordered = sorted(stale, key=lambda p: (p.ordinal == last, p.ordinal))
    pod = ordered[0]
    note = " (the active controller)" if pod.ordinal == last and component == "controller" else ""
    return Decision(
        "restart",
        pod.name,
        "Restarting" + component.capitalize(),
        f"restarting {pod.name}{note}",
        component,
        tuple(p.name for p in stale),
    )


def active_controller_sync(pods: list[PodState], metrics_port: int) -> int | None:
    """The ordinal of the controller whose /metrics says ``odradek_controller_active 1``."""
    for pod in pods:
        if not pod.ip:
            continue
        try:
            with urllib.request.urlopen(
                f"http://{pod.ip}:{metrics_port}/metrics", timeout=METRICS_TIMEOUT_S
            ) as r:
                text = r.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("odradek_controller_active") and line.split()[-1] in ("1", "1.0"):
                return pod.ordinal
    return None


ActiveController = Callable[[list[PodState], int], Awaitable[int | None]]


async def active_controller(pods: list[PodState], metrics_port: int) -> int | None:
    return await asyncio.to_thread(active_controller_sync, pods, metrics_port)


@dataclass(frozen=True)
class RollTarget:
    namespace: str
    cluster: str
    replicas: Mapping[str, int]  # component -> spec replicas
    metrics_port: int


async def topic_min_isr(admin: ClusterAdmin, view: ClusterView) -> dict[str, int]:
    configs = await admin.topic_configs(view.topics)
    result = {}
    for topic, entries in configs.items():
        value = entries.get("min.insync.replicas", (str(DEFAULT_MIN_ISR), False))[0]
        result[topic] = int(value) if value is not None else DEFAULT_MIN_ISR
    return result


async def roll(
    kube: Kube,
    admin: ClusterAdmin | None,
    target: RollTarget,
    find_active: ActiveController = active_controller,
) -> Decision:
    """One step of the rolling restart: restart one pod, or say what it waits for, or done."""
    for component in ("broker", "controller", "zookeeper"):
        sts = await kube.get("StatefulSet", sts_name(target.cluster, component), target.namespace)
        if sts is None:
            continue
        pods = await read_pods(kube, target.namespace, target.cluster, component)
        template = template_hash(sts)
        replicas = int(sts.get("spec", {}).get("replicas", target.replicas.get(component, 0)))
        if not any(p.stale(template) for p in pods):
            continue
        if component == "broker":
            if admin is None:
                return Decision("wait", None, "ClusterUnreachable", "no broker answers", "broker")
            view = await admin.view()
            decision = next_broker(pods, template, replicas, view, await topic_min_isr(admin, view))
        elif component == "controller":
            active = await find_active(pods, target.metrics_port)
            decision = next_in_order(pods, template, replicas, component, active)
        else:
            decision = next_in_order(pods, template, replicas, component)
        if decision.action == "restart":
            log.info("%s/%s: %s", target.namespace, target.cluster, decision.message)
            await kube.delete("Pod", decision.pod, target.namespace)
        return decision
    return Decision("done")
