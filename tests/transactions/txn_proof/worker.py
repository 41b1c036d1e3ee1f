"""One consume-transform-produce worker as its own process: exactly-once with a real client.

Run as ``python worker.py --library confluent|kafka-python|aiokafka --bootstrap B --group G
--input IN --output OUT --transactional-id T --out FILE [...]``. It consumes ``IN`` in group
``G`` with ``isolation.level=read_committed`` and no automatic commits, and for each batch it
polled runs one transaction of its transactional producer (``T``): begin, produce every record
transformed (``transform``) to the same partition of ``OUT``, send the batch's next offsets to
the transaction with the consumer's group metadata, commit. An abortable error aborts the
transaction and rewinds the consumer to the group's committed offsets, as confluent's EOS example
does; a retriable error repeats the step (bounded); a fatal one (fenced, say) ends the process
with exit code 3 after writing it down.

The journal (``--out``, JSON lines, each flushed before the next step, so a ``kill -9`` loses
nothing written): ``started``, ``committed`` (``offsets``: partition -> next offset, ``n``),
``aborted`` (``error``), ``retry``, ``fatal``, ``rewound``, ``closed``.

SIGTERM ends the loop after the current transaction; ``--duration-s`` bounds the run. Every wait
is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from functools import partial
from typing import Any

POLL_S = 0.5
STEP_TIMEOUT_S = 30.0
RETRIES = 10
RETRY_PAUSE_S = 0.5
EXIT_FATAL = 3
EXIT_REWIND_FAILED = 4


def transform(value: bytes, partition: int, offset: int) -> bytes:
    """The output record of input ``(partition, offset, value)``: its value upper-cased, then
    where it came from (``traffic.source_of`` reads it back)."""
    return value.upper() + f"|{partition}:{offset}".encode()


class Journal:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 (closed at exit)

    def write(self, event: str, **fields: Any) -> None:
        fields = {"e": event, "t": round(time.time(), 4), **fields}
        self.file.write(json.dumps(fields) + "\n")
        self.file.flush()


class Stop:
    def __init__(self, duration_s: float):
        self.requested = False
        self.deadline = time.monotonic() + duration_s
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, *_: Any) -> None:
        self.requested = True

    def now(self) -> bool:
        return self.requested or time.monotonic() > self.deadline


def next_offsets(records: list[tuple[int, int]]) -> dict[int, int]:
    """partition -> the offset after the batch's last record of it."""
    offsets: dict[int, int] = {}
    for partition, offset in records:
        offsets[partition] = max(offsets.get(partition, 0), offset + 1)
    return offsets


# --- confluent-kafka --------------------------------------------------------------------------


def run_confluent(args: argparse.Namespace, journal: Journal, stop: Stop) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 5,
        }
    )

    def retried(what: str, step: Any) -> Any:
        for attempt in range(RETRIES):
            try:
                return step()
            except KafkaException as e:
                error = e.args[0]
                if error.fatal() or error.txn_requires_abort() or not error.retriable():
                    raise
                journal.write("retry", step=what, attempt=attempt, error=str(error))
                time.sleep(RETRY_PAUSE_S)
        return step()

    def rewind(partitions: set[int]) -> None:
        """Back to the group's committed offsets (the aborted batch is consumed again)."""
        assigned = {tp.partition for tp in consumer.assignment() if tp.topic == args.input}
        wanted = [TopicPartition(args.input, p) for p in sorted(partitions & assigned)]
        if not wanted:
            return
        found = consumer.committed(wanted, timeout=STEP_TIMEOUT_S)
        positions = {}
        for tp in found:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(TopicPartition(args.input, tp.partition, offset))
            positions[tp.partition] = tp.offset
        journal.write("rewound", offsets=positions)

    try:
        retried("init", lambda: producer.init_transactions(STEP_TIMEOUT_S))
    except KafkaException as e:
        journal.write("fatal", step="init", error=str(e.args[0]))
        return EXIT_FATAL
    consumer.subscribe([args.input])
    journal.write("started", transactional_id=args.transactional_id)
    while not stop.now():
        batch = consumer.consume(num_messages=args.batch, timeout=POLL_S)
        records = [m for m in batch if m.error() is None]
        if not records:
            continue
        offsets = next_offsets([(m.partition(), m.offset()) for m in records])
        try:
            producer.begin_transaction()
            for m in records:
                producer.produce(
                    args.output,
                    transform(m.value(), m.partition(), m.offset()),
                    key=m.key(),
                    partition=m.partition(),
                )
            time.sleep(args.process_ms * len(records) / 1000)
            positions = [TopicPartition(args.input, p, o) for p, o in sorted(offsets.items())]
            metadata = consumer.consumer_group_metadata()
            send = partial(producer.send_offsets_to_transaction, positions, metadata)
            retried("send_offsets", lambda: send(STEP_TIMEOUT_S))  # noqa: B023 (called here)
            retried("commit", lambda: producer.commit_transaction(STEP_TIMEOUT_S))
            journal.write("committed", offsets=offsets, n=len(records))
        except KafkaException as e:
            error = e.args[0]
            if error.fatal():
                journal.write("fatal", error=str(error))
                return EXIT_FATAL
            journal.write("aborted", error=str(error), abortable=error.txn_requires_abort())
            try:
                retried("abort", lambda: producer.abort_transaction(STEP_TIMEOUT_S))
            except KafkaException as abort_error:
                journal.write("fatal", step="abort", error=str(abort_error.args[0]))
                return EXIT_FATAL
            try:
                rewind(set(offsets))
            except KafkaException as rewind_error:
                journal.write("rewind_failed", error=str(rewind_error.args[0]))
                return EXIT_REWIND_FAILED
    consumer.close()
    producer.flush(STEP_TIMEOUT_S)
    return 0


