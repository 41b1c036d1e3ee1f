"""WriteTxnMarkers (27): a transaction coordinator ends a producer's transaction in partitions
this broker leads, by appending a marker (a COMMIT or ABORT control batch) to each.

Served at v1 only (Kafka's clients and coordinators send v1; v0 is v1 before flexible versions,
which kio lacks, and v2 carries KIP-890 part 2's transaction version, not implemented here).

For each marker, one control batch (``storage.control.encode_marker``: the producer's id and
epoch, the coordinator's epoch) is appended to each partition with ``AppendOrigin.COORDINATOR``
and ``acks=all``, and the partition answers once the ISR has it or REQUEST_TIMED_OUT after
``txn_markers.MARKER_APPEND_TIMEOUT_MS`` (Kafka's ``request.timeout.ms`` default). The rules are the
partition's and its log's, each error per partition as Kafka answers it:

- a partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION, one it follows
  NOT_LEADER_OR_FOLLOWER (the sender looks the leader up again and retries);
- a marker whose coordinator epoch is older than the last marker the partition saw for that
  producer is TRANSACTION_COORDINATOR_FENCED, one of an older producer epoch
  INVALID_PRODUCER_EPOCH (``ProducerStateManager.check``, enforced once, in the log);
- a marker for a producer with no transaction open in the partition is written all the same, as
  Kafka writes it: it closes nothing (the producer state says so), a coordinator that re-sends
  markers after a failover relies on that, and so does ``odradek transactions abort``.

Markers of one request are appended one after the other and their replication awaited together;
the answer is a ``DeferredAnswer``, so the connection handles its next request meanwhile. Once a
marker is in the ISR of a ``__consumer_offsets`` partition, the group coordinator settles that
producer's pending transactional offsets there (``GroupCoordinator.complete_transaction``); a
failure there is the partition's error (its Kafka code, such as COORDINATOR_LOAD_IN_PROGRESS,
else UNKNOWN_SERVER_ERROR as in Kafka), and the sender writes the marker again (a second marker
closes nothing in the log; settling again is harmless).

Who may send it: CLUSTER_ACTION on the cluster, asked first, as Kafka: without it the whole
request is refused (CLUSTER_AUTHORIZATION_FAILED for every partition, ``error_response``) before
any epoch is looked at. Without an authorizer Odradek also serves it only on the inter-broker
listener (``inter.broker.listener.name``), where the
coordinators' senders connect, and answers CLUSTER_AUTHORIZATION_FAILED for every partition
elsewhere (the same answer as a controller request on a client listener). With the default
listeners the inter-broker listener is also the clients' (docs/security.md): as for follower
fetches, keep it on a network only brokers and trusted clients reach.

Runs on the broker's event loop, going through the request and building the answer in time
slices (``time_slices``: 200,000 partitions in 1 MB held the loop 0.5-0.9 s).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from odradek.broker.authorization import require_cluster_action
from odradek.broker.context import DeferredAnswer, RequestContext
from odradek.broker.handlers.build import build, element_type
from odradek.broker.partition import ACKS_ALL
from odradek.broker.replica_manager import ProduceResult
from odradek.broker.txn_markers import MARKER_APPEND_TIMEOUT_MS
from odradek.common.partitions import TopicPartition
from odradek.common.topics import OFFSETS_TOPIC
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.validator import AppendOrigin
from odradek.time_slices import TimeSlices, run_at_once, run_sliced, sliced

API_KEY = ApiKey.WRITE_TXN_MARKERS

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Marker:
    """One marker of the request: what was asked, and each partition's result so far."""

    producer_id: int
    committed: bool
    order: list[tuple[str, list[int]]]
    results: dict[TopicPartition, ProduceResult]


async def handle(ctx: RequestContext, request: Any) -> Any:
    refused = require_cluster_action(ctx, request, error_response)
    if refused is not None:
        return refused
    slices = TimeSlices()
    broker = ctx.broker
    config = broker.config
    if config is not None and ctx.listener.name != config.effective_inter_broker_listener_name:
        log.warning(
            "refusing WriteTxnMarkers on listener %s: served only on the inter-broker listener %s",
            ctx.listener.name,
            config.effective_inter_broker_listener_name,
        )
        steps = _error_steps(request, ErrorCode.cluster_authorization_failed)
        return await run_sliced(steps, slices)
    replicas = broker.replica_manager
    markers: list[_Marker] = []
    waits: list[Coroutine[Any, Any, dict[TopicPartition, ProduceResult]]] = []
    async for marker in sliced(request.markers, slices):
        order = []
        async for t in sliced(marker.topics, slices):
            indexes = []
            for p in t.partition_indexes:
                indexes.append(int(p))
                await slices.tick()
            order.append((t.name, indexes))
        batch = encode_marker(
            ControlType.COMMIT if marker.transaction_result else ControlType.ABORT,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            timestamp_ms=replicas.clock_ms(),
        )
        entries = {}
        for name, indexes in order:
            for index in indexes:
                entries[(name, index)] = batch
                await slices.tick()
        results, replication = await replicas.append_records_then_wait(
            ACKS_ALL, entries, timeout_ms=MARKER_APPEND_TIMEOUT_MS, origin=AppendOrigin.COORDINATOR
        )
        markers.append(
            _Marker(int(marker.producer_id), bool(marker.transaction_result), order, results)
        )
        if replication is not None:
            waits.append(_into(markers[-1], replication))
    del request  # a deferred answer holds no view of the frame
    return DeferredAnswer(_answer_when_replicated(ctx, markers, waits))


