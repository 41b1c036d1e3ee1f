"""InitProducerId (22): a new producer id (epoch 0) for an idempotent producer.

Ids come from blocks reserved in ZooKeeper, so they are unique across brokers and restarts.
Transactional producers get COORDINATOR_NOT_AVAILABLE until there is a transaction coordinator.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.producer_ids import init_producer_id
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.INIT_PRODUCER_ID


async def handle(ctx: RequestContext, request: Any) -> Any:
    result = await init_producer_id(ctx.broker.producer_ids, request.transactional_id)
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
