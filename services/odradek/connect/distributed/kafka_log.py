"""``KafkaBasedLog``: a compacted internal topic read from the beginning and followed, with a
producer to append to it (Kafka Connect's class of the same name). The config, status and offset
stores are built on it.

- ``start()`` creates the topic when it is missing (``cleanup.policy=compact``, the configured
  partitions and replication factor), and refuses one that exists with another policy, as Kafka
  does (a deleting policy would lose connector configs and offsets). It then starts the reading
  thread and waits until it has read everything written before (``read_to_end``).
- The reading thread owns a confluent-kafka consumer assigned to every partition from the
  beginning (no group, no commits), hands each record to ``on_record(key, value, partition,
  offset)`` on that thread, and serves ``read_to_end`` requests: it takes the end offsets when
  it picks a request up and completes it once its position reached them on every partition.
  With ``read_committed`` those end offsets are the last stable offsets, and aborted records
  (KIP-618 transactions that failed) are never handed over.
- ``send`` appends one record and returns once the cluster acknowledged it (acks=all,
  idempotent), or raises ``KafkaLogError``; ``send_async`` does not wait.

Every wait is bounded: ``read_to_end(timeout_s)``, ``send(timeout_s)``, ``stop()`` joins the
thread within ``STOP_TIMEOUT_S``. Thread-safe: ``send``, ``send_async`` and ``read_to_end`` may be
called from any thread; ``on_record`` runs on the reading thread only.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

__all__ = ["KafkaBasedLog", "KafkaLogError", "OnRecord"]

log = logging.getLogger(__name__)

POLL_S = 0.1
ADMIN_TIMEOUT_S = 30.0
WATERMARK_TIMEOUT_S = 10.0
METADATA_RETRY_S = 0.1
STOP_TIMEOUT_S = 10.0
MAX_PENDING_READS = 1000
FETCH_WAIT_MAX_MS = 100  # a read_to_end waits for the fetch in flight: keep it short

OnRecord = Callable[[bytes | None, bytes | None, int, int], None]


class KafkaLogError(Exception):
    """The topic cannot be used, a write failed, or a read did not finish in time."""


class KafkaBasedLog:
    """See the module docstring."""

    def __init__(
        self,
        topic: str,
        *,
        on_record: OnRecord,
        consumer_config: dict[str, Any],
        producer_config: dict[str, Any],
        admin_config: dict[str, Any],
        partitions: int = 1,
        replication_factor: int = -1,
        read_committed: bool = False,
    ):
        self.topic = topic
        self._on_record = on_record
        self._consumer_config = {
            "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
            **consumer_config,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
        # Java's partitioner, so a key lands on the partition a Java worker would choose (and
        # every writer of the offset topic agrees: compaction is per partition).
        self._producer_config = {"partitioner": "murmur2_random", **producer_config}
        self._admin_config = admin_config
        self._partitions = partitions
        self._replication_factor = replication_factor
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._reads: queue.Queue[Future[None]] = queue.Queue(MAX_PENDING_READS)
        self._partition_ids: list[int] = []
        self.failure: BaseException | None = None

    # -- life cycle ------------------------------------------------------------------------------

    def start(self, timeout_s: float) -> None:
        self.ensure_topic()
        self._producer = Producer(self._producer_config)
        consumer = Consumer(self._consumer_config)
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while True:  # a topic just created reaches every broker's metadata a little later
            metadata = consumer.list_topics(self.topic, timeout=ADMIN_TIMEOUT_S)
            described = metadata.topics.get(self.topic)
            if described is not None and described.error is None and described.partitions:
                break
            if time.monotonic() > deadline:
                consumer.close()
                error = described.error if described is not None else "missing"
                raise KafkaLogError(f"topic {self.topic}: no partitions ({error})")
            time.sleep(METADATA_RETRY_S)
        self._partition_ids = sorted(described.partitions)
        consumer.assign(
            [KafkaTopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partition_ids]
        )
        self._consumer = consumer
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-log-{self.topic}", daemon=True
        )
        self._thread.start()
        self.read_to_end(timeout_s)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning("topic %s: the reading thread did not stop in time", self.topic)
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(STOP_TIMEOUT_S)

    def ensure_topic(self) -> None:
        """Create the topic compacted if it is missing; refuse it if it is not compacted."""
        admin = AdminClient(self._admin_config)
        new = NewTopic(
            self.topic,
            num_partitions=self._partitions,
            replication_factor=self._replication_factor,
            config={"cleanup.policy": "compact"},
        )
        try:
            admin.create_topics([new], operation_timeout=ADMIN_TIMEOUT_S)[self.topic].result(
                ADMIN_TIMEOUT_S
            )
            log.info("created the internal topic %s", self.topic)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            if not (
                isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
            ):
                raise KafkaLogError(f"cannot create the internal topic {self.topic}: {e}") from e
        resource = ConfigResource(ConfigResource.Type.TOPIC, self.topic)
        try:
            configs = admin.describe_configs([resource])[resource].result(ADMIN_TIMEOUT_S)
        except (KafkaException, FutureTimeout) as e:
            raise KafkaLogError(f"cannot describe the internal topic {self.topic}: {e}") from e
        entry = configs.get("cleanup.policy")
        policy = {p.strip() for p in (entry.value if entry is not None else "delete").split(",")}
        if policy != {"compact"}:
            raise KafkaLogError(
                f"topic {self.topic} has cleanup.policy={','.join(sorted(policy))}; Connect's "
                "internal topics must have cleanup.policy=compact only (it would lose data)"
            )

    # -- reading ---------------------------------------------------------------------------------

    def read_to_end(self, timeout_s: float) -> None:
        """Return once every record written before this call has been handed to ``on_record``."""
        if self._thread is None or not self._thread.is_alive():
            raise KafkaLogError(f"topic {self.topic}: not reading ({self.failure})")
        future: Future[None] = Future()
        try:
            self._reads.put(future, timeout=timeout_s)
            future.result(timeout_s)
        except (queue.Full, FutureTimeout) as e:
            raise KafkaLogError(f"topic {self.topic}: not read to its end in {timeout_s}s") from e

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        waiting: list[tuple[Future[None], dict[int, int]]] = []
        try:
            while not self._stopping.is_set():
                message = consumer.poll(POLL_S)
                while message is not None:
                    error = message.error()
                    if error is None:
                        self._on_record(
                            message.key(), message.value(), message.partition(), message.offset()
                        )
                    elif error.fatal():
                        raise KafkaException(error)
                    else:
                        log.debug("topic %s: %s", self.topic, error)
                    message = consumer.poll(0)
                while True:
                    try:
                        future = self._reads.get_nowait()
                    except queue.Empty:
                        break
                    waiting.append((future, self._end_offsets(consumer)))
                if waiting:
                    position = self._positions(consumer)
                    done = [w for w in waiting if _reached(position, w[1])]
                    for future, _ in done:
                        future.set_result(None)
                    waiting = [w for w in waiting if w not in done]
        except BaseException as e:  # the reader dies: read_to_end answers with the reason
            self.failure = e
            log.exception("topic %s: the reading thread failed", self.topic)
        finally:
            for future, _ in waiting:
                future.set_exception(KafkaLogError(f"topic {self.topic}: reader stopped"))
            consumer.close()

    def _end_offsets(self, consumer: Consumer) -> dict[int, int]:
        ends = {}
        for p in self._partition_ids:
            low, high = consumer.get_watermark_offsets(
                KafkaTopicPartition(self.topic, p), timeout=WATERMARK_TIMEOUT_S, cached=False
            )
            ends[p] = (low, high)
        return {p: high for p, (low, high) in ends.items() if high > max(low, 0)}

    def _positions(self, consumer: Consumer) -> dict[int, int]:
        assigned = [KafkaTopicPartition(self.topic, p) for p in self._partition_ids]
        return {tp.partition: tp.offset for tp in consumer.position(assigned)}

    # -- writing ---------------------------------------------------------------------------------

    def send_async(
        self,
        key: bytes,
        value: bytes | None,
        callback: Callable[[KafkaError | None], None] | None = None,
        partition: int | None = None,
    ) -> None:
        producer = self._producer
        if producer is None:
            raise KafkaLogError(f"topic {self.topic}: not started")

        def delivered(error: KafkaError | None, _message: Any) -> None:
            if callback is not None:
                callback(error)

        extra = {} if partition is None else {"partition": partition}
        try:
            producer.produce(self.topic, value=value, key=key, on_delivery=delivered, **extra)
        except BufferError:
            producer.poll(POLL_S)
            producer.produce(self.topic, value=value, key=key, on_delivery=delivered, **extra)
        producer.poll(0)

    def send(self, records: list[tuple[bytes, bytes | None]], timeout_s: float) -> None:
        """Append ``records`` in order; return once all are acknowledged, else raise."""
        errors: list[KafkaError] = []
        for key, value in records:
            self.send_async(key, value, lambda e: errors.append(e) if e is not None else None)
        producer = self._producer
        assert producer is not None
        deadline = time.monotonic() + timeout_s
        remaining = producer.flush(timeout_s)
        while remaining and time.monotonic() < deadline:
            remaining = producer.flush(max(0.0, deadline - time.monotonic()))
        if remaining:
            raise KafkaLogError(f"topic {self.topic}: {remaining} records not acknowledged in time")
        if errors:
            raise KafkaLogError(f"topic {self.topic}: write failed: {errors[0]}")


def _reached(position: dict[int, int], ends: dict[int, int]) -> bool:
    return all(position.get(p, -1) >= end for p, end in ends.items())
