"""UpdateMetadata (6): the controller's view of live brokers and partition leaders, cached.

The sender needs CLUSTER_ACTION on the cluster, asked first: without it the request is refused
whole with CLUSTER_AUTHORIZATION_FAILED (``error_response``) before any epoch is compared.
A request with another broker epoch answers STALE_BROKER_EPOCH, one from an older controller
epoch STALE_CONTROLLER_EPOCH (Kafka raises ControllerMovedException, whose code that is); both
change nothing. Otherwise the broker list is replaced and each topic's partition states are
merged (``controller_requests.merge_topic``), in time slices; Metadata requests are answered
from that cache. Each live broker is
kept with every endpoint it has, by listener name; Metadata picks the request's listener. A
partition this broker leads takes a newer ISR of its own leader epoch from it
(``Partition.adopt_committed_isr``: an AlterPartition commit whose answer was lost).
"""

from __future__ import annotations

from odradek.broker import controller_requests
from odradek.broker.authorization import require_cluster_action
from odradek.broker.context import RequestContext
from odradek.broker.metadata_cache import LiveBroker, PartitionMetadata
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    UpdateMetadataBroker,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from odradek.time_slices import TimeSlices

API_KEY = ApiKey.UPDATE_METADATA


async def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    refused = require_cluster_action(ctx, request, error_response)
    if refused is not None:  # before any epoch is compared: no STALE_BROKER_EPOCH oracle
        return refused
    broker = ctx.broker
    stale = await controller_requests.stale_epoch(broker, request, "UpdateMetadata")
    if stale is not None:
        return error_response(request, stale)
    brokers = [_live_broker(b) for b in request.live_brokers]
    topics = [
        controller_requests.TopicUpdate(
            name=topic.topic_name,
            topic_id=topic.topic_id,
            partitions=tuple(
                PartitionMetadata(
                    partition=p.partition_index,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    offline_replicas=tuple(p.offline_replicas),
                )
                for p in topic.partition_states
            ),
        )
        for topic in request.topic_states
    ]
    # In time slices: the full state a controller sends when elected, or to a broker that
    # registers, names every partition of the cluster (10,000 a broker: seconds of the loop).
    slices = TimeSlices()
    broker.metadata.update_brokers(brokers)
    for update in topics:
        controller_requests.merge_topic(broker.metadata, update)
        await slices.tick(len(update.partitions) or 1)
    replicas = broker.replica_manager
    for topic in request.topic_states:
        for p in topic.partition_states:
            hosted = replicas.partitions.get((topic.topic_name, p.partition_index))
            if hosted is not None:
                hosted.adopt_committed_isr(p.leader_epoch, tuple(p.isr), p.zk_version)
        await slices.tick(len(topic.partition_states) or 1)
    return UpdateMetadataResponse(error_code=ErrorCode.none)


def error_response(request: UpdateMetadataRequest, error: ErrorCode) -> UpdateMetadataResponse:
    """The response has only a top-level error."""
    return UpdateMetadataResponse(error_code=error)


def _live_broker(live: UpdateMetadataBroker) -> LiveBroker:
    endpoints = {e.listener.upper(): HostPort(e.host, e.port) for e in live.endpoints}
    return LiveBroker(live.id_, endpoints, live.rack)
