"""A broker process under hostile connections keeps its memory bounded and its real clients
served, and closes idle, slow and vanished connections.

One broker and a controller run as real processes (``odradek local up``, the package's
``hardened_broker``) with small limits: ``queued.max.request.bytes`` 128 MiB,
``connections.max.idle.ms`` 3 s and ``odradek.socket.request.receive.timeout.ms`` 6 s. From
this process, hundreds of connections then announce 100 MiB requests and send a little of them,
fill the request memory pool and wait, trickle requests a byte at a time, or connect, send and
reset in a loop. Meanwhile the broker's resident memory is read from ``/proc/<pid>/status`` and
a confluent-kafka producer measures its round trips. The bound on memory growth is the pool
plus every connection's read buffer plus slack for the interpreter, far below what announced
sizes would cost (250 x 100 MiB).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import struct
import threading
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek.local.cluster import pid_alive
from odradek.protocol.codec import encode_request
from odradek.protocol.framing import encode_frame
from odradek.protocol.schemas import request_schema
from support.consuming import poll_messages
from support.processes import rss_bytes
from support.waiting import wait_until

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
POOL_BYTES = 128 * MIB  # as the hardened_broker fixture configures it
IDLE_MS = 3_000
HUGE = 100 * MIB  # announced by every attacking frame: socket.request.max.bytes
PARTIAL_FRAMES = 250  # connections that announce HUGE and send 1 KiB of it
POOL_FILLERS = 40  # connections that send 200 KiB of a HUGE frame (a first buffer, then wait)
SLOWLORIS = 100  # connections that trickle a valid request, a byte every 200 ms
CHURN_ROUNDS = 1_500  # connect, send 32 KiB of a HUGE frame, reset
READ_BUFFER_BYTES = 64 * 1024
# The pool, every attacking connection's read buffer and its bookkeeping (~32 KiB measured),
# and 48 MiB for the interpreter's own growth under load.
RSS_GROWTH_MAX = POOL_BYTES + (PARTIAL_FRAMES + POOL_FILLERS + SLOWLORIS) * 96 * 1024 + 48 * MIB
LATENCY_P99_MAX_S = 0.25  # a produce round trip under attack (2 ms without, 14 ms with)
WAIT_S = 30.0


@pytest.fixture
def broker(hardened_broker):
    return hardened_broker


def closed_counts(member) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=5) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "odradek_connections_closed":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    counts[sample.labels["reason"]] = sample.value
    return counts


def open_connections(member, listener: str = "PLAINTEXT") -> float:
    """Open connections on the broker's client listener, from its own gauge."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "odradek_connections":
            return next(s.value for s in family.samples if s.labels["listener"] == listener)
    raise AssertionError("no odradek_connections")


def produce_round_trips(bootstrap: str, topic: str, count: int) -> list[float]:
    """Seconds for each of ``count`` produce requests sent one at a time (acks=all)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    times = []
    for i in range(count):
        started = time.perf_counter()
        producer.produce(topic, value=b"probe %d" % i)
        assert producer.flush(10) == 0
        times.append(time.perf_counter() - started)
    return times


def p99(times: list[float]) -> float:
    return statistics.quantiles(times, n=100)[98]


class Attack:
    """The hostile connections, on an event loop thread of their own; ``stop`` closes them."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.writers: list[asyncio.StreamWriter] = []
        self.churned = 0
        self.trickling = True

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self.loop).result(timeout=60)
        self.churn = asyncio.run_coroutine_threadsafe(self._churn(), self.loop)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self.writers.append(writer)
        return reader, writer

    async def _open(self) -> None:
        prefix = struct.pack(">i", HUGE)
        for _ in range(PARTIAL_FRAMES):
            _, writer = await self._connect()
            writer.write(prefix + os.urandom(1024))
        for _ in range(POOL_FILLERS):
            _, writer = await self._connect()
            writer.write(prefix + os.urandom(200 * 1024))
        request = b"".join(encode_frame([encode_request(request_schema(18, 0)(), 1, "slowloris")]))
        for _ in range(SLOWLORIS):
            _, writer = await self._connect()
            asyncio.ensure_future(self._trickle(writer, request))
        for writer in self.writers:
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    async def _trickle(self, writer: asyncio.StreamWriter, request: bytes) -> None:
        for byte in request[:-1]:
            if not self.trickling or writer.is_closing():
                return
            writer.write(bytes([byte]))
            await asyncio.sleep(0.2)

    async def _churn(self) -> None:
        payload = struct.pack(">i", HUGE) + os.urandom(32 * 1024)
        for _ in range(CHURN_ROUNDS):
            try:
                _, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            writer.write(payload)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()  # a reset, as a crashed client's kernel sends
            self.churned += 1

    def stop_trickling(self) -> None:
        self.trickling = False

    def close(self) -> None:
        async def close_all() -> None:
            for writer in self.writers:
                writer.transport.abort()

        with contextlib.suppress(Exception):
            self.churn.cancel()
        asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)


