"""DeleteTopics (20): mark each topic for deletion in ZooKeeper; the controller deletes it.

v6 may name a topic by its id. With ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED, or INVALID_REQUEST before v3 (older clients do not know that code).

Authorization, as Kafka's ``handleDeleteTopicsRequest`` (after the deletion-disabled answer,
which tells nothing): each topic needs DELETE, else TOPIC_AUTHORIZATION_FAILED; one named by an
id the principal may not DESCRIBE answers that with a null name (the id is no secret, the name
is); an unknown id is UNKNOWN_TOPIC_ID as before.

Each topic's partitions count against the client's ``controller_mutation_rate`` quota
(``broker.mutation_quota``; ``handlers.create_topics`` says why here): strict from v5, permissive
before; the answer's ``throttle_time_ms`` is the quota's.

Bounded work, as Kafka's ``ControllerApis.deleteTopics`` (KRaft; the ZooKeeper-mode handler did
not check): a topic named more than once is not deleted and is answered once, INVALID_REQUEST
("Duplicate topic name.", or "Duplicate topic id."); the rest is authorized and answered in time
slices (``time_slices``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from odradek.broker.admin.topics import DeleteTopicResult, TopicAdmin, TopicRef
from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import answer_each, sliced

API_KEY = ApiKey.DELETE_TOPICS
FIRST_VERSION_WITH_DELETION_DISABLED = 3
STRICT_QUOTA_SINCE_VERSION = 5  # KIP-599
DUPLICATE_TOPIC = "Duplicate topic name."  # Kafka's messages (ControllerApis)
DUPLICATE_TOPIC_ID = "Duplicate topic id."


async def handle(ctx: RequestContext, request: Any) -> Any:
    if hasattr(request, "topics"):  # v6+
        entries = (
            (t.name, t.topic_id if t.topic_id is not None and t.topic_id.int else None)
            for t in request.topics
        )
    else:
        entries = ((name, None) for name in request.topic_names)
    # Each topic once, its repeats counted (Kafka's ControllerApis.deleteTopics).
    counts: dict[TopicRef, int] = {}
    async for entry in sliced(entries):
        ref = TopicRef(*entry)
        counts[ref] = counts.get(ref, 0) + 1
    refs = list(counts)
    admin = TopicAdmin(ctx.broker.zk, ctx.broker.config)
    refused = {
        i: DeleteTopicResult(
            ref.name,
            ref.topic_id,
            ErrorCode.invalid_request,
            DUPLICATE_TOPIC if ref.name is not None else DUPLICATE_TOPIC_ID,
        )
        for i, ref in enumerate(refs)
        if counts[ref] > 1
    }
    if admin.defaults.delete_topic_enable:
        refused.update(await _refusals(ctx, refs, refused))
    quota = ctx.mutation_quota(STRICT_QUOTA_SINCE_VERSION)
    deleted = iter(
        await admin.delete_topics(
            [r async for i, r in sliced(enumerate(refs)) if i not in refused], quota
        )
    )
    results = [
        refused[i] if i in refused else next(deleted) async for i in sliced(range(len(refs)))
    ]

    old_client = ctx.api_version < FIRST_VERSION_WITH_DELETION_DISABLED
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "responses")

    async def answer(r: DeleteTopicResult) -> Any:
        return build(
            result_type,
            name=r.name,
            topic_id=r.topic_id,
            error_code=ErrorCode.invalid_request
            if old_client and r.error == ErrorCode.topic_deletion_disabled
            else r.error,
            error_message=r.message,
        )

    return build(
        response_type,
        throttle_time=timedelta(milliseconds=quota.throttle_ms()),
        responses=tuple(await answer_each(results, answer)),
    )


async def _refusals(
    ctx: RequestContext, refs: list[TopicRef], skipped: dict[int, DeleteTopicResult]
) -> dict[int, DeleteTopicResult]:
    """The entries (by position, other than ``skipped``) the principal may not delete, with
    their answers."""
    cache = ctx.broker.metadata
    names: list[str | None] = []
    async for i, ref in sliced(enumerate(refs)):
        if i in skipped:
            names.append(None)
            continue
        if ref.topic_id is not None and ref.name is None:
            topic = cache.topic_by_id(ref.topic_id)
            names.append(None if topic is None else topic.name)  # unknown: TopicAdmin answers
        else:
            names.append(ref.name)
    known = [n for n in names if n is not None]
    describable = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, known)
    deletable = filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, known)
    refused = {}
    async for i, (ref, name) in sliced(enumerate(zip(refs, names, strict=True))):
        if name is None:
            continue
        by_id = ref.topic_id is not None and ref.name is None
        if by_id and name not in describable:
            refused[i] = DeleteTopicResult(None, ref.topic_id, ErrorCode.topic_authorization_failed)
        elif name not in deletable:
            refused[i] = DeleteTopicResult(name, ref.topic_id, ErrorCode.topic_authorization_failed)
    return refused
