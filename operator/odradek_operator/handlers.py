"""The kopf registrations, and nothing else: each handler hands over to ``reconcile``.

OdradekCluster: create/update/resume run one reconciliation pass; a pass with more to do raises
``Retry`` and kopf calls it again after ``delay_s`` (TemporaryError), a refused spec is a
PermanentError (the status says why) until the spec changes; a timer runs the same pass every
``CLUSTER_INTERVAL_S`` so an operator restarted mid-operation, or a pod deleted by hand, is picked
up. Passes of one cluster never overlap (a lock per object). A change of
``spec.brokers.replicas`` is also announced as a ``Scaling`` event. OdradekTopic:
create/update/resume converge it, a timer reverts drift, deletion (kopf's finalizer) deletes the
topic.
OdradekConnect: create/update/resume and a timer apply its workers' objects and report them.
OdradekConnector: create/update/resume and a timer converge it through the workers' REST API
(config, target state) and read its status; deletion (kopf's finalizer) deletes the connector.
OdradekUser: create/update/resume and a timer converge its credential, Secret, ACLs and quotas
(reconcile/users.py; the timer repairs drift); deletion (kopf's finalizer) deletes the user's
credentials, ACLs and quotas.

The Kubernetes port and the admin factory live in kopf's ``memo`` (``memo.ctx``, a
``ClusterContext``), made at startup unless the caller (a test) gave one.
"""

from __future__ import annotations

import asyncio
import logging
import os

import kopf

from odradek_operator import logs, metrics, names
from odradek_operator.kube import ApiKube
from odradek_operator.reconcile.admin import ClusterUnavailable, OpsAdmin
from odradek_operator.reconcile.cluster import ClusterContext, reconcile_cluster
from odradek_operator.reconcile.connect import delete_connector, reconcile_connect, sync_connector
from odradek_operator.reconcile.status import Refused, Retry
from odradek_operator.reconcile.topics import delete_topic, sync_topic
from odradek_operator.reconcile.users import delete_user, sync_user

log = logging.getLogger(__name__)

CLUSTERS = (names.GROUP, names.VERSION, names.CLUSTER_PLURAL)
TOPICS = (names.GROUP, names.VERSION, names.TOPIC_PLURAL)
CONNECTS = (names.GROUP, names.VERSION, names.CONNECT_PLURAL)
CONNECTORS = (names.GROUP, names.VERSION, names.CONNECTOR_PLURAL)
USERS = (names.GROUP, names.VERSION, names.USER_PLURAL)
# The periodic passes; the environment may shorten them (the end-to-end tests do).
CLUSTER_INTERVAL_S = float(os.environ.get("ODRADEK_OPERATOR_CLUSTER_INTERVAL_S", "15"))
TOPIC_INTERVAL_S = float(os.environ.get("ODRADEK_OPERATOR_TOPIC_INTERVAL_S", "30"))
CONNECT_INTERVAL_S = float(os.environ.get("ODRADEK_OPERATOR_CONNECT_INTERVAL_S", "15"))
CONNECTOR_INTERVAL_S = float(os.environ.get("ODRADEK_OPERATOR_CONNECTOR_INTERVAL_S", "15"))
USER_INTERVAL_S = float(os.environ.get("ODRADEK_OPERATOR_USER_INTERVAL_S", "30"))
DEFAULT_IMAGE = "odradek:latest"


def _lock(memo: kopf.Memo, uid: str) -> asyncio.Lock:
    """The lock of one cluster's passes, in this operator's memo (its event loop's)."""
    return memo.locks.setdefault(uid, asyncio.Lock())


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_) -> None:
    # Progress and the last-handled spec in annotations: the status belongs to the resource.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="odradek.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="odradek.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    logs.install()  # a pass that waits is logged and posted at INFO, not as an error
    settings.watching.server_timeout = 60
    memo.locks = {}
    if getattr(memo, "ctx", None) is None:
        memo.ctx = ClusterContext(
            ApiKube(),
            OpsAdmin,
            os.environ.get("ODRADEK_IMAGE", DEFAULT_IMAGE),
            operator_namespace=os.environ.get("POD_NAMESPACE") or None,
        )


@kopf.on.login()
def login(**kwargs):
    # $KUBECONFIG read now (the kubernetes client reads it once, at import); else in-cluster.
    if os.environ.get("KUBECONFIG"):
        return kopf.login_with_kubeconfig(**kwargs)
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


# -- OdradekCluster ------------------------------------------------------------------------------


