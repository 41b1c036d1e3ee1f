"""Topics and records for the group proofs: create a topic and wait until every broker has it
led, produce acknowledged records (confluent-kafka, acks=all, idempotent), read committed
offsets with a fresh consumer, watch a group's state. Who coordinates a group and the end offsets
of what was acknowledged are support.proof_lookups' (shared with the transaction proofs). Every
wait is bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.topic_views import led_on_every_broker
from support.waiting import wait_until

ADMIN_TIMEOUT_S = 15.0
FLUSH_TIMEOUT_S = 60.0

Acked = dict[tuple[int, int], str]  # (partition, offset) -> value


def create_topic(bootstrap: str, topic: str, partitions: int = 6) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=ADMIN_TIMEOUT_S)

    # every broker, as a test may ask one of them (a coordinator) about the topic at once
    addresses = bootstrap.split(",")
    wait_until(
        lambda: led_on_every_broker(addresses, topic, partitions),
        f"{topic} led on every broker",
        ADMIN_TIMEOUT_S,
    )


def producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 30_000,
        }
    )


def produce(
    bootstrap: str, topic: str, count: int, *, partitions: int = 6, first: int = 0
) -> Acked:
    """``count`` records ``first``, ``first + 1``, ... round robin over the partitions; what
    was acknowledged (all of it, or AssertionError)."""
    acked: Acked = {}
    failed: list[str] = []

    def report(error: Any, message: Any) -> None:
        if error is None:
            acked[(message.partition(), message.offset())] = message.value().decode()
        else:
            failed.append(str(error))

    client = producer(bootstrap)
    for i in range(first, first + count):
        client.produce(topic, str(i).encode(), partition=i % partitions, on_delivery=report)
        client.poll(0)
    remaining = client.flush(FLUSH_TIMEOUT_S)
    assert remaining == 0 and not failed, f"{remaining} unacknowledged, failures {failed[:3]}"
    return acked


class SteadyProducer:
    """Produces ``rate_per_s`` records in a thread until stopped; what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate_per_s: int, partitions: int = 6):
        self.acked: Acked = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap, topic, rate_per_s, partitions), daemon=True
        )

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(FLUSH_TIMEOUT_S + 5)

    def _run(self, bootstrap: str, topic: str, rate_per_s: int, partitions: int) -> None:
        client = producer(bootstrap)

        def report(error: Any, message: Any) -> None:
            if error is None:
                with self._lock:
                    self.acked[(message.partition(), message.offset())] = message.value().decode()

        i = 0
        started = time.monotonic()
        while not self._stop.is_set():
            if i < (time.monotonic() - started) * rate_per_s:
                client.produce(topic, str(i).encode(), partition=i % partitions, on_delivery=report)
                i += 1
            else:
                time.sleep(0.005)
            client.poll(0)
        client.flush(FLUSH_TIMEOUT_S)


def committed(bootstrap: str, group: str, topic: str, partitions: int = 6) -> dict[int, int]:
    """The group's committed offsets, as a new consumer of the group reads them (OffsetFetch)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=ADMIN_TIMEOUT_S
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


class GroupWatch:
    """The group's state and size as its coordinator describes them (DescribeGroups), through
    one admin client for repeated looks."""

    def __init__(self, bootstrap: str, group: str):
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.group = group

    def look(self) -> tuple[str, int]:
        """(state, members): ``("PREPARING_REBALANCING", 2)``; ``("UNKNOWN", 0)`` while the
        coordinator does not answer."""
        future = self.admin.describe_consumer_groups([self.group])[self.group]
        try:
            found = future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException:
            return "UNKNOWN", 0
        return found.state.name, len(found.members)
