"""What ConsumerGroupHeartbeat and ConsumerGroupDescribe carry, as the consumer-group manager
sees them (the handlers translate the wire's kio classes to and from these), and Kafka's checks
of a heartbeat's fields, made before anything is looked up (``validate_heartbeat``).

Member epochs with a meaning of their own: 0 joins (or rejoins), -1 leaves, -2 leaves as a
static member that will be back (KIP-345 under KIP-848).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.errors import ErrorCode
from odradek.groups.consumer.assignment import Assignment
from odradek.groups.consumer.member import ConsumerGroupMember
from odradek.groups.consumer.regex import RegexError, compile_subscription
from odradek.groups.errors import GroupError

__all__ = [
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "HeartbeatRequest",
    "HeartbeatAnswer",
    "DescribedMember",
    "DescribedConsumerGroup",
    "new_member_id",
    "validate_heartbeat",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields (None: not changed since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # topic_partitions
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member: ConsumerGroupMember
    target: Assignment


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]
    topic_names: Mapping[uuid.UUID, str]


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def validate_heartbeat(
    request: HeartbeatRequest, assignors: Sequence[str], subscription_max_bytes: int
) -> None:
    """Kafka's checks of a heartbeat's fields: INVALID_REQUEST & co. before anything is done;
    and the subscription's size (topic names and regex), at most
    ``odradek.group.member.metadata.max.bytes``, checked before the regex is compiled."""

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.invalid_request, message)

    subscription_bytes = sum(len(name) for name in request.subscribed_topic_names or ())
    subscription_bytes += len(request.subscribed_topic_regex or "")
    if subscription_bytes > subscription_max_bytes:
        raise invalid(
            f"the subscription's {subscription_bytes} bytes exceed "
            f"odradek.group.member.metadata.max.bytes ({subscription_max_bytes})"
        )

    if not request.group_id:
        raise invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id:
        raise invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id:
        raise invalid("RackId can't be empty.")
    if not request.member_id and (request.api_version >= 1 or request.member_epoch != 0):
        raise invalid("MemberId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch {request.member_epoch} is invalid.")
    if request.rebalance_timeout_ms < -1:
        raise invalid("RebalanceTimeoutMs is invalid.")
    assignor = request.server_assignor
    if assignor is not None and assignor not in assignors:
        raise GroupError(
            ErrorCode.unsupported_assignor,
            f"assignor {assignor!r} is not one of {list(assignors)}",
        )
    if request.subscribed_topic_regex is not None:
        try:
            compile_subscription(request.subscribed_topic_regex)
        except RegexError as e:
            raise GroupError(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex {request.subscribed_topic_regex!r}: {e}",
            ) from None
