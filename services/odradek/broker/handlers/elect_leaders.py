"""ElectLeaders (43): forwarded to the controller, answered once the new leaders are known.

Needs ALTER on the cluster (Kafka's ``handleElectLeaders``), asked on this broker before
forwarding: else every partition, and the request, answer CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.leader_election import elect_leaders
from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.cluster import elect_leaders as el
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation

API_KEY = ApiKey.ELECT_LEADERS


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return await el.error_response_in_slices(request, ErrorCode.cluster_authorization_failed)
    return await elect_leaders(ctx.broker.controller, ctx.broker.metadata, request)


def error_response(request: Any, error: ErrorCode) -> Any:
    return el.error_response(request, error)
