"""KIP-848 consumer groups' records of ``__consumer_offsets`` (record types 3 to 8).

Kafka's ``ConsumerGroup*Key``/``*Value`` (``group-coordinator/src/main/resources/common/message``):
keys are not flexible, values are (version 0). What each record says about a group:

| type | key | value | tombstone |
|---:|---|---|---|
| 3 | group | the group epoch | the group is gone (written last of a group's tombstones) |
| 4 | group | the subscribed topics' metadata (id, name, partitions) the epoch was computed on | |
| 5 | group, member | the member's subscription and client (instance, rack, client) | it left |
| 6 | group | the epoch of the target assignment | |
| 7 | group, member | the member's target assignment (topic id, partitions) | |
| 8 | group, member | its current assignment: epochs, state, assigned and pending revocation | |

Tagged fields Kafka added later (metadata hash, assignment epochs per partition, a classic
member's protocols) are not written; the reader skips unknown tags, as Kafka does.
Registered with ``base.register`` at import (``groups.records`` imports this module).
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from odradek.groups.records.base import register

__all__ = [
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "TopicMetadata",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "TopicPartitions",
    "CONSUMER_RECORD_KEYS",
]


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[int, ...] = field(metadata={"kafka_type": "int32"}, default=())


# -- 3: the group epoch ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    __record_type__: ClassVar[int] = 3
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = True
    epoch: int = field(metadata={"kafka_type": "int32"})


# -- 4: the subscribed topics' metadata --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    num_partitions: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    __record_type__: ClassVar[int] = 4
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = True
    topics: tuple[TopicMetadata, ...] = ()


# -- 5: a member's subscription ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    __record_type__: ClassVar[int] = 5
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"})
    rebalance_timeout_ms: int = field(metadata={"kafka_type": "int32"})
    server_assignor: str | None = field(metadata={"kafka_type": "string"})


# -- 6: the target assignment's epoch ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    __record_type__: ClassVar[int] = 6
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = True
    assignment_epoch: int = field(metadata={"kafka_type": "int32"})


# -- 7: a member's target assignment -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    __record_type__: ClassVar[int] = 7
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = True
    topic_partitions: tuple[TopicPartitions, ...] = ()


# -- 8: a member's current assignment ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    __record_type__: ClassVar[int] = 8
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = True
    member_epoch: int = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: int = field(metadata={"kafka_type": "int32"})
    state: int = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


CONSUMER_RECORD_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)

register(ConsumerGroupMetadataKey, ConsumerGroupMetadataValue)
register(ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue)
register(ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue)
register(ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue)
register(ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue)
register(ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue)
