"""One pass of an ``OdradekConnect`` (its workers) and of an ``OdradekConnector`` (through the
workers' REST API), and a connector's deletion.

OdradekConnect: read the spec (a bad one is ``Refused("InvalidSpec")``), find the bootstrap (the
``clusterRef``'s bootstrap Service on the port of the listener its ``spec.authentication`` and
``spec.tls`` pick: the pass waits while the OdradekCluster does not exist, has no bootstrap yet
or no such listener; or ``bootstrapServers``), read the Secret keys the workers use (waits while
one is missing; their values' hash goes in the pod template), apply the ConfigMap, Service,
NetworkPolicy and Deployment (model/connect.py; the NetworkPolicy it made is deleted when
``spec.networkPolicies`` turns false), then count the workers: ``Retry`` until
``spec.replicas`` of them are ready.

OdradekConnector: read the spec, find the ready workers of ``spec.connectRef`` (``Retry`` while
there are none), ``PUT /connectors/{name}/config`` when the config the workers hold differs,
then move the connector to ``spec.state`` (pause / resume / stop) when its observed state is not
that, and read ``GET /connectors/{name}/status`` into the resource's status. A 400 from the
workers (a config the connector refuses) is ``Refused("InvalidConfig")`` with Kafka Connect's
message; workers that do not answer, or answer 409 while the group rebalances, are ``Retry``.
A connector or task in FAILED sets ``Ready=False`` (``TasksFailed`` / ``ConnectorFailed``)
with the line of each trace that names the exception (a Java trace's first, a Python
traceback's last); the pass does not retry for it (the timer reads it again).
While the connector is on its way (UNASSIGNED, RESTARTING, tasks not started yet) the pass
writes what it sees and retries soon.

Status conditions: Ready and Error (reasons in CamelCase, messages in words), as the cluster's.
Plain async functions over the ``Kube`` and ``ConnectApi`` ports; nothing kept in memory.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from odradek_operator import names
from odradek_operator.kube import Kube, apply
from odradek_operator.model import connect
from odradek_operator.model.connect_security import WorkerSecurity, trusted_bundle
from odradek_operator.model.meta import config_hash
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.reconcile.connect_api import (
    ConnectApiFactory,
    ConnectRefused,
    ConnectUnavailable,
)
from odradek_operator.reconcile.status import Refused, Retry, condition, set_condition

__all__ = ["delete_connector", "reconcile_connect", "sync_connector", "worker_urls"]

log = logging.getLogger(__name__)

WAIT_S = 3.0  # the next pass while workers start
ABSENT_WAIT_S = 15.0  # the next pass while what a resource names does not exist
CONNECTOR_WAIT_S = 2.0  # the next pass while a connector starts or changes state
TRACE_LINE_MAX = 300  # characters of a trace's first line in a condition message


async def _write_status(kube: Kube, kind: str, body: Mapping, status: dict) -> None:
    meta = body["metadata"]
    await kube.merge_patch(kind, meta["name"], meta.get("namespace"), {"status": status}, "status")


@contextlib.contextmanager
def _invalid_spec_refused() -> Iterator[None]:
    """A ``SpecError`` is ``Refused("InvalidSpec")``: the spec must change."""
    try:
        yield
    except SpecError as e:
        raise Refused("InvalidSpec", str(e)) from e


def _conditions(old: list[dict] | None, ready: tuple, error: tuple) -> list[dict]:
    conditions = set_condition(old, condition("Ready", *ready))
    return set_condition(conditions, condition("Error", *error))


def _stopped_conditions(old: list[dict] | None, stopped: Retry | Refused) -> list[dict]:
    """The conditions of a pass that stopped: a Retry is not ready yet and no error; a Refused
    is an error that waits for the spec to change."""
    if isinstance(stopped, Retry):
        return _conditions(old, (False, stopped.reason, str(stopped)), (False, "NoError", ""))
    return _conditions(
        old,
        (False, stopped.reason, "waiting for the spec to change"),
        (True, stopped.reason, str(stopped)),
    )


@dataclass(frozen=True)
class Worker:
    """What the passes read of a worker pod (a Deployment's: no ordinal)."""

    name: str
    ip: str | None
    ready: bool
    terminating: bool

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> Worker:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        return cls(meta["name"], status.get("podIP"), ready, bool(meta.get("deletionTimestamp")))


async def read_workers(kube: Kube, namespace: str, connect_name: str) -> list[Worker]:
    pods = await kube.list("Pod", namespace, names.connect_selector_labels(connect_name))
    return [Worker.of(p) for p in pods]


# --- OdradekConnect -----------------------------------------------------------------------------


async def _bootstrap(kube: Kube, spec: connect.ConnectSpec) -> tuple[str, WorkerSecurity]:
    """The bootstrap servers and the security settings resolved against the cluster."""
    if spec.bootstrap_servers is not None:
        with _invalid_spec_refused():
            return spec.bootstrap_servers, spec.security.for_cluster(None)
    cluster = await kube.get(names.CLUSTER_KIND, str(spec.cluster_ref), spec.namespace)
    if cluster is None:
        raise Retry(
            f"waiting for OdradekCluster {spec.cluster_ref!r} (spec.clusterRef) in namespace "
            f"{spec.namespace}",
            WAIT_S,
            "ClusterNotFound",
        )
    bootstrap = (cluster.get("status") or {}).get("bootstrap")
    if not bootstrap:
        raise Retry(
            f"waiting for OdradekCluster {spec.cluster_ref!r} to report its bootstrap Service",
            WAIT_S,
            "ClusterNotReady",
        )
    try:
        cluster_spec = ClusterSpec.from_resource(cluster)
    except SpecError as e:
        raise Retry(
            f"OdradekCluster {spec.cluster_ref!r} has an invalid spec: {e}",
            WAIT_S,
            "ClusterNotReady",
        ) from e
    try:
        security = spec.security.for_cluster(cluster_spec)
    except SpecError as e:  # the cluster's listeners may change: wait, do not refuse
        raise Retry(str(e), ABSENT_WAIT_S, "NoMatchingListener") from e
    port = security.port if security.port is not None else cluster_spec.ports.client
    return names.bootstrap_address(cluster_spec.name, spec.namespace, port), security


async def _secret_data(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    secret = await kube.get("Secret", name, namespace)
    if secret is None:
        raise Retry(
            f"waiting for Secret {name!r} (spec.authentication, spec.tls)", WAIT_S, "SecretNotFound"
        )
    return dict(secret.get("data") or {})


async def _secrets(
    kube: Kube, spec: connect.ConnectSpec, security: WorkerSecurity
) -> tuple[str | None, str | None]:
    """(the trusted CA bundle, a hash of it and of every other Secret key the workers read,
    salted with the Connect's uid: the pod template shows it); ``Retry`` while one is missing.
    (None, None) when they read none."""
    values = []
    for ref in security.referenced():
        value = (await _secret_data(kube, spec.namespace, ref.secret)).get(ref.key)
        if value is None:
            raise Retry(
                f"waiting for key {ref.key!r} of Secret {ref.secret!r} (spec.authentication)",
                WAIT_S,
                "SecretNotFound",
            )
        values.append([ref.secret, ref.key, value])
    pems = []
    for source in security.trusted_sources():
        data = await _secret_data(kube, spec.namespace, source.secret)
        found = [
            (source.secret, k, base64.b64decode(v).decode())
            for k, v in data.items()
            if source.matches(k)
        ]
        if not found:
            which = source.certificate or source.pattern
            raise Retry(
                f"waiting for {which!r} in Secret {source.secret!r} (spec.tls.trustedCertificates)",
                WAIT_S,
                "SecretNotFound",
            )
        pems.extend(found)
    bundle = trusted_bundle(pems) if pems else None
    if not values and bundle is None:
        return None, None
    return bundle, config_hash(spec.uid, values, bundle)


async def _drop_network_policy(kube: Kube, spec: connect.ConnectSpec) -> None:
    """``spec.networkPolicies: false``: delete the policy this Connect made (only if it owns it)."""
    name = names.connect_network_policy(spec.name)
    live = await kube.get("NetworkPolicy", name, spec.namespace)
    owners = (live or {}).get("metadata", {}).get("ownerReferences") or []
    if any(o.get("uid") == spec.uid for o in owners):
        await kube.delete("NetworkPolicy", name, spec.namespace)


async def reconcile_connect(
    kube: Kube, default_image: str, body: Mapping, operator_namespace: str | None = None
) -> dict:
    """One pass of an OdradekConnect (module docstring); the status written.
    Raises Retry or Refused after writing the status that says why."""
    old = dict(body.get("status") or {})
    status: dict[str, Any] = {"observedGeneration": body["metadata"].get("generation", 0)}
    try:
        with _invalid_spec_refused():
            spec = connect.ConnectSpec.from_resource(body)
        status["url"] = names.connect_url(spec.name, spec.namespace)
        status["selector"] = names.label_selector(names.connect_selector_labels(spec.name))
        bootstrap, security = await _bootstrap(kube, spec)
        status["bootstrapServers"] = bootstrap
        status["securityProtocol"] = security.protocol
        bundle, digest = await _secrets(kube, spec, security)
        with _invalid_spec_refused():
            objects = connect.desired_objects(
                spec,
                default_image,
                bootstrap,
                security,
                trusted_bundle=bundle,
                secrets_digest=digest,
                operator_namespace=operator_namespace,
            )
        for obj in objects:
            await apply(kube, obj)
        if not spec.network_policies:
            await _drop_network_policy(kube, spec)
        live = [w for w in await read_workers(kube, spec.namespace, spec.name) if not w.terminating]
        ready = [p for p in live if p.ready]
        status["replicas"] = len(live)
        status["readyReplicas"] = len(ready)
        if len(ready) < spec.replicas or len(live) != spec.replicas:
            message = f"waiting for workers: {len(ready)} of {spec.replicas} ready"
            raise Retry(message, WAIT_S, "WorkersStarting")
    except (Retry, Refused) as stopped:
        status["conditions"] = _stopped_conditions(old.get("conditions"), stopped)
        await _write_status(kube, names.CONNECT_KIND, body, status)
        raise
    status["conditions"] = _conditions(
        old.get("conditions"),
        (True, "WorkersReady", f"{spec.replicas} worker(s) ready"),
        (False, "NoError", ""),
    )
    await _write_status(kube, names.CONNECT_KIND, body, status)
    return status


# --- OdradekConnector ---------------------------------------------------------------------------


async def worker_urls(kube: Kube, namespace: str, connect_name: str) -> list[str]:
    """The REST API of every ready worker; ``Retry`` when there is none."""
    urls = [
        f"http://{w.ip}:{names.CONNECT_REST_PORT}"
        for w in await read_workers(kube, namespace, connect_name)
        if w.ready and w.ip and not w.terminating
    ]
    if not urls:
        connect_obj = await kube.get(names.CONNECT_KIND, connect_name, namespace)
        if connect_obj is None:
            raise Retry(
                f"waiting for OdradekConnect {connect_name!r} (spec.connectRef)",
                ABSENT_WAIT_S,
                "ConnectNotFound",
            )
        raise Retry(
            f"no worker of OdradekConnect {connect_name!r} is ready", WAIT_S, "WorkersUnavailable"
        )
    return sorted(urls)


def _first_line(trace: object) -> str:
    """The line of a trace that says what failed: a Java trace's first line (the exception and
    its message), a Python traceback's last unindented one (the exception, after the frames)."""
    lines = [line.rstrip() for line in str(trace or "").splitlines() if line.strip()]
    if not lines:
        return "no trace"
    if lines[0].startswith("Traceback (most recent call last)"):
        said = [line for line in lines if not line[0].isspace() and not line.startswith("Trace")]
        return (said[-1] if said else lines[-1].strip())[:TRACE_LINE_MAX]
    return lines[0].strip()[:TRACE_LINE_MAX]


def status_of(answer: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka Connect's ``GET /connectors/{name}/status`` as the resource's status fields."""
    connector = answer.get("connector") or {}
    out: dict[str, Any] = {
        "connectorStatus": {
            "state": str(connector.get("state", "UNASSIGNED")),
            "worker": str(connector.get("worker_id", "")),
        },
        "tasks": [],
    }
    if connector.get("trace"):
        out["connectorStatus"]["trace"] = str(connector["trace"])
    if answer.get("type"):
        out["type"] = str(answer["type"])
    for task in sorted(answer.get("tasks") or [], key=lambda t: int(t.get("id", 0))):
        entry = {
            "id": int(task.get("id", 0)),
            "state": str(task.get("state", "UNASSIGNED")),
            "worker": str(task.get("worker_id", "")),
        }
        if task.get("trace"):
            entry["trace"] = str(task["trace"])
        out["tasks"].append(entry)
    return out


def judge(spec: connect.ConnectorSpec, observed: Mapping[str, Any]) -> tuple[str, str, str]:
    """("ready" | "failed" | "pending", reason, message) from the status fields."""
    connector = observed["connectorStatus"]
    tasks = observed["tasks"]
    if connector["state"] == "FAILED":
        return (
            "failed",
            "ConnectorFailed",
            f"connector {spec.name} failed on {connector['worker'] or 'a worker'}: "
            + _first_line(connector.get("trace")),
        )
    failed = [t for t in tasks if t["state"] == "FAILED"]
    if failed:
        words = "; ".join(
            f"task {t['id']} failed on {t['worker'] or 'a worker'}: {_first_line(t.get('trace'))}"
            for t in failed
        )
        return "failed", "TasksFailed", f"{len(failed)} of {len(tasks)} task(s) failed: {words}"
    want = spec.reached_state
    behind = [t for t in tasks if t["state"] != want]
    if connector["state"] != want or behind:
        seen = ", ".join(f"task {t['id']} {t['state']}" for t in tasks) or "no tasks"
        return (
            "pending",
            "Transitioning",
            f"waiting for {want}: connector {connector['state']}, {seen}",
        )
    return "ready", want.capitalize(), f"connector {want} with {len(tasks)} task(s)"


async def _converge(api, spec: connect.ConnectorSpec) -> dict[str, Any]:
    desired = spec.connector_config()
    current = await api.config(spec.name)
    held = {k: v for k, v in (current or {}).items() if k != "name"}
    if current is None or held != desired:
        await api.put_config(spec.name, desired)
    answer = await api.status(spec.name)
    if answer is None:
        raise Retry(f"connector {spec.name} created, waiting for its status", CONNECTOR_WAIT_S)
    state = str((answer.get("connector") or {}).get("state", ""))
    if state != spec.reached_state and (spec.state != "running" or state in ("PAUSED", "STOPPED")):
        await api.set_target_state(spec.name, spec.target_state)
        answer = await api.status(spec.name) or answer
    return status_of(answer)


async def sync_connector(kube: Kube, api_for: ConnectApiFactory, body: Mapping) -> dict:
    """One pass of an OdradekConnector (module docstring); the status written.
    Raises Retry or Refused after writing the status that says why."""
    old = dict(body.get("status") or {})
    status: dict[str, Any] = {"observedGeneration": body["metadata"].get("generation", 0)}
    try:
        with _invalid_spec_refused():
            spec = connect.ConnectorSpec.from_resource(body)
        api = api_for(await worker_urls(kube, spec.namespace, spec.connect))
        try:
            status.update(await _converge(api, spec))
            if (old.get("connectorStatus") or {}).get("trace"):
                status["connectorStatus"].setdefault("trace", None)  # merge patch: remove it
        except ConnectUnavailable as e:
            raise Retry(f"the workers' REST API: {e}", WAIT_S, "WorkersUnavailable") from e
        except ConnectRefused as e:
            raise Refused("InvalidConfig", f"the workers refused the config: {e.message}") from e
        finally:
            await api.close()
        verdict, reason, message = judge(spec, status)
        if verdict == "pending":
            raise Retry(message, CONNECTOR_WAIT_S, reason)
    except (Retry, Refused) as stopped:
        status["conditions"] = _stopped_conditions(old.get("conditions"), stopped)
        await _write_status(kube, names.CONNECTOR_KIND, body, status)
        raise
    failed = verdict == "failed"
    status["conditions"] = _conditions(
        old.get("conditions"),
        (not failed, reason, message),
        (failed, reason if failed else "NoError", message if failed else ""),
    )
    await _write_status(kube, names.CONNECTOR_KIND, body, status)
    return status


async def delete_connector(kube: Kube, api_for: ConnectApiFactory, body: Mapping) -> str:
    """``DELETE /connectors/{name}``; what happened, in words. With its OdradekConnect gone (or
    going) there is nothing to delete. Raises Retry while the workers cannot be asked."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta.get("namespace") or "default"
    connect_name = str((body.get("spec") or {}).get("connectRef") or "")
    owner = await kube.get(names.CONNECT_KIND, connect_name, namespace) if connect_name else None
    if owner is None or owner["metadata"].get("deletionTimestamp"):
        return f"OdradekConnect {connect_name!r} is gone: connector {name} went with it"
    api = api_for(await worker_urls(kube, namespace, connect_name))
    try:
        existed = await api.delete(name)
    except ConnectUnavailable as e:
        raise Retry(f"the workers' REST API: {e}", WAIT_S, "WorkersUnavailable") from e
    except ConnectRefused as e:
        raise Retry(f"the workers refused the delete: {e.message}", WAIT_S, "DeleteRefused") from e
    finally:
        await api.close()
    return f"connector {name} deleted" if existed else f"connector {name} did not exist"
