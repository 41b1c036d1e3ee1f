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

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = schemas.response_schema(API_KEY, ctx.api_version)
    deletions = [Deletion(d.name, int(d.mechanism)) for d in request.deletions]
    upsertions = [
        Upsertion(
            u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
        )
        for u in request.upsertions
    ]
    users = list(dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions]))
    zk = ctx.broker.zk
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        results = [(user, ErrorCode.cluster_authorization_failed, None) for user in users]
    elif zk is None:
        results = [(user, ErrorCode.unknown_server_error, "no ZooKeeper") for user in users]
    else:
        results = await scram_credentials.alter(zk, deletions, upsertions)
    result_type = element_type(schema, "results")
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(result_type, user=user, error_code=error, error_message=message)
            for user, error, message in results
        ),
    )
