"""The bounds of Kafka's wire types, and the Kafka defaults that several modules bound work by.

A default that is also a configuration key lives in ``odradek.config`` (the key's one home) and
takes its value from here, so the frame decoder, the server and the configuration agree on it.
"""

from __future__ import annotations

__all__ = [
    "INT16_MIN",
    "INT16_MAX",
    "INT32_MIN",
    "INT32_MAX",
    "INT64_MIN",
    "INT64_MAX",
    "SOCKET_REQUEST_MAX_BYTES_DEFAULT",
]

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1  # Kafka's Short: epochs, replication factors
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1  # Kafka's Integer: partitions, sizes
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1  # Kafka's Long: offsets, timestamps

SOCKET_REQUEST_MAX_BYTES_DEFAULT = 104_857_600  # socket.request.max.bytes: the largest frame
