"""One reconciliation pass of an OdradekCluster, and its status.

A pass: read the spec (``ClusterSpec``: a bad spec is ``Refused("InvalidSpec")``), on a secured
cluster keep its certificates first (certificates.py: their hashes go into the pods' config
hashes, the operator's own certificate is how it reaches the brokers), build the desired
objects (``odradek_operator.model``), let volumes.py recreate the brokers' StatefulSet when its
volumes changed, apply every object in order (shared objects, ZooKeeper, controllers,
brokers; the brokers' replicas are scaling.py's alone: a brokers StatefulSet that is created is
created with the brokers there are now, ``scaling.live_replicas``, so a shrink always drains;
with ``spec.networkPolicies: false`` the cluster's own NetworkPolicies are deleted instead),
the brokers' racks copied from their nodes when ``spec.brokers.rack`` is set (racks.py), then
one step of scaling (scaling.py) and one step of the rolling restart (restarts.py), and finally
wait for every pod to be ready.
A pass that has more to do raises ``Retry`` after writing the status that says what it waits
for; the handlers call the pass again after the delay. Nothing is remembered in memory: the
operation in progress is in ``status.operation`` and everything else is read again.

Status: conditions Ready / Reconciling / Error (reasons in CamelCase, messages in words; a
refused spec is Ready=False and Error=True with the refusal's reason, so Ready=True with
observedGeneration == generation means that generation is applied), observedGeneration,
brokerIds, bootstrap (the Service address clients use), brokers.replicas and brokers.selector
(the scale subresource), operation, certificates (secured clusters: each certificate's expiry).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek_operator import names
from odradek_operator.kube import Kube, apply
from odradek_operator.model import crds, desired, zookeeper_tls
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.reconcile import racks, restarts, scaling, volumes
from odradek_operator.reconcile.admin import AdminRefused, ClusterAdmin, ClusterUnavailable
from odradek_operator.reconcile.certificates import Certificates, reconcile_certificates
from odradek_operator.reconcile.connect_api import ConnectApiFactory, RestConnectApi
from odradek_operator.reconcile.status import IDLE, Refused, Retry, condition, now, set_condition
from odradek_operator.reconcile.world import admin_bootstrap, read_pods

__all__ = ["ClusterContext", "check_against_live", "reconcile_cluster", "write_status"]

log = logging.getLogger(__name__)

WAIT_S = 3.0  # the next pass while pods start or an operation runs

# ``admin_for(bootstrap)``, and on a secured cluster ``admin_for(bootstrap, tls=AdminTls)``.
AdminFactory = Callable[..., ClusterAdmin]


@dataclass(frozen=True)
class ClusterContext:
    kube: Kube
    admin_for: AdminFactory
    default_image: str = "odradek:latest"
    # Where the operator's pods run ($POD_NAMESPACE): the NetworkPolicies let them in.
    operator_namespace: str | None = None
    find_active: restarts.ActiveController = restarts.active_controller
    connect_api_for: ConnectApiFactory = RestConnectApi  # an OdradekConnect's REST API


def check_against_live(spec: ClusterSpec, zookeeper_sts: dict | None, broker_sts: dict | None):
    """Refuse what a running cluster cannot become (read from its live StatefulSets, so the
    periodic pass refuses it as the change handler does): another ZooKeeper ensemble size, an
    existing volume resized or moved to another storage class, a running cluster secured or
    unsecured (its brokers' template says which: the certificates hash annotation; before the
    brokers exist, ZooKeeper's: model/zookeeper_tls.serves_tls)."""
    live_secured = None
    if broker_sts is not None:
        template = broker_sts.get("spec", {}).get("template", {}).get("metadata") or {}
        live_secured = names.CERTIFICATES_HASH_ANNOTATION in (template.get("annotations") or {})
    elif zookeeper_sts is not None:
        live_secured = zookeeper_tls.serves_tls(zookeeper_sts)
    if live_secured is not None and live_secured != spec.secured:
        now_, then = ("plaintext", "secured") if spec.secured else ("secured", "plaintext")
        raise Refused(
            "SecurityChangeRefused",
            f"spec.listeners: the running cluster is {now_} and cannot become {then} in "
            "place (every client and every broker link would break mid-roll, and ZooKeeper's "
            "ensemble would be split between plaintext and TLS peers, without a quorum); "
            "create a new cluster with the listeners you want and move the clients to it",
        )
    if zookeeper_sts is not None:
        running = int(zookeeper_sts.get("spec", {}).get("replicas", 0))
        if running != spec.zookeeper.replicas:
            raise Refused(
                "ZooKeeperResizeRefused",
                f"spec.zookeeper.replicas: the ensemble has {running} servers and cannot become "
                f"{spec.zookeeper.replicas} (its size is fixed when the cluster is created)",
            )
    if broker_sts is None:
        return
    live = {
        t["metadata"]["name"]: t.get("spec", {})
        for t in broker_sts.get("spec", {}).get("volumeClaimTemplates") or []
    }
    for volume in spec.brokers.volumes:
        claim = live.get(names.volume_claim_template(volume.id))
        if claim is None:
            continue
        size = claim.get("resources", {}).get("requests", {}).get("storage")
        storage_class = claim.get("storageClassName")
        moved = volume.storage_class is not None and storage_class != volume.storage_class
        if size != volume.size or moved:
            raise Refused(
                "VolumeChangeRefused",
                f"spec.brokers.storage.volumes[id={volume.id}]: volume {volume.id} exists "
                f"({size}, storageClass {storage_class}); its size and storageClass cannot "
                "change (add a volume with a new id instead)",
            )


async def write_status(kube: Kube, body: Mapping, status: dict) -> None:
    """Merge-patch the status; the operation is replaced whole (a merge patch would keep the
    keys of the previous operation, such as a finished scale-up's ``rebalanced``)."""
    meta = body["metadata"]
    if "operation" in status:
        old = (body.get("status") or {}).get("operation") or {}
        status = {**status, "operation": {**dict.fromkeys(old), **status["operation"]}}
    await kube.merge_patch(
        names.CLUSTER_KIND, meta["name"], meta.get("namespace"), {"status": status}, "status"
    )


def _status_base(body: Mapping, spec: ClusterSpec | None) -> dict:
    meta = body["metadata"]
    status: dict = {"observedGeneration": meta.get("generation", 0)}
    if spec is not None:
        status["bootstrap"] = names.bootstrap_address(spec.name, spec.namespace, spec.ports.client)
    return status


async def reconcile_cluster(ctx: ClusterContext, body: Mapping) -> dict:
    """One pass (module docstring); the status written. Raises Retry or Refused."""
    old = dict(body.get("status") or {})
    conditions = old.get("conditions") or []
    spec = None
    try:
        try:
            spec = ClusterSpec.from_resource(body)
        except SpecError as e:
            raise Refused("InvalidSpec", str(e)) from e
        status = await _pass(ctx, body, spec, old)
    except Retry as retry:
        status = {**_status_base(body, spec), **_progress(old, retry)}
        status["conditions"] = _conditions(
            conditions,
            body["metadata"].get("generation", 0),
            ready=(False, retry.reason, str(retry)),
            reconciling=(True, retry.reason, str(retry)),
            error=(False, "NoError", ""),
        )
        await write_status(ctx.kube, body, status)
        raise
    except Refused as refused:
        # observedGeneration says the operator read this generation; Ready=False says it did
        # not apply it (kubectl wait --for=condition=Ready and GitOps tools must not take a
        # refused change for a done one). The pods may still serve the previous spec.
        status = _status_base(body, spec)
        status["operation"] = old.get("operation") or IDLE
        generation = body["metadata"].get("generation", 0)
        status["conditions"] = _conditions(
            conditions,
            generation,
            ready=(
                False,
                refused.reason,
                f"generation {generation} of the spec was refused and not applied: {refused}",
            ),
            reconciling=(False, refused.reason, "waiting for the spec to change"),
            error=(True, refused.reason, str(refused)),
        )
        await write_status(ctx.kube, body, status)
        raise
    await write_status(ctx.kube, body, status)
    return status


def _progress(old: dict, retry: Retry) -> dict:
    return {"operation": old.get("operation") or IDLE, **retry.status}


def _conditions(conditions, generation: int, *, ready, reconciling, error) -> list[dict]:
    """Every condition says the generation it speaks of: a Ready=True left from the previous
    generation does not satisfy ``kubectl wait --for=condition=Ready`` after an edit."""
    for type_, (true, reason, message) in (
        ("Ready", ready),
        ("Reconciling", reconciling),
        ("Error", error),
    ):
        conditions = set_condition(conditions, condition(type_, true, reason, message, generation))
    return conditions


def _retry(reason: str, message: str, **status) -> Retry:
    return Retry(message, WAIT_S, reason, status)


async def _pass(ctx: ClusterContext, body: Mapping, spec: ClusterSpec, old: dict) -> dict:
    kube, ns = ctx.kube, spec.namespace
    broker_sts_name = names.statefulset(spec.name, names.Component.BROKER)
    broker_sts = await kube.get("StatefulSet", broker_sts_name, ns)
    zookeeper_sts = await kube.get(
        "StatefulSet", names.statefulset(spec.name, names.Component.ZOOKEEPER), ns
    )
    check_against_live(spec, zookeeper_sts, broker_sts)
    certificates = await reconcile_certificates(kube, spec) if spec.secured else None
    objects = desired.build(
        spec,
        ctx.default_image,
        certificates.hashes if certificates is not None else None,
        ctx.operator_namespace,
    )
    broker_pods = await read_pods(kube, ns, spec.name, "broker")
    admin = _admin(ctx, spec, broker_pods, certificates)
    operation = old.get("operation") if (old.get("operation") or {}).get("type") != "Idle" else None
    common = {
        "brokers": {
            "replicas": len([p for p in broker_pods if not p.terminating]),
            "selector": names.selector(spec.name, names.Component.BROKER),
        },
        "brokerIds": sorted(p.ordinal for p in broker_pods if not p.terminating),
    }
    if certificates is not None:
        common["certificates"] = certificates.status

    # JBOD: a StatefulSet whose volumes changed is deleted (orphaning its pods) and recreated.
    if broker_sts is not None and broker_sts["metadata"].get("deletionTimestamp"):
        raise _retry(
            "RecreatingStatefulSet",
            "waiting for the old brokers StatefulSet to go",
            operation=_op("AddVolume", "recreating the brokers StatefulSet"),
            **common,
        )
    sts_index = next(
        i
        for i, o in enumerate(objects)
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == broker_sts_name
    )
    wanted_sts = objects[sts_index]
    try:
        live_replicas = await scaling.live_replicas(
            broker_sts, broker_pods, admin, spec.brokers.replicas
        )
        if broker_sts is None:
            # Created at the brokers there are (re-created after a volume change, or deleted
            # by hand): the count changes only through scaling.scale, drain first.
            wanted_sts = {**wanted_sts, "spec": {**wanted_sts["spec"], "replicas": live_replicas}}
            objects[sts_index] = wanted_sts
        # A refused scale-down refuses the whole change: nothing of it is applied.
        if (
            admin is not None
            and spec.brokers.replicas < live_replicas
            and not await admin.reassignments_in_progress()
        ):
            scaling.check_scale_down(await admin.view(), spec.brokers.replicas)
        if await volumes.reconcile_volumes(kube, admin, broker_sts, wanted_sts):
            raise _retry(
                "RecreatingStatefulSet",
                "the brokers' volumes changed: recreating their StatefulSet, pods keep running",
                operation=_op("AddVolume", "recreating the brokers StatefulSet"),
                **common,
            )
        for obj in objects:
            await apply(kube, obj, keep_replicas=obj is wanted_sts)
        if not spec.network_policies:
            await drop_network_policies(kube, spec)
        if spec.brokers.rack_topology_key is not None:
            waiting = await racks.annotate_racks(
                kube, ns, spec.name, spec.brokers.rack_topology_key
            )
            if waiting:
                raise _retry(
                    "NodeLabelMissing",
                    "brokers wait for their rack: " + "; ".join(waiting),
                    operation=operation or IDLE,
                    **common,
                )

        broker_sts = await kube.get("StatefulSet", broker_sts_name, ns)
        step = await scaling.scale(
            kube,
            admin,
            broker_sts,
            broker_pods,
            spec.brokers.replicas,
            operation,
            spec.brokers.delete_claim,
            announce=lambda op: write_status(kube, body, {"operation": op}),
        )
        if not step.done:
            raise _retry(step.reason, step.message, operation=step.operation, **common)

        target = restarts.RollTarget(
            ns,
            spec.name,
            {
                "zookeeper": spec.zookeeper.replicas,
                "controller": spec.controllers.replicas,
                "broker": spec.brokers.replicas,
            },
            spec.ports.metrics,
        )
        decision = await restarts.roll(kube, admin, target, ctx.find_active)
        if decision.action != "done":
            op = {
                "type": "RollingRestart",
                "brokers": sorted(
                    _ordinals(decision.pending) if decision.component == "broker" else []
                ),
                "message": decision.message,
                "startedAt": (operation or {}).get("startedAt")
                if (operation or {}).get("type") == "RollingRestart"
                else _op("", "")["startedAt"],
            }
            if decision.ignored:
                op["ignoredTopics"] = list(decision.ignored[: crds.IGNORED_TOPICS_MAX])
            raise _retry(decision.reason, decision.message, operation=op, **common)
    except AdminRefused as e:  # the cluster refused an operation's plan (placement...)
        raise Refused("OperationRefused", f"the cluster refused the operation: {e}") from e
    except ClusterUnavailable as e:
        raise _retry(
            "ClusterUnreachable",
            f"the cluster's admin API: {e}",
            operation=operation or IDLE,
            **common,
        ) from e

    not_ready = []
    for component in names.Component:
        pods = await read_pods(kube, ns, spec.name, component)
        want = {
            "zookeeper": spec.zookeeper.replicas,
            "controller": spec.controllers.replicas,
            "broker": spec.brokers.replicas,
        }[component]
        ready = len([p for p in pods if p.ready and not p.terminating])
        if ready < want:
            not_ready.append(f"{component} {ready}/{want}")
    if not_ready:
        raise _retry(
            "PodsNotReady",
            "waiting for pods: " + ", ".join(not_ready),
            operation=operation or IDLE,
            **common,
        )

    status = _status_base(body, spec)
    status.update(common)
    status["operation"] = IDLE
    status["conditions"] = _conditions(
        old.get("conditions"),
        body["metadata"].get("generation", 0),
        ready=(True, "AllPodsReady", f"{spec.brokers.replicas} broker(s) ready"),
        reconciling=(False, "Reconciled", "the cluster matches its spec"),
        error=(False, "NoError", ""),
    )
    return status


def _admin(
    ctx: ClusterContext, spec: ClusterSpec, broker_pods, certificates: Certificates | None
) -> ClusterAdmin | None:
    """The cluster's admin client: on the client listener by pod IPs, or (secured) on INTERNAL
    by the pods' DNS names, with the operator's certificate."""
    bootstrap = admin_bootstrap(spec, broker_pods)
    if bootstrap is None:
        return None
    if certificates is None:
        return ctx.admin_for(bootstrap)
    return ctx.admin_for(bootstrap, tls=certificates.admin_tls)


async def drop_network_policies(kube: Kube, spec: ClusterSpec) -> None:
    """``spec.networkPolicies: false``: delete the cluster's NetworkPolicies, only those it
    owns (a policy of the same name made by someone else is theirs)."""
    for component in names.Component:
        name = names.network_policy(spec.name, component)
        live = await kube.get("NetworkPolicy", name, spec.namespace)
        if live is None:
            continue
        owners = live["metadata"].get("ownerReferences") or []
        if any(o.get("uid") == spec.uid for o in owners):
            await kube.delete("NetworkPolicy", name, spec.namespace)


def _ordinals(pod_names) -> list[int]:
    return [names.ordinal_of(n) for n in pod_names]


def _op(type_: str, message: str) -> dict:
    return {"type": type_, "brokers": [], "message": message, "startedAt": now()}
