"""Scaling the brokers: up = more replicas, then a rebalance; down = drain, then fewer replicas.

Scale up: the brokers StatefulSet's replicas go up; once every new broker has registered (it is
in Metadata), one rebalance (``odradek.ops.prepare_rebalance`` + ``execute``) gives them their
share; the operation ends when no reassignment is running. Scale down: refused
(``ScaleDownBelowReplicationFactor``) when fewer brokers than some topic's replication factor
would remain; else the departing brokers (the highest ordinals, as a StatefulSet removes them)
are drained together, their topics moved onto the remaining brokers in one reassignment
(``prepare_move`` + ``execute``: draining one at a time could move replicas onto the next one
to go), and the replicas go down only when no departing broker holds a replica.
PersistentVolumeClaims of departed brokers are kept unless ``spec.brokers.storage.deleteClaim``
is true.

``scale`` is the only code that changes the brokers' count, on every path: ``apply`` never
patches the StatefulSet's replicas, and a StatefulSet that is created (volumes.py recreating it
for a JBOD change, or one deleted by hand) is created with ``live_replicas``, the brokers there are
now, never fewer; the next ``scale`` step then drains before it shrinks, or grows and
rebalances, as for a patch. Only a cluster with no broker at all is created at the spec's count.

Re-entrant: the operation in progress lives in the cluster's status (``status.operation``), and
each pass decides from the StatefulSet, the pods and the cluster's Metadata.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from odradek.ops import ClusterView
from odradek_operator.kube import Kube
from odradek_operator.reconcile.admin import ClusterAdmin
from odradek_operator.reconcile.status import Refused, now
from odradek_operator.reconcile.world import PodState

__all__ = ["ScaleStep", "check_scale_down", "live_replicas", "scale"]

Announce = Callable[[dict], Awaitable[None]]


@dataclass(frozen=True)
class ScaleStep:
    done: bool
    operation: dict | None  # status.operation while running (None: idle)
    reason: str = ""
    message: str = ""


def check_scale_down(view: ClusterView, wanted: int) -> None:
    """Refuse a scale-down that would leave fewer brokers than a topic's replication factor."""
    too_big = {}
    for tp, p in view.partitions.items():
        if len(p.replicas) > wanted:
            too_big[tp.topic] = max(too_big.get(tp.topic, 0), len(p.replicas))
    if too_big:
        topic, rf = max(too_big.items(), key=lambda item: (item[1], item[0]))
        raise Refused(
            "ScaleDownBelowReplicationFactor",
            f"{wanted} broker(s) would remain but topic {topic} has replication factor {rf}"
            f" ({len(too_big)} topic(s) need more than {wanted}); lower their replication factor"
            " or keep more brokers",
        )


async def live_replicas(
    sts: dict | None, pods: list[PodState], admin: ClusterAdmin | None, wanted: int
) -> int:
    """The brokers the cluster has now: the StatefulSet's replicas; without a StatefulSet, one
    past the highest ordinal of a broker pod still there or of a broker Metadata lists as
    holding replicas (its pod gone, its claim kept); ``wanted`` when there is none of either
    (a new cluster). Creating the StatefulSet with this count leaves every change of it to
    ``scale`` and its drain."""
    if sts is not None:
        return int(sts.get("spec", {}).get("replicas", 0))
    present = [p.ordinal + 1 for p in pods]
    if admin is not None:
        counts = (await admin.view()).replica_counts()
        present += [b + 1 for b, n in counts.items() if n > 0]
    return max(present) if present else wanted


def departing_with_replicas(view: ClusterView, wanted: int, current: int) -> list[int]:
    counts = view.replica_counts()
    return [b for b in range(current - 1, wanted - 1, -1) if counts.get(b, 0) > 0]


