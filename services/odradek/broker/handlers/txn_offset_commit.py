"""TxnOffsetCommit (28), v0-3: a transactional producer's offsets of a consumer group
(``send_offsets_to_transaction``), committed only with its transaction.

Decodes the request into ``PartitionCommit``s, runs
``OffsetMetadataManager.commit_transactional_offsets`` on the group's shard, which writes them
in a transactional batch of the producer (pending until its transaction's marker), and answers
once they are replicated to the ISR. v2 adds each partition's leader epoch; v3 the consumer's
group metadata (member id, generation, group instance id), which a group validates (an empty
member id with generation -1 is not checked, as Kafka). An error of the whole request (not the
coordinator, an empty group id, an unknown member, a stale generation, a fenced producer epoch)
is every partition's error, as Kafka answers. v4 only adds TRANSACTION_ABORTABLE for a failed
KIP-890 verification of the transaction, which this broker does not do: not served.

Authorization, as Kafka's ``handleTxnOffsetCommitRequest``: WRITE on the transactional id, then
READ on the group (else every partition answers TRANSACTIONAL_ID_ or GROUP_AUTHORIZATION_FAILED),
then READ on each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED, not committed).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.commit_shape import (
    commits_of,
    error_partitions_response,
    partition_errors_response,
    readable_commits,
)
from odradek.coordinator.result import TxnProducer
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices

API_KEY = ApiKey.TXN_OFFSET_COMMIT


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    commits = await commits_of(request, slices)
    producer = TxnProducer(request.producer_id, request.producer_epoch)
    errors: dict[tuple[str, int], ErrorCode] = {}
    failed = ErrorCode.none
    groups = ctx.broker.groups
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return await partition_errors_response(
            API_KEY, ctx.api_version, request, {}, ErrorCode.transactional_id_authorization_failed
        )
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return await partition_errors_response(
            API_KEY, ctx.api_version, request, {}, ErrorCode.group_authorization_failed
        )
    commits, refused = readable_commits(ctx, commits)
    try:
        if not commits and refused:
            pass  # nothing the principal may commit: only the refusals to answer
        elif groups is None:
            failed = ErrorCode.coordinator_not_available
        elif not request.group_id:
            failed = ErrorCode.invalid_group_id
        elif request.producer_id < 0 or request.producer_epoch < 0:
            failed = ErrorCode.invalid_producer_id_mapping
        else:
            errors = await groups.write(
                request.group_id,
                lambda shard: shard.offsets.commit_transactional_offsets(
                    request.group_id,
                    getattr(request, "member_id", ""),
                    getattr(request, "group_instance_id", None),
                    getattr(request, "generation_id", -1),
                    producer,
                    commits,
                ),
            )
    except OdradekError as e:
        failed = e.error_code
    return await partition_errors_response(
        API_KEY, ctx.api_version, request, errors, failed, refused, slices
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return error_partitions_response(API_KEY, request.__version__, request, error)
