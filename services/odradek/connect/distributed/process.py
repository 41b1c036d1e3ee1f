"""The process ``odradek connect distributed`` runs: ``run_distributed(config)``.

In order: the plugins are found; the REST listener is bound (its port is part of the worker id);
the three stores create their topics if needed and read them to the end (in parallel, with the
cluster id asked meanwhile: credentials the brokers refuse stop the start, exit code 1); the
worker is made; the REST API serves; the herder joins the group.
On SIGTERM or SIGINT: the REST listener closes, the work here stops (tasks commit their offsets),
the worker leaves the group, the stores stop, all within ``STOP_TIMEOUT_S``. A worker the group
refuses (``MembershipError``) stops the same way and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from odradek.connect.distributed.herder import DistributedHerder
from odradek.connect.distributed.stores import ConfigStore, StatusStore, TopicOffsetStore
from odradek.connect.process import STOP_TIMEOUT_S  # the whole stop, as standalone's
from odradek.connect.worker_config import WorkerConfig

__all__ = ["run_distributed", "STOP_TIMEOUT_S"]

log = logging.getLogger(__name__)


async def run_distributed(config: WorkerConfig) -> int:
    """Run a distributed worker until SIGTERM/SIGINT; the exit code (0, or 1 when the stop
    overran ``STOP_TIMEOUT_S``, the stores could not start, or the group refused us).

    In order: the plugins are found; the REST listener is bound (its port is the worker id); the
    three stores create their topics if needed and read them to the end; the worker is made;
    the REST API serves; the herder joins the group. On a signal: the REST listener closes, the
    work here stops (tasks commit their offsets), the worker leaves the group, the stores stop.
    """
    from odradek.connect.plugins import Plugins
    from odradek.connect.process import (
        ClusterAuthenticationError,
        _bind_rest,
        _cluster_id,
        _serve_rest,
        _stop_event,
        _stop_within,
        _validator,
    )
    from odradek.connect.runtime.worker import Worker
    from odradek.connect.sink_offsets import SinkOffsets

    stop = _stop_event()
    plugins = Plugins()
    listener = _bind_rest(config)
    worker_id, url = listener.worker_id, listener.url

    configs = ConfigStore(config)
    statuses = StatusStore(config, worker_id)
    offsets = TopicOffsetStore(config)
    stores = (configs, statuses, offsets)
    # The three topics are created and read in parallel, with the cluster id asked meanwhile.
    *results, cluster_id = await asyncio.gather(
        *(asyncio.to_thread(store.start) for store in stores),
        asyncio.to_thread(_cluster_id, config),
        return_exceptions=True,
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    if isinstance(cluster_id, ClusterAuthenticationError):
        log.error("%s", cluster_id)  # the cause of the stores' failures, or of those to come
        failures.append(cluster_id)
    elif failures:
        log.error("the internal topics cannot be used: %s", failures[0])
    if failures:
        for store, result in zip(stores, results, strict=True):
            if not isinstance(result, BaseException):
                await asyncio.to_thread(store.stop)
        listener.sock.close()
        return 1
    if isinstance(cluster_id, BaseException):
        cluster_id = None
    worker = Worker(config, plugins, offsets, statuses, worker_id=worker_id)
    herder = DistributedHerder(
        config,
        worker,
        configs,
        statuses,
        offsets,
        worker_id=worker_id,
        url=url,
        validate=_validator(plugins, config),
        sink_offsets=SinkOffsets(config.admin_config()),
        kafka_cluster_id=cluster_id,
    )
    server = await _serve_rest(herder, plugins, listener)
    await herder.start()
    log.info("distributed worker %s of group %s at %s", worker_id, config.group_id, url)
    code = 0
    try:
        while not stop.is_set() and herder.failure is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        if herder.failure is not None:
            code = 1
        log.info("stopping")
    finally:
        if not await _stop_within(server, herder):
            log.error("the stop took longer than %.0f s (STOP_TIMEOUT_S)", STOP_TIMEOUT_S)
            code = 1
    return code