def test_hostile_connections_cannot_exhaust_memory_or_starve_clients(broker):
    member, bootstrap = broker
    topic = f"hostile-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=WAIT_S)
    produce_round_trips(bootstrap, topic, 1)  # waits for the new topic's leader
    before = produce_round_trips(bootstrap, topic, 100)
    baseline_rss = rss_bytes(member.pid)

    host, port = member.address.rsplit(":", 1)
    attack = Attack(host, int(port))
    peak_rss = [baseline_rss]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak_rss.append(rss_bytes(member.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        attack.start()
        during = produce_round_trips(bootstrap, topic, 300)
        attack.churn.result(timeout=120)
    finally:
        sampling.set()
        sampler.join(timeout=10)
    try:
        growth = max(peak_rss) - baseline_rss
        print(
            f"rss {baseline_rss / MIB:.0f} MiB before, +{growth / MIB:.0f} MiB at most under "
            f"attack; produce p50/p99 {statistics.median(before) * 1000:.1f}/"
            f"{p99(before) * 1000:.1f} ms before, {statistics.median(during) * 1000:.1f}/"
            f"{p99(during) * 1000:.1f} ms during"
        )
        assert growth < RSS_GROWTH_MAX, (
            f"resident memory grew by {growth / MIB:.0f} MiB under attack "
            f"(bound {RSS_GROWTH_MAX / MIB:.0f} MiB)"
        )
        assert p99(during) < LATENCY_P99_MAX_S, (
            f"produce p99 {p99(during) * 1000:.0f} ms under attack, "
            f"{p99(before) * 1000:.0f} ms before"
        )
        assert attack.churned == CHURN_ROUNDS

        # Slow and partial requests are cut off by the receive timeout; the clients that were
        # paused waiting for memory when they reset are found too. Nothing stays open.
        attack.stop_trickling()
        wait_until(lambda: open_connections(member) <= 2, "the attack's connections closed", WAIT_S)
        counts = closed_counts(member)
        assert counts.get("receive_timeout", 0) >= PARTIAL_FRAMES + SLOWLORIS
        assert pid_alive(member.pid)
    finally:
        attack.close()

    # Idle connections, and ones whose client stopped talking without closing, go after
    # connections.max.idle.ms.
    silent = [socket.create_connection((host, int(port)), timeout=5) for _ in range(20)]
    try:
        idle_before = closed_counts(member).get("idle", 0)
        wait_until(
            lambda: closed_counts(member).get("idle", 0) >= idle_before + 20,
            "idle connections closed",
            IDLE_MS / 1000 + 10,
        )
    finally:
        for sock in silent:
            sock.close()

    # And the broker still serves its clients as before.
    after = produce_round_trips(bootstrap, topic, 50)
    assert p99(after) < LATENCY_P99_MAX_S
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "hostile", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = len(poll_messages(consumer, 451, WAIT_S))
    consumer.close()
    assert received == 1 + 100 + 300 + 50
