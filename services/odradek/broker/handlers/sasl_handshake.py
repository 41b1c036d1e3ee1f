"""SaslHandshake (17), v0-1: once a connection has authenticated, or on a listener without SASL.

A SASL listener's connections hand their handshake to ``broker.sasl_authenticator`` before they
have authenticated, and once authenticated when it begins a re-authentication (KIP-368: the
session expires, and none began within the last second); whatever reaches this handler is
answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import build
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.SASL_HANDSHAKE


async def handle(ctx: RequestContext, request: Any) -> Any:
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        error_code=ErrorCode.illegal_sasl_state,
        mechanisms=(),
    )
