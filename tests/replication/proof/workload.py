"""The workload behind a fault test: continuous produce with confluent-kafka, then a full read.

``Producers`` runs one thread per producer, each with its own confluent-kafka ``Producer``
(``acks=all``, ``enable.idempotence=true``: librdkafka keeps at most 5 requests in flight, in
order, and retries them without duplicates). Producer ``n`` sends values ``encode_value(n, seq)``
for seq = 0, 1, 2, ... at a steady rate, record ``seq`` to partition ``seq % partitions``, so each
partition receives each producer's records in increasing sequence order. Every send and every
delivery report goes into the ``History``: acknowledged at (partition, offset), or failed. A
producer stops at its record count, at its time limit, or when asked; what is still queued then
is purged and reported as failed (indeterminate: it may have been written).

``read_all`` is the final reader: one consumer assigned every partition from the beginning,
recording every record, until each partition reports its end (librdkafka's partition EOF: the
consumer's position reached the high watermark the leader showed it) at or past the high
watermark asked for before reading; bounded in time. Returns the end offsets it reached.

Threads: each producer thread owns its ``Producer`` and receives its delivery reports on its own
thread (``poll``), so callbacks never run concurrently with each other for one producer; the
``History`` takes its own lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from support.waiting import wait_until

from .checker import History, encode_value

POLL_S = 0.2
TOPIC_READY_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 15.0  # at stop: what is in flight gets this long to be acknowledged
READ_BATCH_MAX = 1_000


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    topic: str
    partitions: int = 3
    producers: int = 2
    records_per_s: int = 200  # per producer
    records_max: int = 20_000  # per producer
    duration_s_max: float = 60.0
    value_bytes: int = 64
    message_timeout_ms: int = 20_000  # a record not acknowledged by then fails (indeterminate)


def producer_config(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 20_000,
        "request.timeout.ms": 5_000,
        "retry.backoff.ms": 100,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1_000,
        "topic.metadata.refresh.interval.ms": 1_000,
    }


def create_topic(
    bootstrap: str,
    config: WorkloadConfig,
    replica_assignment: list[list[int]] | None = None,
    topic_config: dict[str, str] | None = None,
) -> dict[str, object]:
    """Create the topic with the brokers' default replication, or on the brokers
    ``replica_assignment`` names (one list per partition); wait until every partition is led.
    Returns what the cluster says of it: replicas per partition, min.insync.replicas."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if replica_assignment is None:
        new = NewTopic(config.topic, config.partitions, config=topic_config or {})
    else:
        new = NewTopic(
            config.topic,
            num_partitions=len(replica_assignment),  # confluent-kafka wants both, equal
            replica_assignment=replica_assignment,
            config=topic_config or {},
        )
    admin.create_topics([new])[config.topic].result(timeout=ADMIN_TIMEOUT_S)

    def led():  # the topic's metadata once every partition is led
        topic = admin.list_topics(config.topic, timeout=ADMIN_TIMEOUT_S).topics.get(config.topic)
        ready = (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == config.partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        )
        return topic if ready else None

    topic = wait_until(led, f"{config.topic} led", TOPIC_READY_TIMEOUT_S, poll_s=POLL_S)
    resource = ConfigResource(ConfigResource.Type.TOPIC, config.topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=ADMIN_TIMEOUT_S)
    return {
        "replicas": {p.id: tuple(p.replicas) for p in topic.partitions.values()},
        "min.insync.replicas": int(configs["min.insync.replicas"].value),
    }


class Producers:
    """``config.producers`` producer threads writing into ``history``; see the module doc."""

    def __init__(
        self, bootstrap: str, history: History, config: WorkloadConfig, started_s: float
    ) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.config = config
        self.started_s = started_s  # time.monotonic() of the run's start: ack times count from it
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(n,), name=f"producer-{n}", daemon=True)
            for n in range(config.producers)
        ]
        self.sent = [0] * config.producers

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop sending, wait for what is in flight (bounded), report the rest as failed."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=FLUSH_TIMEOUT_S + 10)
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"producer threads did not stop: {alive}")

    def _run(self, producer_id: int) -> None:
        config = self.config
        producer = Producer(
            {**producer_config(self.bootstrap), "message.timeout.ms": config.message_timeout_ms}
        )
        history = self.history

        def delivered(err, msg) -> None:
            if err is None:
                now_s = time.monotonic() - self.started_s
                history.record_ack(msg.partition(), msg.offset(), msg.value(), now_s)
            else:
                history.record_failure(msg.value(), err.name())

        began = time.monotonic()
        deadline = began + config.duration_s_max
        sequence = 0
        try:
            while (
                not self._stop.is_set()
                and sequence < config.records_max
                and time.monotonic() < deadline
            ):
                value = encode_value(producer_id, sequence, config.value_bytes)
                history.record_send(value)
                try:
                    producer.produce(
                        config.topic,
                        value=value,
                        partition=sequence % config.partitions,
                        on_delivery=delivered,
                    )
                except BufferError:  # the local queue is full: let it drain, then send again
                    producer.poll(POLL_S)
                    continue
                sequence += 1
                self.sent[producer_id] = sequence
                producer.poll(0)
                pause_s = began + sequence / config.records_per_s - time.monotonic()
                if pause_s > 0:
                    producer.poll(pause_s)
        finally:
            producer.flush(FLUSH_TIMEOUT_S)
            producer.purge()  # what is left fails with _PURGE_QUEUE / _PURGE_INFLIGHT
            producer.flush(1.0)


def read_all(
    bootstrap: str, history: History, config: WorkloadConfig, timeout_s: float
) -> dict[int, int]:
    """Read every partition from the beginning to its end; returns the end offsets reached.

    The end to reach is each partition's high watermark as asked before reading (the producers
    have stopped): a partition is done once the consumer reports its end at or past it.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checker-{config.topic}",  # assign() below: no group is joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1_000,
        }
    )
    try:
        deadline = time.monotonic() + timeout_s
        targets = {}
        for partition in range(config.partitions):
            _, high = consumer.get_watermark_offsets(
                TopicPartition(config.topic, partition), timeout=ADMIN_TIMEOUT_S, cached=False
            )
            targets[partition] = high
        consumer.assign(
            [TopicPartition(config.topic, p, OFFSET_BEGINNING) for p in range(config.partitions)]
        )
        ends: dict[int, int] = {}
        while time.monotonic() < deadline and any(
            ends.get(p, -1) < target for p, target in targets.items()
        ):
            for message in consumer.consume(READ_BATCH_MAX, timeout=POLL_S):
                error = message.error()
                if error is None:
                    history.record_read(message.partition(), message.offset(), message.value())
                elif error.code() == KafkaError._PARTITION_EOF:
                    ends[message.partition()] = message.offset()
        for partition, end in ends.items():
            if end >= targets[partition]:
                history.record_end(partition, end)
        return ends
    finally:
        consumer.close()
