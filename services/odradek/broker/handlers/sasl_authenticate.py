"""SaslAuthenticate (36), v0-2: once a connection has authenticated, or without SASL.

Before authentication (and during a re-authentication, KIP-368, which a SaslHandshake begins)
a SASL listener's connection hands it to ``broker.sasl_authenticator``; whatever reaches this
handler is answered ILLEGAL_SASL_STATE with Kafka's words.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.SASL_AUTHENTICATE


async def handle(ctx: RequestContext, request: Any) -> Any:
    sasl = ctx.listener.security_protocol.name.startswith("SASL_")
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication"
        if sasl
        else f"SaslAuthenticate on listener {ctx.listener.name}, which does not use SASL",
        auth_bytes=b"",
        session_lifetime=NO_THROTTLE,  # an error: no session lifetime
    )
