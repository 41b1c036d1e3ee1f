"""DeleteAcls (31, v1-3): delete the bindings each filter matches, and say which.

Needs ALTER on the Cluster (else CLUSTER_AUTHORIZATION_FAILED for every filter) and an
authorizer (else SECURITY_DISABLED). A filter with an UNKNOWN element is INVALID_REQUEST; ANY
and MATCH select as Kafka's ``AclBindingFilter.matches``; a binding that two filters match is
reported under the first (``AclAuthorizer.delete_acls``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers import acls
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.security.acl_authorizer import DeleteResult
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.DELETE_ACLS


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = acls.checked_authorizer(ctx, AclOperation.ALTER)
    if isinstance(authorizer, tuple):
        error, message = authorizer
        return _refused(request, error, message)
    slices = TimeSlices()  # 1 MB holds 90,000 filters
    filters = [acls.binding_filter(item) async for item in sliced(request.filters, slices)]
    return await _answer(request, await authorizer.delete_acls(filters), slices)


def error_response(request: Any, error: ErrorCode) -> Any:
    return _refused(request, error, None)


def _refused(request: Any, error: ErrorCode, message: str | None) -> Any:
    """Every filter answered alike, by one shared result: 1 MB holds 125,000 filters, and the
    writer copies a repeated result as the bytes just written (``protocol.writer``)."""
    response_type = schemas.response_schema(API_KEY, request.__version__)
    result = build(
        element_type(response_type, "filter_results"),
        error_code=error,
        error_message=message,
        matching_acls=(),
    )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        filter_results=(result,) * len(request.filters),
    )


async def _answer(request: Any, results: list[DeleteResult], slices: TimeSlices) -> Any:
    response_type = schemas.response_schema(API_KEY, request.__version__)
    result_type = element_type(response_type, "filter_results")
    matching_type = element_type(result_type, "matching_acls")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        filter_results=tuple(
            [
                build(
                    result_type,
                    error_code=result.error.error_code,
                    error_message=result.error.message,
                    matching_acls=tuple(
                        build(
                            matching_type,
                            error_code=outcome.error_code,
                            error_message=outcome.message,
                            resource_type=int(binding.pattern.resource_type),
                            resource_name=binding.pattern.name,
                            pattern_type=int(binding.pattern.pattern_type),
                            principal=binding.entry.principal,
                            host=binding.entry.host,
                            operation=int(binding.entry.operation),
                            permission_type=int(binding.entry.permission_type),
                        )
                        for binding, outcome in result.deleted
                    ),
                )
                async for result in sliced(results, slices)
            ]
        ),
    )