async def _into(
    marker: _Marker, replication: Awaitable[dict[TopicPartition, ProduceResult]]
) -> dict[TopicPartition, ProduceResult]:
    marker.results.update(await replication)
    return marker.results


async def _answer_when_replicated(
    ctx: RequestContext,
    markers: list[_Marker],
    waits: list[Coroutine[Any, Any, dict[TopicPartition, ProduceResult]]],
) -> Any:
    await asyncio.gather(*waits)  # together: each wait's timeout runs from now, not in turn
    for marker in markers:
        await _complete_offsets(ctx, marker)
    return await run_sliced(_answer(ctx.api_version, markers))


async def _complete_offsets(ctx: RequestContext, marker: _Marker) -> None:
    """Settle the producer's transactional offsets in each ``__consumer_offsets`` partition
    whose marker is written (Kafka's ``scheduleHandleTxnCompletion``)."""
    groups = ctx.broker.groups
    if groups is None:  # a broker without groups (tests): no offsets to settle
        return
    settled = [
        index
        async for (topic, index), result in sliced(list(marker.results.items()))
        if topic == OFFSETS_TOPIC and result.error == ErrorCode.none
    ]
    topic = OFFSETS_TOPIC
    for index in settled:
        try:
            await groups.complete_transaction(index, marker.producer_id, marker.committed)
        except OdradekError as e:  # COORDINATOR_LOAD_IN_PROGRESS: the sender writes it again
            log.info(
                "settling the transactional offsets of producer %d in %s-%d: %s",
                marker.producer_id,
                topic,
                index,
                e,
            )
            marker.results[(topic, index)] = ProduceResult(e.error_code)
        except Exception:
            log.exception(
                "settling the transactional offsets of producer %d in %s-%d failed",
                marker.producer_id,
                topic,
                index,
            )
            marker.results[(topic, index)] = ProduceResult(ErrorCode.unknown_server_error)


def _answer(version: int, markers: list[_Marker]) -> Generator[None, None, Any]:
    """Results by producer id, as Kafka's response map: markers of one producer merge."""
    by_producer: dict[int, dict[str, dict[int, ErrorCode]]] = {}
    for marker in markers:
        topics = by_producer.setdefault(marker.producer_id, {})
        for name, indexes in marker.order:
            partitions = topics.setdefault(name, {})
            for index in indexes:
                partitions[index] = marker.results[(name, index)].error
                yield
    return (yield from _build(version, by_producer))


def _build(
    version: int, by_producer: dict[int, dict[str, dict[int, ErrorCode]]]
) -> Generator[None, None, Any]:
    """The response, pausing (``yield``) after each partition (``time_slices.run_sliced``)."""
    response_type = schemas.response_schema(API_KEY, version)
    marker_type = element_type(response_type, "markers")
    topic_type = element_type(marker_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    built = []
    for producer_id, topics in by_producer.items():
        built_topics = []
        for name, partitions in topics.items():
            built_partitions = []
            for index, error in partitions.items():
                built_partitions.append(
                    build(partition_type, partition_index=index, error_code=error)
                )
                yield
            built_topics.append(build(topic_type, name=name, partitions=tuple(built_partitions)))
        built.append(build(marker_type, producer_id=producer_id, topics=tuple(built_topics)))
    return build(response_type, markers=tuple(built))


def error_response(request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of every marker (Kafka's ``getErrorResponse``)."""
    return run_at_once(_error_steps(request, error))


def _error_steps(request: Any, error: ErrorCode) -> Generator[None, None, Any]:
    by_producer: dict[int, dict[str, dict[int, ErrorCode]]] = {}
    for marker in request.markers:
        topics = by_producer.setdefault(int(marker.producer_id), {})
        for topic in marker.topics:
            partitions = topics.setdefault(topic.name, {})
            for index in topic.partition_indexes:
                partitions[int(index)] = error
                yield
    return (yield from _build(request.__version__, by_producer))
