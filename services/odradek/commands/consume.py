"""``odradek consume``: kafka-console-consumer (and consumer-perf-test with ``--quiet``).

Without ``--group`` the consumer assigns itself every partition of the topic (or the one
``--partition``) and reads from the end, or from the start with ``--from-beginning``; nothing is
committed, and several such consumers each read everything. librdkafka insists on a ``group.id``
even so; with ``assign()`` and no commits it never talks to a group coordinator.

With ``--group G`` it is a member of consumer group ``G``, as kafka-console-consumer's
``--group``: it subscribes to the topic, the group's coordinator gives it its share of the
partitions, and it starts from the group's committed offsets (where there are none, from the end,
or with ``--from-beginning`` from the start: ``auto.offset.reset``). The offsets of the records
it has read are committed every ``auto.commit.interval.ms`` and once more, synchronously, before
it leaves the group, so ``odradek groups describe --group G`` shows them and the next run goes
on from there. ``--partition`` is refused with ``--group`` (the group assigns partitions).

Records go to stdout (the value, one per line; ``--print-metadata`` puts partition, offset and key
in front, as the console consumer's ``print.partition``/``print.offset``/``print.key`` do), or
with ``--quiet`` nowhere, with a progress line on stderr every second instead. At the end, one
summary line on stderr, so stdout holds the records only. The run stops after ``--max-messages``
records, when nothing has come for ``--timeout-ms``, or on Ctrl-C; it exits 1 if it timed out
before ``--max-messages``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from odradek.commands.common import (
    PROGRESS_INTERVAL_S,
    CommandError,
    Progress,
    SigintFlag,
    add_bootstrap_argument,
    args_client_config,
    describe_kafka_error,
    error_code,
    mib,
    run_command,
    topic_partitions,
)

BATCH_MAX_RECORDS = 10_000  # records taken from librdkafka's queue per call
GROUP_ID = "odradek-cli"  # without --group: librdkafka requires one; never used (no commit)
# librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever its local queue
# is full; this loop empties it far sooner, so a long pause only leaves the consumer idle
# (measured: 1 KiB records, 4 partitions, 2 brokers: about 90k records/s at 1 s, 250-370k at 10 ms).
FETCH_QUEUE_BACKOFF_MS = 10
FATAL_ERRORS = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consume",
        help="read a topic's records to stdout, or measure read throughput",
        description="Read the records of a topic. Without --group, every partition is assigned "
        "to this one consumer and nothing is committed: each run reads from the end, or from the "
        "start with --from-beginning. With --group, the consumer joins that consumer group, "
        "reads the partitions the group gives it from the group's committed offsets, and "
        "commits what it has read.",
    )
    parser.add_argument("topic")
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--group",
        metavar="GROUP_ID",
        help="join this consumer group: subscribe, start at its committed offsets, commit them",
    )
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at each partition's first record (with --group: where nothing is committed)",
    )
    parser.add_argument("--partition", type=int, help="read only this partition")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--timeout-ms", type=int, help="stop when no record has come for this long")
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--print", dest="quiet", action="store_false", help="print each record (default)"
    )
    output.add_argument(
        "--quiet",
        dest="quiet",
        action="store_true",
        help="print no records, a progress line on stderr every second instead",
    )
    parser.add_argument(
        "--print-metadata",
        action="store_true",
        help="print partition, offset and key before each value",
    )
    parser.set_defaults(handler=run_command("consume", run), quiet=False)


def run(args: argparse.Namespace) -> int:
    if args.max_messages is not None and args.max_messages < 0:
        raise CommandError("--max-messages must not be negative")
    if args.group is not None and args.partition is not None:
        raise CommandError("--partition cannot be used with --group: the group assigns partitions")
    if args.group is not None and not args.group:
        raise CommandError("--group must not be empty")
    grouped = {
        "group.id": args.group,
        "enable.auto.commit": True,  # the offsets of records returned by consume() (auto store)
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
    }
    alone = {"group.id": GROUP_ID, "enable.auto.commit": False}
    consumer = Consumer(
        args_client_config(
            args,
            **(grouped if args.group is not None else alone),
            **{"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS},
        )
    )
    try:
        if args.group is None:
            consumer.assign(_partitions(consumer, args))
        else:
            topic_partitions(consumer, args.topic)  # fail fast on a missing topic
            consumer.subscribe([args.topic])
        code = _consume(consumer, args)
        if args.group is not None:
            _commit(consumer, args.group)
        return code
    finally:
        consumer.close()


def _commit(consumer: Consumer, group: str) -> None:
    """Commit the offsets read so far before leaving the group (auto-commit runs only on its
    interval); nothing read since the last commit is not an error."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:
        if error_code(e) != KafkaError._NO_OFFSET:
            raise CommandError(
                f"group {group!r}: cannot commit offsets: {describe_kafka_error(e)}"
            ) from e