# --- kafka-python -----------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, journal: Journal, stop: Stop) -> int:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        transactional_id=args.transactional_id,
        enable_idempotence=True,
        acks="all",
        transaction_timeout_ms=args.transaction_timeout_ms,
        linger_ms=5,
    )
    try:
        producer.init_transactions()
    except KafkaError as e:
        journal.write("fatal", step="init", error=repr(e))
        return EXIT_FATAL
    journal.write("started", transactional_id=args.transactional_id)
    while not stop.now():
        polled = consumer.poll(timeout_ms=int(POLL_S * 1000), max_records=args.batch)
        records = [r for batch in polled.values() for r in batch]
        if not records:
            continue
        offsets = next_offsets([(r.partition, r.offset) for r in records])
        try:
            producer.begin_transaction()
            for r in records:
                producer.send(
                    args.output,
                    value=transform(r.value, r.partition, r.offset),
                    key=r.key,
                    partition=r.partition,
                )
            time.sleep(args.process_ms * len(records) / 1000)
            producer.send_offsets_to_transaction(
                {
                    TopicPartition(args.input, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()
                },
                consumer.group_metadata(),
            )
            producer.commit_transaction()
            journal.write("committed", offsets=offsets, n=len(records))
        except KafkaError as e:
            journal.write("aborted", error=repr(e))
            try:
                producer.abort_transaction()
            except KafkaError as abort_error:
                journal.write("fatal", step="abort", error=repr(abort_error))
                return EXIT_FATAL
            assigned = {tp.partition for tp in consumer.assignment()}
            for p in sorted(set(offsets) & assigned):
                tp = TopicPartition(args.input, p)
                committed = consumer.committed(tp)
                if committed is None:
                    consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, committed)
            journal.write("rewound")
    consumer.close()
    producer.close(timeout=STEP_TIMEOUT_S)
    return 0


# --- aiokafka ---------------------------------------------------------------------------------


def run_aiokafka(args: argparse.Namespace, journal: Journal, stop: Stop) -> int:
    return asyncio.run(_aiokafka(args, journal, stop))


async def _aiokafka(args: argparse.Namespace, journal: Journal, stop: Stop) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.errors import KafkaError

    consumer = AIOKafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap,
        transactional_id=args.transactional_id,
        enable_idempotence=True,
        transaction_timeout_ms=args.transaction_timeout_ms,
        linger_ms=5,
    )
    try:
        await asyncio.wait_for(producer.start(), STEP_TIMEOUT_S)  # InitProducerId
    except (KafkaError, TimeoutError) as e:
        journal.write("fatal", step="init", error=repr(e))
        return EXIT_FATAL
    await consumer.start()
    journal.write("started", transactional_id=args.transactional_id)
    try:
        while not stop.now():
            polled = await consumer.getmany(timeout_ms=int(POLL_S * 1000), max_records=args.batch)
            records = [r for batch in polled.values() for r in batch]
            if not records:
                continue
            offsets = next_offsets([(r.partition, r.offset) for r in records])
            try:
                async with producer.transaction():
                    sent = [
                        await producer.send(
                            args.output,
                            value=transform(r.value, r.partition, r.offset),
                            key=r.key,
                            partition=r.partition,
                        )
                        for r in records
                    ]
                    await asyncio.gather(*sent)
                    await asyncio.sleep(args.process_ms * len(records) / 1000)
                    await producer.send_offsets_to_transaction(
                        {TopicPartition(args.input, p): o for p, o in offsets.items()}, args.group
                    )
                journal.write("committed", offsets=offsets, n=len(records))
            except KafkaError as e:  # the context manager aborted the transaction
                journal.write("aborted", error=repr(e))
                for p in sorted(set(offsets) & {tp.partition for tp in consumer.assignment()}):
                    tp = TopicPartition(args.input, p)
                    committed = await consumer.committed(tp)
                    if committed is None:
                        await consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, committed)
                journal.write("rewound")
    finally:
        await consumer.stop()
        await producer.stop()
    return 0


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", choices=sorted(RUNNERS), default="confluent")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--process-ms", type=float, default=0.0, help="per record")
    parser.add_argument("--transaction-timeout-ms", type=int, default=10_000)
    parser.add_argument("--duration-s", type=float, default=150.0)
    args = parser.parse_args()
    journal = Journal(args.out)
    stop = Stop(args.duration_s)
    code = RUNNERS[args.library](args, journal, stop)
    journal.write("closed", code=code)
    return code


if __name__ == "__main__":
    sys.exit(main())
