"""``odradek produce``: kafka-producer-perf-test and kafka-console-producer in one command.

Records are either generated (``--num-records`` values of ``--record-size`` bytes, one random
payload reused, as the perf test does) or read from stdin, one record per line without its line
end. They go through confluent-kafka's ``Producer``; each record's latency runs from ``produce()``
to its delivery report. Every second a progress line goes to stderr, and at the end one summary
line to stdout; the exit code is 1 if any record was not delivered. Ctrl-C stops sending, gives
the records in flight ``INTERRUPTED_FLUSH_TIMEOUT_S`` to be acknowledged (a second Ctrl-C: no
time), prints the summary and how many of the records sent were delivered, and exits 130.

Bounded: librdkafka's own queue (``queue.buffering.max.messages``) holds the records in flight;
when it is full the loop serves delivery reports until there is room. Latencies for percentiles
are kept for at most ``LATENCY_SAMPLES_MAX`` records (average and maximum cover them all).
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from array import array
from collections.abc import Iterator

from confluent_kafka import KafkaError, Producer

from odradek.commands.common import (
    PROGRESS_INTERVAL_S,
    CommandError,
    Progress,
    SigintFlag,
    add_bootstrap_argument,
    args_client_config,
    describe_kafka_error,
    mib,
    run_command,
    topic_partitions,
)

DELIVERY_TIMEOUT_MS = 60_000  # a record not acknowledged by then counts as failed
FLUSH_TIMEOUT_S = DELIVERY_TIMEOUT_MS / 1000 + 10
INTERRUPTED_FLUSH_TIMEOUT_S = 10.0  # after Ctrl-C, how long records in flight may still land
INTERRUPTED_EXIT = 130
LATENCY_SAMPLES_MAX = 1_000_000
ERRORS_SHOWN_MAX = 5
POLL_EVERY_RECORDS = 1000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "produce",
        help="send generated records or stdin lines to a topic, with throughput",
        description="Send records to a topic and report throughput and latency. Without "
        "--from-stdin, generated records (like kafka-producer-perf-test); with it, one record "
        "per line of stdin (like kafka-console-producer).",
    )
    parser.add_argument("topic")
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--num-records", type=int, default=100_000, help="generated records (not with --from-stdin)"
    )
    parser.add_argument(
        "--record-size",
        type=int,
        default=100,
        help="bytes per generated value (not with --from-stdin)",
    )
    parser.add_argument(
        "--key-pattern",
        metavar="PATTERN",
        help="give every record a key: PATTERN with {n} replaced by the record number, "
        "for example 'user-{n}' (default: no key, records spread over partitions)",
    )
    parser.add_argument("--acks", choices=("all", "1", "0"), default="all")
    parser.add_argument(
        "--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none"
    )
    parser.add_argument("--from-stdin", action="store_true", help="one record per line of stdin")
    parser.set_defaults(handler=run_command("produce", run))


def run(args: argparse.Namespace) -> int:
    if args.num_records < 0 or args.record_size < 0:
        raise CommandError("--num-records and --record-size must not be negative")
    key_of = _key_function(args.key_pattern)
    producer = Producer(
        args_client_config(
            args,
            **{
                "acks": args.acks,
                "compression.type": args.compression,
                "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            },
        )
    )
    topic_partitions(producer, args.topic)  # fail fast, not after the delivery timeout
    values = _stdin_values() if args.from_stdin else _generated(args.num_records, args.record_size)
    stats = DeliveryStats()
    progress = Progress()
    with SigintFlag() as interrupt:
        _send(producer, args.topic, values, key_of, stats, progress, interrupt)
        # Ctrl-C: what is in flight gets a short while (a second Ctrl-C: none), then is dropped.
        flush_s = INTERRUPTED_FLUSH_TIMEOUT_S if interrupt.requested else FLUSH_TIMEOUT_S
        deadline = time.monotonic() + flush_s
        while (
            producer.flush(PROGRESS_INTERVAL_S / 4) > 0
            and time.monotonic() < deadline
            and not interrupt.forced
        ):
            if progress.due():
                progress.say(stats.window_line())
        unflushed = len(producer)
        if unflushed and interrupt.requested:
            producer.purge()
            producer.poll(0)  # their delivery reports: failed, purged
            unflushed = len(producer)
    elapsed_s = time.monotonic() - progress.started_s
    print(stats.summary_line(elapsed_s))
    for text, count in stats.errors.items():
        print(f"odradek produce: {count} records failed: {text}", file=sys.stderr)
    if interrupt.requested:
        print(
            f"odradek produce: interrupted: {stats.delivered} of {stats.sent} records sent were "
            f"delivered, {stats.sent - stats.delivered} not",
            file=sys.stderr,
        )
        return INTERRUPTED_EXIT
    if stats.failed or unflushed:
        print(
            f"odradek produce: error: {stats.failed + unflushed} of {stats.sent} records "
            "not delivered",
            file=sys.stderr,
        )
        return 1
    return 0


def _send(producer, topic, values, key_of, stats, progress, interrupt: SigintFlag) -> None:
    """Hand every value to librdkafka, serving delivery reports; stop early on Ctrl-C."""
    for n, value in enumerate(values):
        if interrupt.requested:
            return
        callback = stats.callback(time.perf_counter_ns(), len(value))
        while True:
            try:
                producer.produce(topic, value, key_of(n), on_delivery=callback)
                break
            except BufferError:  # librdkafka's queue is full: serve delivery reports
                producer.poll(0.05)
                if progress.due():
                    progress.say(stats.window_line())
                if interrupt.requested:
                    return
        stats.sent += 1
        if n % POLL_EVERY_RECORDS == 0:
            producer.poll(0)
            if progress.due():
                progress.say(stats.window_line())


class DeliveryStats:
    """Counts and latencies from librdkafka's delivery reports (called from ``poll``/``flush``,
    on the calling thread: no locking needed)."""

    def __init__(self) -> None:
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self.delivered_bytes = 0
        self.latency_sum_ms = 0.0
        self.latency_max_ms = 0.0
        self.latencies_ms = array("d")
        self.errors: dict[str, int] = {}  # distinct delivery errors, how many records each
        self._window = [time.monotonic(), 0, 0, 0.0, 0.0]  # start, records, bytes, sum, max

    def callback(self, sent_ns: int, size: int):
        def delivered(error: KafkaError | None, _message) -> None:
            if error is not None:
                self.failed += 1
                text = describe_kafka_error(error)
                if text in self.errors or len(self.errors) < ERRORS_SHOWN_MAX:
                    self.errors[text] = self.errors.get(text, 0) + 1
                return
            latency_ms = (time.perf_counter_ns() - sent_ns) / 1e6
            self.delivered += 1
            self.delivered_bytes += size
            self.latency_sum_ms += latency_ms
            self.latency_max_ms = max(self.latency_max_ms, latency_ms)
            if len(self.latencies_ms) < LATENCY_SAMPLES_MAX:
                self.latencies_ms.append(latency_ms)
            window = self._window
            window[1] += 1
            window[2] += size
            window[3] += latency_ms
            window[4] = max(window[4], latency_ms)

        return delivered

    def window_line(self) -> str:
        """The records delivered since the last call, as kafka-producer-perf-test prints them."""
        start, records, size, latency_sum, latency_max = self._window
        now = time.monotonic()
        self._window = [now, 0, 0, 0.0, 0.0]
        elapsed_s = max(now - start, 1e-9)
        average = latency_sum / records if records else 0.0
        return (
            f"{records} records sent, {records / elapsed_s:.1f} records/s "
            f"({mib(size) / elapsed_s:.2f} MB/s), {average:.1f} ms avg latency, "
            f"{latency_max:.1f} ms max latency."
        )

    def summary_line(self, elapsed_s: float) -> str:
        elapsed_s = max(elapsed_s, 1e-9)
        average = self.latency_sum_ms / self.delivered if self.delivered else 0.0
        line = (
            f"{self.delivered} records sent, {self.delivered / elapsed_s:.1f} records/s "
            f"({mib(self.delivered_bytes) / elapsed_s:.2f} MB/s), {average:.2f} ms avg latency, "
            f"{self.latency_max_ms:.2f} ms max latency"
        )
        if self.latencies_ms:
            ordered = sorted(self.latencies_ms)
            marks = ", ".join(
                f"{ordered[min(len(ordered) - 1, int(len(ordered) * q))]:.1f} ms p{label}"
                for q, label in ((0.5, "50"), (0.95, "95"), (0.99, "99"), (0.999, "99.9"))
            )
            line += f", {marks}"
        return line + "."


def _key_function(pattern: str | None):
    if pattern is None:
        return lambda n: None
    try:
        pattern.format(n=0)
    except (KeyError, IndexError, ValueError) as e:
        raise CommandError(f"--key-pattern {pattern!r}: only {{n}} may be used ({e})") from e
    return lambda n: pattern.format(n=n).encode()


def _generated(count: int, size: int) -> Iterator[bytes]:
    payload = "".join(random.choices(string.ascii_uppercase, k=size)).encode()
    for _ in range(count):
        yield payload


def _stdin_values() -> Iterator[bytes]:
    for line in sys.stdin.buffer:
        yield line.rstrip(b"\r\n")
