"""ElectLeaders (43): forwarded to the controller, answered once the new leaders are known."""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.leader_election import elect_leaders
from odradek.broker.context import RequestContext
from odradek.controller import elect_leaders as el
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.ELECT_LEADERS


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await elect_leaders(ctx.broker.controller, ctx.broker.metadata, request)


def error_response(request: Any, error: ErrorCode) -> Any:
    return el.error_response(request, error)
