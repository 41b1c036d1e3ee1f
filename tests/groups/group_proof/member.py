"""One group member as its own process: a real client library consuming a topic in a group.

Run as ``python member.py --library confluent|kafka-python|aiokafka --group G --topic T
--out FILE [...]``. It subscribes, consumes, and writes what happens to ``--out`` as JSON lines,
each written and flushed before the next step (so a ``kill -9`` loses nothing it did):

- ``{"e": "assigned", "partitions": [...]}`` / ``{"e": "revoked", ...}``: rebalance callbacks;
- ``{"e": "record", "p": partition, "o": offset, "v": value}``: a record processed;
- ``{"e": "committed", "offsets": {partition: next offset}}``: a commit the broker acknowledged;
- ``{"e": "started"}``, ``{"e": "closed"}``.

``--mode at-least-once`` processes a batch then commits it (a crash re-delivers what was
processed but not committed); ``at-most-once`` commits a batch first and processes it only if
the commit succeeded (a crash loses what was committed but not processed). ``--process-ms``
slows processing per record, so that faults land in the middle of the work.

``--client-debug cgrp`` (confluent only) has librdkafka log its group state machine to the
member's log, for a test to report when the group does not settle.

SIGTERM stops it cleanly: the loop ends and the consumer closes (a dynamic member leaves the
group; a static one does not). It also stops after ``--idle-exit-s`` without records once it
consumed something, and at ``--duration-s`` in any case. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

POLL_S = 0.5
BATCH_MAX = 200


class Journal:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 (closed at exit)
        self.started = time.monotonic()

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


def run_confluent(args: argparse.Namespace, journal: Journal, stop: Stop) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    }
    if args.protocol == "consumer":
        config["group.protocol"] = "consumer"
        if args.assignor:
            config["group.remote.assignor"] = args.assignor
    else:
        config["session.timeout.ms"] = args.session_timeout_ms
        config["heartbeat.interval.ms"] = max(args.session_timeout_ms // 6, 100)
        if args.assignor:
            config["partition.assignment.strategy"] = args.assignor
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    if args.client_debug:
        config["debug"] = args.client_debug  # librdkafka's contexts, logged to the member's log
    consumer = Consumer(config)

    def assigned(_consumer: Any, partitions: list[Any]) -> None:
        journal.write("assigned", partitions=sorted(p.partition for p in partitions))

    def revoked(_consumer: Any, partitions: list[Any]) -> None:
        journal.write("revoked", partitions=sorted(p.partition for p in partitions))

    consumer.subscribe([args.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    journal.write("started")

    def commit(offsets: dict[int, int]) -> bool:
        try:
            consumer.commit(
                offsets=[TopicPartition(args.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as e:
            journal.write("commit_failed", error=str(e))
            return False
        journal.write("committed", offsets=offsets)
        return True

    def poll() -> list[tuple[int, int, bytes | None]]:
        batch = consumer.consume(num_messages=BATCH_MAX, timeout=POLL_S)
        records = []
        for message in batch:
            if message.error() is None:
                records.append((message.partition(), message.offset(), message.value()))
        return records

    loop(args, journal, stop, poll, commit)
    consumer.close()


def run_kafka_python(args: argparse.Namespace, journal: Journal, stop: Stop) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    options: dict[str, Any] = {}
    if args.assignor:
        options["partition_assignment_strategy"] = [assignors[args.assignor]]
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id or None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=max(args.session_timeout_ms // 6, 100),
        **options,
    )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned: Any) -> None:
            journal.write("assigned", partitions=sorted(tp.partition for tp in assigned))

        def on_partitions_revoked(self, revoked: Any) -> None:
            journal.write("revoked", partitions=sorted(tp.partition for tp in revoked))

    consumer.subscribe([args.topic], listener=Listener())
    journal.write("started")

    def commit(offsets: dict[int, int]) -> bool:
        try:
            consumer.commit(
                {
                    TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()
                }
            )
        except KafkaError as e:
            journal.write("commit_failed", error=repr(e))
            return False
        journal.write("committed", offsets=offsets)
        return True

    def poll() -> list[tuple[int, int, bytes | None]]:
        polled = consumer.poll(timeout_ms=int(POLL_S * 1000), max_records=BATCH_MAX)
        return [(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]

    loop(args, journal, stop, poll, commit)
    consumer.close()


def run_aiokafka(args: argparse.Namespace, journal: Journal, stop: Stop) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}

    async def main() -> None:
        options: dict[str, Any] = {}
        if args.assignor:
            options["partition_assignment_strategy"] = (assignors[args.assignor],)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            group_instance_id=args.instance_id or None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=max(args.session_timeout_ms // 6, 100),
            **options,
        )

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_assigned(self, assigned: Any) -> None:
                journal.write("assigned", partitions=sorted(tp.partition for tp in assigned))

            async def on_partitions_revoked(self, revoked: Any) -> None:
                journal.write("revoked", partitions=sorted(tp.partition for tp in revoked))

        await consumer.start()
        consumer.subscribe([args.topic], listener=Listener())
        journal.write("started")
        try:
            while not stop.now():
                polled = await consumer.getmany(
                    timeout_ms=int(POLL_S * 1000), max_records=BATCH_MAX
                )
                records = [(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]
                offsets = next_offsets(records)
                if args.mode == "at-most-once" and records and not await commit(consumer, offsets):
                    continue
                process(args, journal, records)
                if args.mode == "at-least-once" and records:
                    await commit(consumer, offsets)
                if idle_exit(args, journal, records):
                    break
        finally:
            await consumer.stop()

    async def commit(consumer: Any, offsets: dict[int, int]) -> bool:
        try:
            await consumer.commit({TopicPartition(args.topic, p): o for p, o in offsets.items()})
        except KafkaError as e:
            journal.write("commit_failed", error=repr(e))
            return False
        journal.write("committed", offsets=offsets)
        return True

    asyncio.run(main())


def next_offsets(records: list[tuple[int, int, bytes | None]]) -> dict[int, int]:
    offsets: dict[int, int] = {}
    for partition, offset, _ in records:
        offsets[partition] = max(offsets.get(partition, 0), offset + 1)
    return offsets


def process(
    args: argparse.Namespace, journal: Journal, records: list[tuple[int, int, bytes | None]]
) -> None:
    for partition, offset, value in records:
        if args.process_ms:
            time.sleep(args.process_ms / 1000)
        journal.write("record", p=partition, o=offset, v=(value or b"").decode())


_last_record_s = [0.0]


def idle_exit(
    args: argparse.Namespace, journal: Journal, records: list[tuple[int, int, bytes | None]]
) -> bool:
    now = time.monotonic()
    if records:
        _last_record_s[0] = now
        return False
    idle_s = now - _last_record_s[0]
    return bool(args.idle_exit_s and _last_record_s[0] and idle_s > args.idle_exit_s)


def loop(args, journal, stop, poll, commit) -> None:  # type: ignore[no-untyped-def]
    while not stop.now():
        records = poll()
        offsets = next_offsets(records)
        if args.mode == "at-most-once" and records and not commit(offsets):
            continue  # not committed: not processed either (may be lost, never duplicated)
        process(args, journal, records)
        if args.mode == "at-least-once" and records:
            commit(offsets)
        if idle_exit(args, journal, records):
            break


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", choices=("confluent", "kafka-python", "aiokafka"))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--mode", choices=("at-least-once", "at-most-once"), default="at-least-once"
    )
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--assignor", default="")
    parser.add_argument("--instance-id", default="")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--process-ms", type=float, default=0.0)
    parser.add_argument("--idle-exit-s", type=float, default=0.0)
    parser.add_argument("--duration-s", type=float, default=120.0)
    parser.add_argument("--client-debug", default="", help="librdkafka's debug contexts")
    args = parser.parse_args()
    journal = Journal(args.out)
    stop = Stop(args.duration_s)
    runner = {
        "confluent": run_confluent,
        "kafka-python": run_kafka_python,
        "aiokafka": run_aiokafka,
    }[args.library]
    try:
        runner(args, journal, stop)
    finally:
        journal.write("closed")


if __name__ == "__main__":
    sys.exit(main())