async def _cluster_pass(body, memo, *, periodic: bool) -> None:
    meta = body["metadata"]
    lock = _lock(memo, meta["uid"])
    if periodic and lock.locked():
        return  # a change handler is on it
    async with lock:
        if not periodic:
            # The body kopf handed over was read before this pass waited for the lock: a timer's
            # pass may have written status since (an operation's progress, "rebalanced"), and a
            # stale one would repeat that step. Work from the object as it is now.
            latest = await memo.ctx.kube.get("OdradekCluster", meta["name"], meta.get("namespace"))
            if latest is None:
                return  # deleted meanwhile
            body = latest
        old_op = (body.get("status") or {}).get("operation") or {}
        try:
            status = await reconcile_cluster(memo.ctx, body)
        except Retry as retry:
            metrics.RECONCILIATIONS.labels("OdradekCluster", "retry").inc()
            metrics.ERRORS.labels("OdradekCluster", retry.reason).inc()
            _announce(body, old_op, retry.status.get("operation"))
            raise kopf.TemporaryError(str(retry), delay=retry.delay_s) from retry
        except Refused as refused:
            metrics.RECONCILIATIONS.labels("OdradekCluster", "refused").inc()
            metrics.ERRORS.labels("OdradekCluster", refused.reason).inc()
            kopf.warn(body, reason=refused.reason, message=str(refused))
            if periodic:
                return  # the status says it; the timer keeps running
            raise kopf.PermanentError(str(refused)) from refused
        except Exception:
            metrics.RECONCILIATIONS.labels("OdradekCluster", "error").inc()
            raise
        metrics.RECONCILIATIONS.labels("OdradekCluster", "ok").inc()
        _announce(body, old_op, status.get("operation"))


def _announce(body, old: dict, new: dict | None) -> None:
    meta = body["metadata"]
    metrics.record_operation(meta.get("namespace", ""), meta["name"], new)
    message = (new or {}).get("message")
    if new and message and message != old.get("message"):
        kopf.info(body, reason=new.get("type", "Operation"), message=message)


@kopf.on.resume(*CLUSTERS)
@kopf.on.create(*CLUSTERS)
@kopf.on.update(*CLUSTERS)
async def cluster_changed(body, memo, **_) -> None:
    await _cluster_pass(body, memo, periodic=False)


@kopf.on.field(*CLUSTERS, field="spec.brokers.replicas")
def brokers_scaled(body, old, new, **_) -> None:
    if old is not None and new is not None and old != new:
        kopf.info(body, reason="Scaling", message=f"brokers {old} -> {new} requested")


@kopf.timer(*CLUSTERS, interval=CLUSTER_INTERVAL_S, initial_delay=CLUSTER_INTERVAL_S)
async def cluster_periodic(body, memo, **_) -> None:
    await _cluster_pass(body, memo, periodic=True)


# -- OdradekTopic --------------------------------------------------------------------------------


async def _topic_pass(body, memo, *, periodic: bool) -> None:
    try:
        await sync_topic(memo.ctx.kube, memo.ctx.admin_for, body, periodic=periodic)
    except Retry as retry:
        metrics.RECONCILIATIONS.labels("OdradekTopic", "retry").inc()
        metrics.ERRORS.labels("OdradekTopic", retry.reason).inc()
        raise kopf.TemporaryError(str(retry), delay=retry.delay_s) from retry
    except Refused as refused:
        metrics.RECONCILIATIONS.labels("OdradekTopic", "refused").inc()
        metrics.ERRORS.labels("OdradekTopic", refused.reason).inc()
        kopf.warn(body, reason=refused.reason, message=str(refused))
        if not periodic:
            raise kopf.PermanentError(str(refused)) from refused
        return
    metrics.RECONCILIATIONS.labels("OdradekTopic", "ok").inc()


@kopf.on.resume(*TOPICS)
@kopf.on.create(*TOPICS)
@kopf.on.update(*TOPICS)
async def topic_changed(body, memo, **_) -> None:
    await _topic_pass(body, memo, periodic=False)


@kopf.timer(*TOPICS, interval=TOPIC_INTERVAL_S, initial_delay=TOPIC_INTERVAL_S)
async def topic_periodic(body, memo, **_) -> None:
    await _topic_pass(body, memo, periodic=True)


@kopf.on.delete(*TOPICS, retries=10, backoff=5)
async def topic_deleted(body, memo, logger, **_) -> None:
    try:
        logger.info(await delete_topic(memo.ctx.kube, memo.ctx.admin_for, body))
    except (Retry, ClusterUnavailable) as e:
        raise kopf.TemporaryError(str(e), delay=5) from e