def _partitions(consumer: Consumer, args: argparse.Namespace) -> list[TopicPartition]:
    ids = topic_partitions(consumer, args.topic)
    if args.partition is not None:
        if args.partition not in ids:
            raise CommandError(
                f"topic {args.topic!r} has no partition {args.partition} "
                f"(partitions 0-{len(ids) - 1})"
            )
        ids = [args.partition]
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    return [TopicPartition(args.topic, p, start) for p in ids]


class ReadStats:
    """Records and bytes (key plus value) read: in all, and since the last progress line."""

    def __init__(self) -> None:
        self.started_s = self.last_record_s = self._window_start_s = time.monotonic()
        self.records = self.size = self._window_records = self._window_size = 0

    def add(self, n_bytes: int, now: float) -> None:
        self.records += 1
        self.size += n_bytes
        self._window_records += 1
        self._window_size += n_bytes
        self.last_record_s = now

    def window_line(self, now: float) -> str:
        elapsed_s = max(now - self._window_start_s, 1e-9)
        line = (
            f"{self.records} records, {self._window_records / elapsed_s:.1f} records/s "
            f"({mib(self._window_size) / elapsed_s:.2f} MB/s)"
        )
        self._window_start_s, self._window_records, self._window_size = now, 0, 0
        return line

    def summary_line(self) -> str:
        """From the start to the last record: a final wait for more does not dilute the rate."""
        elapsed_s = max(self.last_record_s - self.started_s, 1e-9)
        return (
            f"{self.records} records, {mib(self.size):.2f} MB in {elapsed_s:.2f} s: "
            f"{self.records / elapsed_s:.1f} records/s ({mib(self.size) / elapsed_s:.2f} MB/s)"
        )


def _consume(consumer: Consumer, args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    limit = args.max_messages
    stats, progress = ReadStats(), Progress()
    warned: set[int] = set()
    with SigintFlag() as interrupt:
        timed_out = _read(consumer, args, out, stats, progress, warned, interrupt)
    print(stats.summary_line(), file=sys.stderr)
    if timed_out and limit is not None:
        print(
            f"odradek consume: error: no record for {args.timeout_ms} ms; "
            f"{stats.records} of {limit} records read",
            file=sys.stderr,
        )
        return 1
    return 0


def _read(consumer, args, out, stats, progress, warned, interrupt: SigintFlag) -> bool:
    """Read until the limit, Ctrl-C or the reader of stdout going away; True if timed out."""
    limit = args.max_messages
    idle_limit_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    try:
        while (limit is None or stats.records < limit) and not interrupt.requested:
            wanted = BATCH_MAX_RECORDS if limit is None else limit - stats.records
            batch = consumer.consume(min(wanted, BATCH_MAX_RECORDS), PROGRESS_INTERVAL_S / 4)
            now = time.monotonic()
            for message in batch:
                error = message.error()
                if error is not None:
                    _handle_error(error, args.topic, warned)
                    continue
                stats.add(len(message.value() or b"") + len(message.key() or b""), now)
                if not args.quiet:
                    _write(out, message, args.print_metadata)
            if batch and not args.quiet:
                out.flush()  # a record shows as soon as its batch is read, not when 8 KiB are
            if args.quiet and progress.due():
                progress.say(stats.window_line(now))
            if idle_limit_s is not None and now - stats.last_record_s >= idle_limit_s:
                return True
        out.flush()
    except BrokenPipeError:  # the reader of stdout went away (`| head`): a normal end
        _silence_stdout()
    return False


def _handle_error(error: KafkaError, topic: str, warned: set[int]) -> None:
    """Stop on an error that will not pass; say once per kind that librdkafka is retrying."""
    if error.code() in FATAL_ERRORS:
        raise CommandError(f"topic {topic!r}: {describe_kafka_error(error)}")
    if error.code() not in warned:
        warned.add(error.code())
        print(f"odradek consume: {describe_kafka_error(error)} (retrying)", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _write(out, message, with_metadata: bool) -> None:
    value = message.value()
    if with_metadata:
        key = message.key()
        out.write(
            b"Partition:%d\tOffset:%d\t%s\t"
            % (message.partition(), message.offset(), b"null" if key is None else key)
        )
    out.write(b"null\n" if value is None else value + b"\n")
