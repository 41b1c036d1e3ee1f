"""CreateAcls (30, v1-3): store ACL bindings through the broker's ACL authorizer.

Needs ALTER on the Cluster (else CLUSTER_AUTHORIZATION_FAILED for every binding), and an
authorizer (else SECURITY_DISABLED). Each binding gets its own result: INVALID_REQUEST for one
Kafka refuses (UNKNOWN or ANY elements, a MATCH pattern, a principal that is not
``type:name``, an empty name, a Cluster not named ``kafka-cluster``), as
``AclBinding.invalid_reason`` says. kio has no v0 (LITERAL only, before KIP-290).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers import acls
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.CREATE_ACLS


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = acls.checked_authorizer(ctx, AclOperation.ALTER)
    if isinstance(authorizer, tuple):
        error, message = authorizer
        return _refused(request, error, message)
    slices = TimeSlices()  # 1 MB holds 100,000 creations
    bindings = [_binding(creation) async for creation in sliced(request.creations, slices)]
    results = await authorizer.create_acls(bindings)
    response_type = schemas.response_schema(API_KEY, request.__version__)
    result_type = element_type(response_type, "results")
    shared: dict[tuple[ErrorCode, str | None], Any] = {}  # alike results: one object, written once
    answered = []
    async for r in sliced(results, slices):
        key = (r.error_code, r.message)
        if key not in shared:
            shared[key] = build(result_type, error_code=r.error_code, error_message=r.message)
        answered.append(shared[key])
    return build(response_type, throttle_time=NO_THROTTLE, results=tuple(answered))


def error_response(request: Any, error: ErrorCode) -> Any:
    return _refused(request, error, None)


def _refused(request: Any, error: ErrorCode, message: str | None) -> Any:
    """Every creation answered alike, by one shared result: 1 MB holds 125,000 creations, and
    the writer copies a repeated result as the bytes just written (``protocol.writer``)."""
    response_type = schemas.response_schema(API_KEY, request.__version__)
    result = build(element_type(response_type, "results"), error_code=error, error_message=message)
    return build(
        response_type, throttle_time=NO_THROTTLE, results=(result,) * len(request.creations)
    )


def _binding(creation: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            acls.code(ResourceType, creation.resource_type),
            creation.resource_name,
            acls.code(PatternType, creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            acls.code(AclOperation, creation.operation),
            acls.code(AclPermissionType, creation.permission_type),
        ),
    )