# -- OdradekConnect and OdradekConnector ----------------------------------------------------------


async def _guarded(kind: str, body, periodic: bool, step) -> None:
    """Run one pass; Retry -> TemporaryError, Refused -> PermanentError (a timer's pass only
    warns: the status says it and the timer keeps running)."""
    try:
        await step()
    except Retry as retry:
        metrics.RECONCILIATIONS.labels(kind, "retry").inc()
        metrics.ERRORS.labels(kind, retry.reason).inc()
        if periodic:
            return  # the status says what it waits for; the change handler retries
        raise kopf.TemporaryError(str(retry), delay=retry.delay_s) from retry
    except Refused as refused:
        metrics.RECONCILIATIONS.labels(kind, "refused").inc()
        metrics.ERRORS.labels(kind, refused.reason).inc()
        kopf.warn(body, reason=refused.reason, message=str(refused))
        if not periodic:
            raise kopf.PermanentError(str(refused)) from refused
        return
    metrics.RECONCILIATIONS.labels(kind, "ok").inc()


async def _locked_pass(kind: str, body, memo, periodic: bool, step) -> None:
    """One pass of a resource under its lock; a timer's pass skips while a change's pass runs."""
    lock = _lock(memo, body["metadata"]["uid"])
    if periodic and lock.locked():
        return
    async with lock:
        await _guarded(kind, body, periodic, step)


async def _connect_pass(body, memo, *, periodic: bool) -> None:
    ctx = memo.ctx
    await _locked_pass(
        names.CONNECT_KIND,
        body,
        memo,
        periodic,
        lambda: reconcile_connect(ctx.kube, ctx.default_image, body, ctx.operator_namespace),
    )


@kopf.on.resume(*CONNECTS)
@kopf.on.create(*CONNECTS)
@kopf.on.update(*CONNECTS)
async def connect_changed(body, memo, **_) -> None:
    await _connect_pass(body, memo, periodic=False)


@kopf.timer(*CONNECTS, interval=CONNECT_INTERVAL_S, initial_delay=CONNECT_INTERVAL_S)
async def connect_periodic(body, memo, **_) -> None:
    await _connect_pass(body, memo, periodic=True)


async def _connector_pass(body, memo, *, periodic: bool) -> None:
    ctx = memo.ctx
    await _locked_pass(
        names.CONNECTOR_KIND,
        body,
        memo,
        periodic,
        lambda: sync_connector(ctx.kube, ctx.connect_api_for, body),
    )


@kopf.on.resume(*CONNECTORS)
@kopf.on.create(*CONNECTORS)
@kopf.on.update(*CONNECTORS)
async def connector_changed(body, memo, **_) -> None:
    await _connector_pass(body, memo, periodic=False)


@kopf.timer(*CONNECTORS, interval=CONNECTOR_INTERVAL_S, initial_delay=CONNECTOR_INTERVAL_S)
async def connector_periodic(body, memo, **_) -> None:
    await _connector_pass(body, memo, periodic=True)


@kopf.on.delete(*CONNECTORS, retries=20, backoff=3)
async def connector_deleted(body, memo, logger, **_) -> None:
    ctx = memo.ctx
    try:
        logger.info(await delete_connector(ctx.kube, ctx.connect_api_for, body))
    except Retry as e:
        raise kopf.TemporaryError(str(e), delay=e.delay_s) from e


# -- OdradekUser ---------------------------------------------------------------------------------


async def _user_pass(body, memo, *, periodic: bool) -> None:
    ctx = memo.ctx
    await _locked_pass(
        names.USER_KIND,
        body,
        memo,
        periodic,
        lambda: sync_user(ctx.kube, ctx.admin_for, body, periodic=periodic),
    )


@kopf.on.resume(*USERS)
@kopf.on.create(*USERS)
@kopf.on.update(*USERS)
async def user_changed(body, memo, **_) -> None:
    await _user_pass(body, memo, periodic=False)


@kopf.timer(*USERS, interval=USER_INTERVAL_S, initial_delay=USER_INTERVAL_S)
async def user_periodic(body, memo, **_) -> None:
    await _user_pass(body, memo, periodic=True)


@kopf.on.delete(*USERS, retries=10, backoff=5)
async def user_deleted(body, memo, logger, **_) -> None:
    try:
        logger.info(await delete_user(memo.ctx.kube, memo.ctx.admin_for, body))
    except (Retry, ClusterUnavailable) as e:
        raise kopf.TemporaryError(str(e), delay=5) from e
