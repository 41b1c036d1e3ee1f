"""The records of ``__transaction_state``: Kafka's ``TransactionLogKey`` / ``TransactionLogValue``
(``transaction-coordinator/src/main/resources/common/message``), framed as every coordinator
record (``odradek.coordinator.records``: int16 key version, key; int16 value version, value).

One record per transactional id (compaction keeps the last): the key is the transactional id
(key version 0, not flexible); the value is the whole ``TransactionMetadata`` as of the write:

| field | v0 | v1 |
|---|---|---|
| ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32 | yes | yes |
| TransactionStatus int8 (``metadata.TransactionState`` id) | yes | yes |
| TransactionPartitions ``[]{Topic, []PartitionIds}``, nullable (null when Empty) | yes | yes |
| TransactionLastUpdateTimestampMs, TransactionStartTimestampMs int64 | yes | yes |
| PreviousProducerId (tag 0), NextProducerId (tag 1), ClientTransactionVersion (tag 2) | | tagged |

Version 0 is not flexible; version 1 is (compact strings and arrays, tagged fields). Kafka
writes version 1 only for transactions of transaction version 2 (KIP-890) and version 0 for the
others; so does ``value_of``. A tombstone (value None) is a transactional id that expired
(state Dead). Pure data; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from odradek.common.topics import TRANSACTION_STATE_TOPIC
from odradek.coordinator.records import CoordinatorRecord, RecordFormat

__all__ = [
    "FORMAT",
    "TransactionLogKey",
    "TransactionLogValueV0",
    "TransactionLogValue",
    "PartitionsSchemaV0",
    "PartitionsSchema",
    "decode",
]

FORMAT = RecordFormat(TRANSACTION_STATE_TOPIC)


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    __record_type__: ClassVar[int] = 0  # key version 0
    __flexible__: ClassVar[bool] = False
    transactional_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class PartitionsSchemaV0:
    __flexible__: ClassVar[bool] = False
    topic: str = field(metadata={"kafka_type": "string"})
    partition_ids: tuple[int, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True)
class PartitionsSchema:
    __flexible__: ClassVar[bool] = True
    topic: str = field(metadata={"kafka_type": "string"})
    partition_ids: tuple[int, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValueV0:
    """Value version 0 (not flexible): what Kafka writes for transaction versions 0 and 1."""

    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = False
    producer_id: int = field(metadata={"kafka_type": "int64"})
    producer_epoch: int = field(metadata={"kafka_type": "int16"})
    transaction_timeout_ms: int = field(metadata={"kafka_type": "int32"})
    transaction_status: int = field(metadata={"kafka_type": "int8"})
    transaction_partitions: tuple[PartitionsSchemaV0, ...] | None = None
    transaction_last_update_timestamp_ms: int = field(metadata={"kafka_type": "int64"})
    transaction_start_timestamp_ms: int = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValue:
    """Value version 1 (flexible): transaction version 2, with its tagged producer ids."""

    __version__: ClassVar[int] = 1
    __flexible__: ClassVar[bool] = True
    producer_id: int = field(metadata={"kafka_type": "int64"})
    previous_producer_id: int = field(metadata={"kafka_type": "int64", "tag": 0}, default=-1)
    next_producer_id: int = field(metadata={"kafka_type": "int64", "tag": 1}, default=-1)
    producer_epoch: int = field(metadata={"kafka_type": "int16"})
    transaction_timeout_ms: int = field(metadata={"kafka_type": "int32"})
    transaction_status: int = field(metadata={"kafka_type": "int8"})
    transaction_partitions: tuple[PartitionsSchema, ...] | None = None
    transaction_last_update_timestamp_ms: int = field(metadata={"kafka_type": "int64"})
    transaction_start_timestamp_ms: int = field(metadata={"kafka_type": "int64"})
    client_transaction_version: int = field(metadata={"kafka_type": "int16", "tag": 2}, default=0)


FORMAT.register(TransactionLogKey, TransactionLogValueV0, TransactionLogValue)


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> CoordinatorRecord:
    """A record of ``__transaction_state`` (``UnknownRecordError``/``MalformedError`` if not)."""
    return FORMAT.decode(key, value)
