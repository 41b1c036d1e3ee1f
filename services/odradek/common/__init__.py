"""The shared kernel: facts every part of Odradek agrees on, each with one home.

- ``partitions``: ``TopicPartition`` and the sentinels ``NO_LEADER`` and ``NO_EPOCH``;
- ``topics``: Kafka's topic-name rule, the internal topics, a partition's log directory name;
- ``clock``: the time sources (a ``Clock`` protocol, the system clock, a ``ManualClock`` for tests);
- ``limits``: the protocol's integer bounds and the Kafka defaults several modules bound work by.

Invariant, kept by an import-linter contract: nothing here imports anything else from ``odradek``,
so every layer (protocol, storage, broker, controller, coordinators, clients, the operator) may
import it without a cycle. Everything here is a value or a pure function, safe from any thread.
"""
