"""AlterUserScramCredentials (51), v0 (KIP-554): upsert and delete users' SCRAM credentials.

Written to ZooKeeper in Kafka's format with a change notification
(``admin.scram_credentials.alter``: Kafka's checks and errors, one result per user). Needs
ALTER on the Cluster (each user's result is CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka).
The salted password is turned into the stored and server keys at once; neither it nor the
password is stored or logged.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin import scram_credentials
from odradek.broker.admin.scram_credentials import Deletion, Upsertion
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()  # 1 MB names 166,000 deletions (or 83,000 upsertions)
    schema = schemas.response_schema(API_KEY, ctx.api_version)
    deletions = [
        Deletion(d.name, int(d.mechanism)) async for d in sliced(request.deletions, slices)
    ]
    upsertions = [
        Upsertion(
            u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
        )
        async for u in sliced(request.upsertions, slices)
    ]
    zk = ctx.broker.zk
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ErrorCode.cluster_authorization_failed, None
    elif zk is None:
        refused = ErrorCode.unknown_server_error, "no ZooKeeper"
    else:
        refused = None
    if refused is None:
        results = await scram_credentials.alter(zk, deletions, upsertions, slices)
    else:
        users = dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions])
        results = [(user, *refused) async for user in sliced(users, slices)]
    result_type = element_type(schema, "results")
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        results=tuple(
            [
                build(result_type, user=user, error_code=error, error_message=message)
                async for user, error, message in sliced(results, slices)
            ]
        ),
    )
