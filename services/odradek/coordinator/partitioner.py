"""Which partition of a coordinator's internal topic owns a key: Kafka's
``abs(key.hashCode()) % n``, for a group id in ``__consumer_offsets`` and a transactional id in
``__transaction_state`` alike.

Every broker and every client-side tool must agree with Kafka here (``Utils.abs`` of Java's
``String.hashCode`` over UTF-16 code units), so the same id finds the same partition on a
Kafka cluster and on Odradek. Pure; any thread.
"""

from __future__ import annotations

__all__ = ["java_string_hash", "partition_for"]

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16, as an int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(hash) % partitions`` (``abs(MIN_VALUE)`` is 0 there, not negative)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
