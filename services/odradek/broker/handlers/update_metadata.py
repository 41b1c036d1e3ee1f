"""UpdateMetadata (6): the controller's view of live brokers and partition leaders, cached.

A request from an older controller epoch answers STALE_CONTROLLER_EPOCH and changes nothing
(Kafka raises ControllerMovedException, whose code that is). Otherwise
``controller_requests.update_metadata`` replaces the broker list and merges the partition
states; Metadata requests are answered from that cache. Each live broker is kept with its
endpoint on this broker's listener (PLAINTEXT without a configuration), else its first one.
"""

from __future__ import annotations

from odradek.broker import controller_requests
from odradek.broker.context import RequestContext
from odradek.broker.metadata_cache import BrokerEndpoint, PartitionMetadata
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    UpdateMetadataBroker,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

API_KEY = ApiKey.UPDATE_METADATA


async def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    broker = ctx.broker
    if not controller_requests.accept_controller_epoch(
        broker, request.controller_epoch, "UpdateMetadata"
    ):
        return UpdateMetadataResponse(error_code=ErrorCode.stale_controller_epoch)
    listener = controller_requests.listener_name(broker)
    brokers = [
        endpoint
        for endpoint in (_endpoint(b, listener) for b in request.live_brokers)
        if endpoint is not None
    ]
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
    controller_requests.update_metadata(broker.metadata, brokers, topics)
    return UpdateMetadataResponse(error_code=ErrorCode.none)


def _endpoint(live: UpdateMetadataBroker, listener: str) -> BrokerEndpoint | None:
    if not live.endpoints:
        return None
    chosen = next((e for e in live.endpoints if e.listener == listener), live.endpoints[0])
    return BrokerEndpoint(live.id_, chosen.host, chosen.port, live.rack)
