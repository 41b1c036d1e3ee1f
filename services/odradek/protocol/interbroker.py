"""Schemas of the controller-to-broker APIs Kafka 4 dropped: LeaderAndIsr, StopReplica,
UpdateMetadata and ControlledShutdown, in kio's style, registered with ``schemas`` at import.

kio 0.6.5 follows Kafka 4.x, which removed ZooKeeper mode and with it API keys 4 to 7. These
dataclasses are written by hand from Kafka 3.x's JSON message definitions
(``clients/src/main/resources/common/message/<Name>{Request,Response}.json``) with kio's
conventions, so ``reader``, ``writer`` and ``codec`` treat them like kio's own: one frozen
dataclass per message and version, ``kafka_type`` (and ``tag``) in each field's metadata, the
class attributes ``__type__``, ``__version__``, ``__flexible__``, ``__api_key__`` and
``__header_schema__``, nested structs named after Kafka's, a JSON default as the field default
(and ``()`` for arrays of primitives, as kio does).

One version of each, the highest Kafka 3.9 has (what a 3.9 broker advertises); all four are
flexible, so requests use header v2 and responses header v1:

| key | API | version | notes |
|---:|---|---:|---|
| 4 | LeaderAndIsr | 7 | topic ids and ``type_`` (v5), leader recovery state (v6), KRaft flag (v7) |
| 5 | StopReplica | 4 | per-partition leader epoch and delete flag (v3), KRaft flag (v4) |
| 6 | UpdateMetadata | 8 | topic ids (v7), KRaft flag and the tagged ``type_`` (v8) |
| 7 | ControlledShutdown | 3 | broker to controller |

The LeaderAndIsr response names topics by id (v5+), so a controller that sends a topic without
an id (None, all zeros on the wire) gets its partition errors under None too.

Importing ``odradek.protocol.apis`` (and so ``codec``) imports this module, so the broker's decoder
and the controller's encoder both know the schemas. Pure data; safe from any thread.

No ``from __future__ import annotations`` here, as in kio's modules: kio's writer (which the tests
compare ours with) needs the field types as objects, not strings.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from odradek.protocol import schemas

__all__ = [
    "LEADER_AND_ISR_VERSION",
    "STOP_REPLICA_VERSION",
    "UPDATE_METADATA_VERSION",
    "CONTROLLED_SHUTDOWN_VERSION",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrTopicState",
    "LeaderAndIsrLiveLeader",
    "LeaderAndIsrRequest",
    "LeaderAndIsrPartitionError",
    "LeaderAndIsrTopicError",
    "LeaderAndIsrResponse",
    "StopReplicaPartitionState",
    "StopReplicaTopicState",
    "StopReplicaRequest",
    "StopReplicaPartitionError",
    "StopReplicaResponse",
    "UpdateMetadataPartitionState",
    "UpdateMetadataTopicState",
    "UpdateMetadataEndpoint",
    "UpdateMetadataBroker",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "ControlledShutdownRequest",
    "RemainingPartition",
    "ControlledShutdownResponse",
    "PAIRS",
    "register_all",
]

LEADER_AND_ISR_VERSION = 7
STOP_REPLICA_VERSION = 4
UPDATE_METADATA_VERSION = 8
CONTROLLED_SHUTDOWN_VERSION = 3


# -- LeaderAndIsr (4) v7 -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the controller that made this leadership decision."""
    leader: BrokerId = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    partition_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The partition state's epoch: the ZooKeeper version of its state znode (was ZkVersion)."""
    replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    adding_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    removing_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    is_new: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """Whether the replica is new (its log may be created anywhere) or should exist already."""
    leader_recovery_state: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """1 while recovering from an unclean leader election; 0 otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrLiveLeader:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    host_name: str = field(metadata={"kafka_type": "string"})
    port: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    is_k_raft_controller: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """KIP-866 (ZooKeeper to KRaft migration); always False here."""
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    type_: i8 = field(metadata={"kafka_type": "int8"})
    """0 unknown, 1 incremental, 2 full (every topic); Kafka's ZooKeeper controller sends 0."""
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    topics: tuple[LeaderAndIsrTopicError, ...]


# -- StopReplica (5) v4 ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """-1 skips the leader epoch check; -2 (topic deletion) always passes it, as in Kafka."""
    delete_partition: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_states: tuple[StopReplicaPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    is_k_raft_controller: bool = field(metadata={"kafka_type": "bool"}, default=False)
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[StopReplicaTopicState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[StopReplicaPartitionError, ...]


# -- UpdateMetadata (6) v8 ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: BrokerId = field(metadata={"kafka_type": "int32"})
    """The leader's broker id; -1 none, -2 the topic is being deleted (LeaderDuringDelete)."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    offline_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    port: i32 = field(metadata={"kafka_type": "int32"})
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    """The listener name, e.g. PLAINTEXT."""
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})
    """Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBroker:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    id_: BrokerId = field(metadata={"kafka_type": "int32"})
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    is_k_raft_controller: bool = field(metadata={"kafka_type": "bool"}, default=False)
    type_: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
    """Tagged: 0 unknown, 1 incremental, 2 full snapshot (KIP-866 migration)."""
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


# -- ControlledShutdown (7) v3: broker to controller ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartition, ...]
    """The partitions the broker still leads; empty once it can stop."""


PAIRS: tuple[tuple[type, type], ...] = (
    (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (StopReplicaRequest, StopReplicaResponse),
    (UpdateMetadataRequest, UpdateMetadataResponse),
    (ControlledShutdownRequest, ControlledShutdownResponse),
)


def register_all() -> None:
    """Register every pair with ``schemas`` (done at import; calling again is harmless)."""
    for request_type, response_type in PAIRS:
        schemas.register(request_type, response_type)


register_all()
