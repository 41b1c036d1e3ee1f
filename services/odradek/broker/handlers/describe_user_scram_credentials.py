"""DescribeUserScramCredentials (50), v0 (KIP-554): users' SCRAM mechanisms and iterations.

No users named (null or empty): every user with a credential. Named ones: RESOURCE_NOT_FOUND for
a user without one, DUPLICATE_RESOURCE for one named twice (``admin.scram_credentials``).
Needs DESCRIBE on the Cluster (CLUSTER_AUTHORIZATION_FAILED at the top otherwise, as Kafka).
Thin: ``scram_credentials.describe``. Never returns salts or keys.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin import scram_credentials
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = schemas.response_schema(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return _refused(schema, ErrorCode.cluster_authorization_failed, None)
    zk = ctx.broker.zk
    if zk is None:
        return _refused(schema, ErrorCode.unknown_server_error, "no ZooKeeper")
    slices = TimeSlices()  # 1 MB names 500,000 users
    users = None
    if request.users is not None:
        users = [u.name async for u in sliced(request.users, slices)]
    found = await scram_credentials.describe(zk, users, slices)
    result_type = element_type(schema, "results")
    info_type = element_type(result_type, "credential_infos")
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(
            [
                build(
                    result_type,
                    user=r.user,
                    error_code=r.error,
                    error_message=r.message,
                    credential_infos=tuple(
                        build(info_type, mechanism=mechanism, iterations=iterations)
                        for mechanism, iterations in r.credentials
                    ),
                )
                async for r in sliced(found, slices)
            ]
        ),
    )


def _refused(schema: type[Any], error: ErrorCode, message: str | None) -> Any:
    return build(
        schema, throttle_time=NO_THROTTLE, error_code=error, error_message=message, results=()
    )
