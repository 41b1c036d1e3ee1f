"""The framing of ``__consumer_offsets`` records: a versioned key and a versioned value.

Kafka's coordinator records (``group-coordinator/src/main/resources/common/message/*Key.json``
and ``*Value.json``): the record key is an int16 *record type* then the key struct, the value an
int16 *version* then the value struct, or null (a tombstone: the key's entity is gone, and
compaction will drop it). The record type says which entity a key names:

| type | key | value |
|---:|---|---|
| 0, 1 | OffsetCommitKey (group, topic, partition) | OffsetCommitValue |
| 2 | GroupMetadataKey (classic group) | GroupMetadataValue |
| 3 | ConsumerGroupMetadataKey | ConsumerGroupMetadataValue |
| 4 | ConsumerGroupPartitionMetadataKey | ConsumerGroupPartitionMetadataValue |
| 5 | ConsumerGroupMemberMetadataKey | ConsumerGroupMemberMetadataValue |
| 6 | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMetadataValue |
| 7 | ConsumerGroupTargetAssignmentMemberKey | ConsumerGroupTargetAssignmentMemberValue |
| 8 | ConsumerGroupCurrentMemberAssignmentKey | ConsumerGroupCurrentMemberAssignmentValue |

Keys and values are kio-style dataclasses (as ``protocol.interbroker`` declares its messages:
``kafka_type`` in each field's metadata, ``__flexible__``), encoded by the protocol layer's
writer and decoded by its bounded reader. A key class carries ``__record_type__``; a value class
``__version__``. Odradek writes one version of each value and reads the versions it registers:
the log holds only what Odradek wrote (there is no migration from Kafka's own log files).

``register`` is called once per record type by the modules that declare them
(``groups.records.offsets``, ``.classic``, ``.consumer``); ``encode``/``decode`` serve the runtime.
The framing itself is ``odradek.coordinator.records`` (shared with the transaction
coordinator); this module is the ``RecordFormat`` of ``__consumer_offsets``. Pure data; any thread.
"""

from __future__ import annotations

from odradek.common.topics import OFFSETS_TOPIC
from odradek.coordinator.records import (
    CoordinatorRecord,
    RecordFormat,
    UnknownRecordError,
    encode_key,
    encode_value,
)

__all__ = [
    "CoordinatorRecord",
    "UnknownRecordError",
    "FORMAT",
    "register",
    "encode_key",
    "encode_value",
    "decode",
]

FORMAT = RecordFormat(OFFSETS_TOPIC)
register = FORMAT.register
decode = FORMAT.decode
