"""``__transaction_state`` records: Kafka's byte layout of TransactionLogKey/Value v0 and v1."""

import struct

import pytest

from odradek.coordinator.records import UnknownRecordError, encode_key, encode_value
from odradek.groups.records import base as group_records
from odradek.groups.records.offsets import OffsetCommitKey
from odradek.protocol.reader import MalformedError
from odradek.transactions.records import (
    PartitionsSchema,
    PartitionsSchemaV0,
    TransactionLogKey,
    TransactionLogValue,
    TransactionLogValueV0,
    decode,
)


def test_key_is_version_0_then_a_string():
    assert encode_key(TransactionLogKey("tx")) == b"\x00\x00" + b"\x00\x02tx"


def _v0(partitions):
    return TransactionLogValueV0(
        producer_id=5,
        producer_epoch=1,
        transaction_timeout_ms=60000,
        transaction_status=1,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=7,
        transaction_start_timestamp_ms=6,
    )


def test_value_v0_layout():
    value = _v0((PartitionsSchemaV0("t", (0, 1)),))
    expected = (
        struct.pack(">hqhib", 0, 5, 1, 60000, 1)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 7, 6)
    )
    assert encode_value(value) == expected
    assert decode(encode_key(TransactionLogKey("tx")), expected).value == value


def test_value_v0_null_partitions_is_minus_one():
    data = encode_value(_v0(None))
    assert data == struct.pack(">hqhibiqq", 0, 5, 1, 60000, 1, -1, 7, 6)
    assert decode(encode_key(TransactionLogKey("tx")), data).value.transaction_partitions is None


def test_value_v1_is_flexible_with_tagged_producer_ids():
    value = TransactionLogValue(
        producer_id=5,
        previous_producer_id=3,
        producer_epoch=1,
        transaction_timeout_ms=60000,
        transaction_status=1,
        transaction_partitions=(PartitionsSchema("t", (2,)),),
        transaction_last_update_timestamp_ms=7,
        transaction_start_timestamp_ms=6,
        client_transaction_version=2,
    )
    data = encode_value(value)
    head = struct.pack(">hqhib", 1, 5, 1, 60000, 1)
    # compact array of 1 (uvarint 2), compact string "t", compact int32 array of 1, no tags
    parts = b"\x02" + b"\x02t" + b"\x02" + struct.pack(">i", 2) + b"\x00"
    tags = b"\x02" + b"\x00\x08" + struct.pack(">q", 3) + b"\x02\x02" + struct.pack(">h", 2)
    assert data == head + parts + struct.pack(">qq", 7, 6) + tags
    assert decode(encode_key(TransactionLogKey("tx")), data).value == value


def test_value_v1_defaults_write_no_tags():
    value = TransactionLogValue(
        producer_id=5,
        producer_epoch=1,
        transaction_timeout_ms=1,
        transaction_status=0,
        transaction_last_update_timestamp_ms=7,
        transaction_start_timestamp_ms=-1,
    )
    assert encode_value(value).endswith(b"\x00")
    assert decode(encode_key(TransactionLogKey("x")), encode_value(value)).value == value


def test_tombstone():
    record = decode(encode_key(TransactionLogKey("tx")), None)
    assert record.key == TransactionLogKey("tx") and record.value is None


def test_unknown_versions_and_short_records():
    key = encode_key(TransactionLogKey("tx"))
    with pytest.raises(UnknownRecordError):
        decode(b"\x00\x01\x00\x00", None)
    with pytest.raises(UnknownRecordError):
        decode(key, b"\x00\x02" + b"\x00" * 40)
    with pytest.raises(MalformedError):
        decode(b"\x00", None)
    with pytest.raises(MalformedError):
        decode(key, b"\x00")


def test_each_topic_has_its_own_record_types():
    """Type 0 is a transaction here and an offset commit in ``__consumer_offsets``."""
    key = encode_key(TransactionLogKey("tx"))
    assert type(decode(key, None).key) is TransactionLogKey
    offsets_key = encode_key(OffsetCommitKey(group="g", topic="t", partition=0))
    assert type(group_records.decode(offsets_key, None).key) is OffsetCommitKey