async def scale(
    kube: Kube,
    admin: ClusterAdmin | None,
    sts: dict,
    pods: list[PodState],
    wanted: int,
    operation: dict | None,
    delete_claims: bool = False,
    announce: Announce | None = None,
) -> ScaleStep:
    """One step towards ``wanted`` brokers (see the module docstring). ``announce`` writes the
    operation to status before the StatefulSet grows, so an operator restarted right after
    still knows that a rebalance is owed."""
    meta = sts["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    current = int(sts.get("spec", {}).get("replicas", 0))
    op_type = (operation or {}).get("type")
    if wanted > current:
        if announce is not None:
            await announce(_op("ScaleUp", range(current, wanted), "starting new brokers"))
        await kube.merge_patch("StatefulSet", name, namespace, {"spec": {"replicas": wanted}})
        return ScaleStep(
            False,
            _op("ScaleUp", range(current, wanted), "starting new brokers"),
            "ScalingUp",
            f"scaling brokers {current} -> {wanted}",
        )
    if wanted < current:
        if admin is None:
            return ScaleStep(False, operation, "ClusterUnreachable", "no broker answers")
        departing = list(range(current - 1, wanted - 1, -1))
        op = _op("ScaleDown", departing, "", operation)
        # While partitions move, Metadata lists adding and removing replicas together (a
        # replication factor that looks one higher): wait, and check the factor between moves.
        if await admin.reassignments_in_progress():
            return ScaleStep(
                False,
                {**op, "message": f"draining brokers {departing}"},
                "Draining",
                f"draining brokers {departing}",
            )
        view = await admin.view()
        check_scale_down(view, wanted)
        holding = departing_with_replicas(view, wanted, current)
        if holding:
            moving = await admin.drain(departing)
            message = f"draining brokers {holding} ({moving} partition(s) moving)"
            return ScaleStep(False, {**op, "message": message}, "Draining", message)
        await kube.merge_patch("StatefulSet", name, namespace, {"spec": {"replicas": wanted}})
        if delete_claims:
            await _delete_claims(kube, sts, departing)
        return ScaleStep(
            False,
            {**op, "message": "stopping drained brokers"},
            "ScalingDown",
            f"brokers {departing} drained, stopping them",
        )
    # At the wanted size: finish a scale-up with its rebalance, a scale-down when pods are gone.
    if op_type == "ScaleUp":
        ready = [p for p in pods if p.ready and not p.terminating]
        if len(ready) < wanted:
            return ScaleStep(
                False, operation, "WaitingForBrokers", f"{len(ready)}/{wanted} brokers ready"
            )
        if admin is None:
            return ScaleStep(False, operation, "ClusterUnreachable", "no broker answers")
        if not operation.get("rebalanced"):
            view = await admin.view()
            missing = [b for b in range(wanted) if b not in view.brokers]
            if missing:
                return ScaleStep(
                    False, operation, "WaitingForBrokers", f"brokers {missing} not registered yet"
                )
            moving = await admin.rebalance()
            message = f"rebalancing: {moving} partition(s) moving"
            return ScaleStep(
                False, {**operation, "rebalanced": True, "message": message}, "Rebalancing", message
            )
        if await admin.reassignments_in_progress():
            return ScaleStep(False, operation, "Rebalancing", "rebalance running")
    if op_type == "ScaleDown" and len(pods) > wanted:
        return ScaleStep(
            False, operation, "ScalingDown", f"{len(pods) - wanted} broker(s) stopping"
        )
    return ScaleStep(True, None)


def _op(type_: str, brokers, message: str, previous: dict | None = None) -> dict:
    if previous and previous.get("type") == type_:
        return {**previous, "brokers": list(brokers)}
    return {"type": type_, "brokers": list(brokers), "message": message, "startedAt": now()}


async def _delete_claims(kube: Kube, sts: dict, ordinals: list[int]) -> None:
    """deleteClaim: true was asked for: the departed brokers' PVCs go too."""
    name, namespace = sts["metadata"]["name"], sts["metadata"].get("namespace")
    for template in sts.get("spec", {}).get("volumeClaimTemplates") or []:
        for ordinal in ordinals:
            claim = f"{template['metadata']['name']}-{name}-{ordinal}"
            await kube.delete("PersistentVolumeClaim", claim, namespace)
