"""Reading records back with a real client until enough have come or a bound has passed: the
tests' consume loops in one place, for confluent-kafka (``poll_messages``) and kafka-python
(``poll_records``), and one partition read to its end (``poll_to_partition_end``, confluent-kafka
with ``enable.partition.eof``).

A read to a count does not fail for coming short: it returns what came, and the caller's
assertion shows it against what was sent (a short read is a failure there, with the records that
did come). Each read is bounded by ``timeout_s`` on ``time.monotonic`` (plus the one poll under
way) and stops at ``count`` records. confluent-kafka's error events (end of partition, a broker
going away) are skipped, or with ``raise_errors`` end the read with an AssertionError naming the
error. A read to the end fails with an AssertionError if the end does not come within its bound.
The consumer stays the caller's, subscribed or assigned before and closed after; like the client
libraries, one thread per consumer."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["poll_messages", "poll_records", "poll_to_partition_end"]


def poll_messages(
    consumer: Any,
    count: int,
    timeout_s: float,
    *,
    poll_s: float = 0.5,
    raise_errors: bool = False,
) -> list[Any]:
    """Up to ``count`` messages of a confluent-kafka ``Consumer``, one ``poll(poll_s)`` at a
    time, those with an error left out (or raised, with ``raise_errors``)."""
    messages: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < count and time.monotonic() < deadline:
        message = consumer.poll(poll_s)
        if message is None:
            continue
        if message.error() is not None:
            if raise_errors:
                raise AssertionError(message.error())
            continue
        messages.append(message)
    return messages


def poll_records(consumer: Any, count: int, timeout_s: float, *, poll_ms: int = 500) -> list[Any]:
    """At least ``count`` records of a kafka-python ``KafkaConsumer`` if they come (a poll's
    whole answer is kept), in the order its polls gave them."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=poll_ms).values():
            records.extend(batch)
    return records


def poll_to_partition_end(consumer: Any, timeout_s: float, *, poll_s: float = 1.0) -> list[Any]:
    """The messages of the one partition ``consumer`` is assigned, up to its end: the first
    error event (``enable.partition.eof`` makes the end one) ends the read."""
    messages: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(poll_s)
        if message is None:
            continue
        if message.error():
            return messages
        messages.append(message)
    raise AssertionError(f"the partition not read to its end within {timeout_s} s")
