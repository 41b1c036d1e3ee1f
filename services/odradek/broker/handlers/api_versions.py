"""ApiVersions (18): the versions this listener serves (the KIP-511 fallback is the server's).

Only what the request's listener serves is advertised (``handlers.served_versions``): clients
turn features on from this list (kafka-python 3.x uses the idempotent producer if
InitProducerId is there), so it must not promise more, and a client listener does not list the
controller's APIs. Nor the KIP-848 APIs while ``group.coordinator.rebalance.protocols`` leaves
out ``consumer``: their handlers refuse them then (UNSUPPORTED_VERSION).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey, build_api_versions_response, client_software_is_valid

API_KEY = ApiKey.API_VERSIONS
CONSUMER_PROTOCOL_APIS = frozenset(
    {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
)


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not client_software_is_valid(request):
        return build_api_versions_response(ctx.api_version, ErrorCode.invalid_request)
    versions = ctx.served_versions
    groups = ctx.broker.groups
    if groups is not None and not groups.config.consumer_protocol_enabled:
        versions = {k: v for k, v in versions.items() if k not in CONSUMER_PROTOCOL_APIS}
    return build_api_versions_response(ctx.api_version, versions=versions)
