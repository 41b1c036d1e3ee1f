"""LeaderAndIsr (4): the controller tells this broker which partitions it leads or follows.

The sender needs CLUSTER_ACTION on the cluster, asked before anything else is looked at: without
it the request is refused whole with CLUSTER_AUTHORIZATION_FAILED (``error_response``), so an
unauthorized caller learns no epoch (Kafka's ``authorizeClusterOperation``).
A request with another broker epoch (STALE_BROKER_EPOCH) or from an older controller epoch
(STALE_CONTROLLER_EPOCH) is refused whole: the error at the top and for every partition, as
Kafka's ``getErrorResponse`` answers (``error_response``, also the answer on a client listener).
Otherwise the topics' configurations are read (several at once) and the logs this broker does
not host yet are created on worker threads (``_create_new_logs``), then each partition state is
applied on the loop by ``controller_requests.become_leader_or_follower`` and answers with its
own error code, grouped by topic id (v5+ responses name topics by id).

A topic name Kafka refuses (``Topic.validate``) is INVALID_TOPIC_EXCEPTION for each of its
partitions, and a negative partition UNKNOWN_TOPIC_OR_PARTITION, before anything is read or
created: such a name is no path to build a log directory from (``../x`` would be one outside the
log dirs).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from odradek.broker import controller_requests
from odradek.broker.admin.errors import InvalidTopicError
from odradek.broker.admin.validation import validate_topic_name
from odradek.broker.authorization import require_cluster_action
from odradek.broker.context import RequestContext
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.topic_configs import TopicConfigs
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
)

API_KEY = ApiKey.LEADER_AND_ISR
CONFIG_READS_IN_FLIGHT = 10
LOG_CREATION_THREADS = 4  # file-system calls release the GIL: they overlap on threads


async def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    refused = require_cluster_action(ctx, request, error_response)
    if refused is not None:  # before any epoch is compared: no STALE_BROKER_EPOCH oracle
        return refused
    broker = ctx.broker
    stale = await controller_requests.stale_epoch(broker, request, "LeaderAndIsr")
    if stale is not None:
        return error_response(request, stale)
    valid = {}
    for topic in request.topic_states:
        try:
            validate_topic_name(topic.topic_name)
        except InvalidTopicError:
            continue
        valid[topic.topic_name] = topic
    if broker.topic_configs is not None:
        await _read_configs(broker.topic_configs, list(valid))
    await _create_new_logs(broker.replica_manager, valid.values())
    # Applied without yielding: giving the loop a turn between topics handed it to the
    # followers' fetch rounds, each over every partition of their sessions, and made the
    # creation of 3,000 partitions take 18-23 s instead of 11-12 (bench/scale_bench.py). A full
    # state of 10,000 partitions holds the loop about a second (docs/benchmarks.md).
    topics = []
    for topic in request.topic_states:
        if topic.topic_name not in valid:
            topics.append(_topic_fails(topic, ErrorCode.invalid_topic_exception))
            continue
        errors = []
        for p in topic.partition_states:
            if p.partition_index < 0:
                errors.append(
                    LeaderAndIsrPartitionError(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                    )
                )
                continue
            state = PartitionState(
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=tuple(p.isr),
                replicas=tuple(p.replicas),
                controller_epoch=p.controller_epoch,
                partition_epoch=p.partition_epoch,
                adding_replicas=tuple(p.adding_replicas),
            )
            error = controller_requests.become_leader_or_follower(
                broker.replica_manager, topic.topic_name, p.partition_index, state, is_new=p.is_new
            )
            errors.append(
                LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=error)
            )
        topics.append(
            LeaderAndIsrTopicError(topic_id=topic.topic_id, partition_errors=tuple(errors))
        )
    broker.replica_manager.update_gauges(broker.metrics)
    return LeaderAndIsrResponse(error_code=ErrorCode.none, topics=tuple(topics))


async def _read_configs(topic_configs: TopicConfigs, topics: list[str]) -> None:
    """Each topic's configuration read (if this broker never did) before its logs are made,
    several reads in flight: one ZooKeeper round trip after another was a second per thousand
    topics in the LeaderAndIsr a restarted broker gets."""
    slots = asyncio.Semaphore(CONFIG_READS_IN_FLIGHT)

    async def read(topic: str) -> None:
        async with slots:
            await topic_configs.ensure(topic)

    await asyncio.gather(*(read(topic) for topic in topics))


async def _create_new_logs(
    replicas: ReplicaManager, topics: Iterable[LeaderAndIsrTopicState]
) -> None:
    """Create the logs of the partitions this broker is told to host and does not yet, on
    worker threads, before their states are applied on the loop (which then finds them).

    A log is a directory and a few files: about 2 ms of file-system calls each here, so the
    thousands of partitions of one request held the event loop for seconds when each was made
    in turn while applying its state. A log that cannot be made here is left to that step,
    which reports its error for its partition (``become_leader_or_follower``).
    """
    wanted = [
        (
            topic.topic_name,
            p.partition_index,
            controller_requests.may_create_empty(replicas.broker_id, p, p.is_new),
        )
        for topic in topics
        for p in topic.partition_states
        if p.partition_index >= 0
        and replicas.broker_id in p.replicas
        and (topic.topic_name, p.partition_index) not in replicas.partitions
    ]
    if not wanted:
        return
    log_manager = replicas.log_manager

    def create(chunk: list[tuple[str, int, bool]]) -> None:
        for topic, partition, is_new in chunk:
            with contextlib.suppress(OdradekError, OSError):  # reported when applied
                log_manager.get_or_create_log(
                    topic, partition, log_manager.topic_config(topic), is_new=is_new
                )

    size = -(-len(wanted) // LOG_CREATION_THREADS)
    await asyncio.gather(
        *(asyncio.to_thread(create, wanted[n : n + size]) for n in range(0, len(wanted), size))
    )


def error_response(request: LeaderAndIsrRequest, error: ErrorCode) -> LeaderAndIsrResponse:
    """``error`` at the top and for every partition of the request."""
    return LeaderAndIsrResponse(
        error_code=error,
        topics=tuple(_topic_fails(topic, error) for topic in request.topic_states),
    )


def _topic_fails(topic: LeaderAndIsrTopicState, error: ErrorCode) -> LeaderAndIsrTopicError:
    return LeaderAndIsrTopicError(
        topic_id=topic.topic_id,
        partition_errors=tuple(
            LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=error)
            for p in topic.partition_states
        ),
    )
