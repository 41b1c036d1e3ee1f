"""Schemas of the controller-to-broker APIs Kafka 4 dropped: LeaderAndIsr, StopReplica,
UpdateMetadata and ControlledShutdown, in kio's style, registered with ``schemas`` at import.

kio 0.6.5 follows Kafka 4.x, which removed ZooKeeper mode and with it API keys 4 to 7. These
dataclasses are written by hand from Kafka 3.x's JSON message definitions
(``clients/src/main/resources/common/message/<Name>{Request,Response}.json``) with kio's
conventions, so ``reader``, ``writer`` and ``codec`` treat them like kio's own: one frozen
dataclass per message and version, ``kafka_type`` (and ``tag``) in each field's metadata, the
class attributes ``__type__``, ``__version__``, ``__flexible__``, ``__api_key__`` and
``__header_schema__`` (set by the ``_schema`` decorator, where kio's generated classes spell
them out), nested structs named after Kafka's, a JSON default as the field default (and ``()``
for arrays of primitives, as kio does).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

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


_T = TypeVar("_T")


def _schema(
    entity_type: EntityType,
    api_key: int,
    version: int,
    header: type[RequestHeader] | type[ResponseHeader],
) -> Callable[[type[_T]], type[_T]]:
    """Gives a schema class kio's class attributes: ``__type__`` (request, response or nested),
    ``__version__``, ``__flexible__`` (all four APIs are), ``__api_key__`` and
    ``__header_schema__`` (a nested struct carries its message's)."""

    def apply(cls: type[_T]) -> type[_T]:
        cls.__type__ = entity_type  # type: ignore[attr-defined]
        cls.__version__ = i16(version)  # type: ignore[attr-defined]
        cls.__flexible__ = True  # type: ignore[attr-defined]
        cls.__api_key__ = i16(api_key)  # type: ignore[attr-defined]
        cls.__header_schema__ = header  # type: ignore[attr-defined]
        return cls

    return apply


# -- LeaderAndIsr (4) v7 -----------------------------------------------------------------------


@_schema(EntityType.nested, 4, LEADER_AND_ISR_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
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


@_schema(EntityType.nested, 4, LEADER_AND_ISR_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicState:
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@_schema(EntityType.nested, 4, LEADER_AND_ISR_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrLiveLeader:
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    host_name: str = field(metadata={"kafka_type": "string"})
    port: i32 = field(metadata={"kafka_type": "int32"})


@_schema(EntityType.request, 4, LEADER_AND_ISR_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    is_k_raft_controller: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """KIP-866 (ZooKeeper to KRaft migration); always False here."""
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    type_: i8 = field(metadata={"kafka_type": "int8"})
    """0 unknown, 1 incremental, 2 full (every topic); Kafka's ZooKeeper controller sends 0."""
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@_schema(EntityType.nested, 4, LEADER_AND_ISR_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionError:
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@_schema(EntityType.nested, 4, LEADER_AND_ISR_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicError:
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@_schema(EntityType.response, 4, LEADER_AND_ISR_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrResponse:
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    topics: tuple[LeaderAndIsrTopicError, ...]


# -- StopReplica (5) v4 ------------------------------------------------------------------------


@_schema(EntityType.nested, 5, STOP_REPLICA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionState:
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """-1 skips the leader epoch check; -2 (topic deletion) always passes it, as in Kafka."""
    delete_partition: bool = field(metadata={"kafka_type": "bool"})


@_schema(EntityType.nested, 5, STOP_REPLICA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicState:
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_states: tuple[StopReplicaPartitionState, ...]


@_schema(EntityType.request, 5, STOP_REPLICA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    is_k_raft_controller: bool = field(metadata={"kafka_type": "bool"}, default=False)
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[StopReplicaTopicState, ...]


@_schema(EntityType.nested, 5, STOP_REPLICA_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionError:
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@_schema(EntityType.response, 5, STOP_REPLICA_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponse:
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[StopReplicaPartitionError, ...]


# -- UpdateMetadata (6) v8 ---------------------------------------------------------------------


@_schema(EntityType.nested, 6, UPDATE_METADATA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: BrokerId = field(metadata={"kafka_type": "int32"})
    """The leader's broker id; -1 none, -2 the topic is being deleted (LeaderDuringDelete)."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    offline_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())


@_schema(EntityType.nested, 6, UPDATE_METADATA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataTopicState:
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@_schema(EntityType.nested, 6, UPDATE_METADATA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpoint:
    port: i32 = field(metadata={"kafka_type": "int32"})
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    """The listener name, e.g. PLAINTEXT."""
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})
    """Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL."""


@_schema(EntityType.nested, 6, UPDATE_METADATA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBroker:
    id_: BrokerId = field(metadata={"kafka_type": "int32"})
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field(metadata={"kafka_type": "string"})


@_schema(EntityType.request, 6, UPDATE_METADATA_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    is_k_raft_controller: bool = field(metadata={"kafka_type": "bool"}, default=False)
    type_: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
    """Tagged: 0 unknown, 1 incremental, 2 full snapshot (KIP-866 migration)."""
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@_schema(EntityType.response, 6, UPDATE_METADATA_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponse:
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


# -- ControlledShutdown (7) v3: broker to controller ------------------------------------------


@_schema(EntityType.request, 7, CONTROLLED_SHUTDOWN_VERSION, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequest:
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@_schema(EntityType.nested, 7, CONTROLLED_SHUTDOWN_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartition:
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@_schema(EntityType.response, 7, CONTROLLED_SHUTDOWN_VERSION, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponse:
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
