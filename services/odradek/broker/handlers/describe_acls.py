"""DescribeAcls (29, v1-3): the bindings a filter matches, grouped by resource pattern.

Needs DESCRIBE on the Cluster (else CLUSTER_AUTHORIZATION_FAILED) and an authorizer (else
SECURITY_DISABLED); a filter with an UNKNOWN element is INVALID_REQUEST. Answered from this
broker's ACL cache, as Kafka does (a change made through another broker shows once its
notification has arrived).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers import acls
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AccessControlEntry, AclOperation, ResourcePattern

API_KEY = ApiKey.DESCRIBE_ACLS


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = acls.checked_authorizer(ctx, AclOperation.DESCRIBE)
    if isinstance(authorizer, tuple):
        error, message = authorizer
        return _answer(request, error, message)
    binding_filter = acls.binding_filter(request)
    reason = binding_filter.unknown_reason()
    if reason is not None:
        return _answer(request, ErrorCode.invalid_request, reason)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.acls(binding_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return _answer(request, ErrorCode.none, None, grouped)


def error_response(request: Any, error: ErrorCode) -> Any:
    return _answer(request, error, None)


def _answer(
    request: Any,
    error: ErrorCode,
    message: str | None,
    grouped: dict[ResourcePattern, list[AccessControlEntry]] | None = None,
) -> Any:
    response_type = schemas.response_schema(API_KEY, request.__version__)
    resource_type = element_type(response_type, "resources")
    description_type = element_type(resource_type, "acls")
    resources = tuple(
        build(
            resource_type,
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=tuple(
                build(
                    description_type,
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission_type),
                )
                for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))
            ),
        )
        for pattern, entries in sorted(
            (grouped or {}).items(),
            key=lambda item: (item[0].resource_type, item[0].pattern_type, item[0].name),
        )
    )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        resources=resources,
    )
