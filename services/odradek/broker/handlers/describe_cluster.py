"""DescribeCluster (60), v0-1: the cluster id, the brokers and the controller, as Metadata has them.

The brokers are listed with their address on the listener the request came in on, and the node
named controller is the lowest broker listed, both as in ``metadata`` (the controller is its own
process here; admin clients send controller-bound requests to the node named, and any broker
serves them). A broker serves the BROKER endpoint type (1); v1 asking for another is answered as
Kafka's ``computeDescribeClusterResponse``: UNSUPPORTED_ENDPOINT_TYPE for an unknown type,
MISMATCHED_ENDPOINT_TYPE for CONTROLLER (2).

Anyone may describe the cluster, as in Kafka. With ``include_cluster_authorized_operations`` the
answer carries the cluster's authorized-operations bitfield if the principal may DESCRIBE the
cluster, else 0; -2147483648 when not asked.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import (
    OPERATIONS_NOT_ASKED,
    authorize_cluster,
    authorized_operations,
)
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_CLUSTER
BROKER_ENDPOINT = 1  # Kafka's EndpointType.BROKER
CONTROLLER_ENDPOINT = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    wanted = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    if wanted != BROKER_ENDPOINT:
        unknown = wanted != CONTROLLER_ENDPOINT
        if ctx.api_version == 0:
            error = ErrorCode.invalid_request
        elif unknown:
            error = ErrorCode.unsupported_endpoint_type
        else:
            error = ErrorCode.mismatched_endpoint_type
        message = (
            f"Unsupported endpoint type {wanted}"
            if unknown
            else "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            "of type CONTROLLER"
        )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            cluster_id="",
            brokers=(),
        )
    operations = OPERATIONS_NOT_ASKED
    if request.include_cluster_authorized_operations:
        operations = 0
        if authorize_cluster(ctx, AclOperation.DESCRIBE):
            operations = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
    cache = ctx.broker.metadata
    listed = cache.brokers_on(ctx.listener.name)
    broker_type = element_type(response_type, "brokers")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=cache.cluster_id or "",
        controller_id=min((b.broker_id for b, _ in listed), default=-1),
        brokers=tuple(
            build(
                broker_type,
                broker_id=b.broker_id,
                host=address.host,
                port=address.port,
                rack=b.rack,
            )
            for b, address in listed
        ),
        cluster_authorized_operations=operations,
    )
