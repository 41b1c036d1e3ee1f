"""Hostile and careless connections against the broker's server: memory follows bytes received,
every limit holds, nothing hangs, fetched records never enter Python.

The broker runs in this process (``conftest.RunningBroker``: the real server, handlers and logs
on their own loop thread) so each test can read the server's own counters; clients speak over
real loopback sockets. ``test_hostile_connections.py`` does the same against a broker process.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import socket
import struct
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.broker import server as server_module
from odradek.broker.replica_manager import FetchResult
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import encode_request
from odradek.protocol.framing import LARGE_FRAME_FIRST_BYTES, encode_frame
from odradek.protocol.schemas import request_schema
from support.consuming import poll_messages
from support.netns import NetworkNamespace
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 10.0
POLL_S = 0.05
HUGE = 100 * 1024 * 1024  # a size prefix at socket.request.max.bytes


def frame(request: Any, correlation_id: int = 1) -> bytes:
    return b"".join(encode_frame([encode_request(request, correlation_id, "limits-test")]))


def api_versions(correlation_id: int = 1) -> bytes:
    return frame(request_schema(ApiKey.API_VERSIONS, 0)(), correlation_id)


def fetch(topic: str, max_wait_ms: int, correlation_id: int) -> bytes:
    module = importlib.import_module(request_schema(ApiKey.FETCH, 4).__module__)
    request = module.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(
            module.FetchTopic(
                topic=topic,
                partitions=(
                    module.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    )
    return frame(request, correlation_id)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """(correlation id, body) of the next response."""
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    data = recv_exactly(sock, size)
    return struct.unpack(">i", data[:4])[0], data[4:]


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError(f"closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def closed_by_broker(sock: socket.socket, within_s: float) -> bool:
    """True if the broker closes ``sock`` within ``within_s`` (reading and dropping anything)."""
    sock.settimeout(within_s)
    deadline = time.monotonic() + within_s
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


def abort(sock: socket.socket) -> None:
    """Close with a RST, as a crashed client's kernel would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def closed_count(broker, reason: str) -> float:
    return (
        broker.registry.get_sample_value("odradek_connections_closed_total", {"reason": reason})
        or 0.0
    )


def produce_and_consume(broker, n: int = 50, value: bytes = b"v" * 100) -> None:
    """A real client still gets its records in and out (partition 0 of the broker's topic)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
    tp = TopicPartition(broker.topic, 0)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "limits", "enable.auto.commit": False}
    )
    start = consumer.get_watermark_offsets(tp, timeout=WAIT_S)[1]
    for i in range(n):
        producer.produce(broker.topic, value=value + b"%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0
    consumer.assign([TopicPartition(broker.topic, 0, start)])
    got = [message.value() for message in poll_messages(consumer, n, WAIT_S)]
    consumer.close()
    assert got == [value + b"%d" % i for i in range(n)]


def test_huge_size_prefixes_cost_what_was_sent_and_the_pool_bounds_them(make_broker):
    pool_bytes = 4 * LARGE_FRAME_FIRST_BYTES
    broker = make_broker(queued_max_request_bytes=pool_bytes)
    attackers = [connect(broker.port) for _ in range(40)]
    for sock in attackers:
        sock.sendall(struct.pack(">i", HUGE) + os.urandom(1000))
    server = broker.server
    # Four of them got the first buffer of a large frame; the others wait for memory.
    wait_until(
        lambda: broker.call_sync(lambda: server.request_memory.waiting) == 36,
        "waiters",
        WAIT_S,
        poll_s=POLL_S,
    )
    assert broker.call_sync(lambda: server.request_memory.used) == pool_bytes
    # Small requests are not drawn from the pool: a real client is served meanwhile.
    produce_and_consume(broker)
    for sock in attackers:
        abort(sock)
    wait_until(
        lambda: broker.call_sync(lambda: server.request_memory.used) == 0,
        "memory back",
        WAIT_S,
        poll_s=POLL_S,
    )
    wait_until(
        lambda: broker.call_sync(lambda: len(server.connections)) == 0,
        "connections gone",
        WAIT_S,
        poll_s=POLL_S,
    )


def test_a_large_request_waits_for_memory_and_is_served_when_it_frees(make_broker):
    pool_bytes = 4 * LARGE_FRAME_FIRST_BYTES
    broker = make_broker(queued_max_request_bytes=pool_bytes)
    hogs = [connect(broker.port) for _ in range(4)]
    for hog in hogs:  # each fills its first buffer, then waits for 100 MiB it will never get
        hog.sendall(struct.pack(">i", HUGE) + os.urandom(LARGE_FRAME_FIRST_BYTES + 10))
    server = broker.server
    wait_until(
        lambda: broker.call_sync(lambda: server.request_memory.used) == pool_bytes,
        "the hogs holding the whole pool",
        WAIT_S,
        poll_s=POLL_S,
    )
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.size": 1_000_000}
    )
    for _ in range(300):  # about 300 KiB in one request: it needs the pool
        producer.produce(broker.topic, value=os.urandom(1000), partition=1)
    assert producer.flush(1.0) > 0  # stuck while the pool is held, not refused
    for hog in hogs:
        abort(hog)
    assert producer.flush(WAIT_S) == 0
    wait_until(
        lambda: broker.call_sync(lambda: server.request_memory.used) == 0,
        "memory back",
        WAIT_S,
        poll_s=POLL_S,
    )


def test_a_slowloris_request_is_cut_off(make_broker):
    broker = make_broker(receive_timeout_ms=1000)
    sock = connect(broker.port)
    request = api_versions()
    started = time.monotonic()
    closed = False
    for byte in request[:-1]:  # one byte every 100 ms: it would take seconds to arrive
        try:
            sock.send(bytes([byte]))
        except OSError:
            closed = True
            break
        if closed_by_broker(sock, 0.1):
            closed = True
            break
    assert closed and time.monotonic() - started < 5
    assert closed_count(broker, "receive_timeout") == 1


def test_idle_connections_are_closed_but_a_long_poll_is_not_idle(make_broker):
    broker = make_broker(idle_timeout_ms=800)
    idle = connect(broker.port)
    idle.sendall(api_versions())
    read_response(idle)
    polling = connect(broker.port)
    polling.sendall(fetch(broker.topic, max_wait_ms=2500, correlation_id=7))
    assert closed_by_broker(idle, 5.0)
    correlation_id, _ = read_response(polling)  # answered after its 2.5 s wait, not closed
    assert correlation_id == 7
    assert closed_count(broker, "idle") == 1
    assert closed_by_broker(polling, 5.0)  # and idle itself once answered


def test_queued_requests_never_exceed_queued_max_requests(make_broker):
    broker = make_broker(queued_max_requests=3)
    server = broker.server
    peak = []

    async def watch():
        highest = 0
        for _ in range(400):
            highest = max(highest, server.request_slots.used)
            await asyncio.sleep(0.005)
        peak.append(highest)

    watcher = asyncio.run_coroutine_threadsafe(watch(), broker.loop)
    clients = [connect(broker.port) for _ in range(4)]
    for n, sock in enumerate(clients):
        # A long poll first: every request behind it queues.
        pipeline = fetch(broker.topic, max_wait_ms=700, correlation_id=1000 + n)
        pipeline += b"".join(api_versions(correlation_id=i) for i in range(20))
        sock.sendall(pipeline)
    for n, sock in enumerate(clients):
        answered = [read_response(sock)[0] for _ in range(21)]
        assert answered == [1000 + n, *range(20)]  # every one answered, in order
    watcher.result(timeout=WAIT_S)
    assert 1 <= peak[0] <= 3


def test_a_failing_handler_closes_the_connection_and_is_counted(make_broker, monkeypatch):
    broker = make_broker()

    async def broken(ctx, request):
        raise RuntimeError("a bug in a handler")

    async def unencodable(ctx, request):
        return object()

    for handler, reason in ((broken, "handler_error"), (unencodable, "encode_error")):
        monkeypatch.setitem(server_module.HANDLERS, ApiKey.API_VERSIONS, handler)
        sock = connect(broker.port)
        sock.sendall(api_versions())
        assert closed_by_broker(sock, 5.0)  # not a silent hang
        assert closed_count(broker, reason) == 1
    monkeypatch.undo()
    healthy = connect(broker.port)  # the broker itself is fine
    healthy.sendall(api_versions(correlation_id=9))
    assert read_response(healthy)[0] == 9


def test_a_short_sendfile_closes_the_connection(make_broker, monkeypatch):
    broker = make_broker()
    produce_and_consume(broker, n=5)
    replicas = broker.replicas
    real_fetch = replicas.fetch

    async def overstated(requests, **kwargs):
        results = await real_fetch(requests, **kwargs)
        first = results[0]
        assert first.records is not None
        # As if the segment were truncated after the size went out: 1000 bytes will be missing.
        inflated = type(first.records)(
            first.records.file, first.records.position, first.records.size + 1000
        )
        return [FetchResult(first.topic, first.partition, records=inflated), *results[1:]]

    monkeypatch.setattr(replicas, "fetch", overstated)
    sock = connect(broker.port)
    sock.sendall(fetch(broker.topic, max_wait_ms=0, correlation_id=3))
    assert closed_by_broker(sock, 5.0)
    assert closed_count(broker, "short_sendfile") == 1


def test_fetched_records_never_enter_python(make_broker, monkeypatch):
    broker = make_broker()
    value = os.urandom(4096)
    produce_and_consume(broker, n=200, value=value)
    reads: list[int] = []
    sent: list[int] = []
    for name in ("read", "pread", "readv", "preadv"):
        real = getattr(os, name)

        def counting(*args, _real=real, **kwargs):
            result = _real(*args, **kwargs)
            reads.append(len(result) if isinstance(result, bytes) else int(result))
            return result

        monkeypatch.setattr(os, name, counting)
    real_sendfile = os.sendfile

    def counting_sendfile(*args, **kwargs):
        count = real_sendfile(*args, **kwargs)
        sent.append(count)
        return count

    monkeypatch.setattr(os, "sendfile", counting_sendfile)

    def no_fallback(*args, **kwargs):
        raise AssertionError("asyncio's sendfile fell back to reading the file into Python")

    monkeypatch.setattr(broker.loop, "_sock_sendfile_fallback", no_fallback, raising=False)
    produce_and_consume(broker, n=0)  # nothing new; then read everything from the start
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "nocopy", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(broker.topic, 0, 0)])
    got = len(poll_messages(consumer, 200, WAIT_S))
    consumer.close()
    assert got == 200
    assert sum(sent) >= 200 * len(value)  # the records left by sendfile
    assert max(reads, default=0) < 1024  # only batch headers (61 bytes) were read


HALF_OPEN_CLIENT = """
import socket, sys, time
sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
sock.sendall(bytes.fromhex(sys.argv[3]))
sock.recv(65536)
print("answered", flush=True)
time.sleep(60)
"""


def test_a_half_open_connection_is_closed_after_the_idle_timeout(make_broker):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    with NetworkNamespace(network="198.18", tag="odr") as namespace:
        broker = make_broker(host=namespace.host_address, idle_timeout_ms=1500)
        client = subprocess.Popen(
            [
                "ip", "netns", "exec", namespace.name, sys.executable, "-c", HALF_OPEN_CLIENT,
                namespace.host_address, str(broker.port), api_versions().hex(),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            assert client.stdout.readline().strip() == "answered"
            assert broker.call_sync(lambda: len(broker.server.connections)) == 1
            namespace.cut()
            client.kill()  # its FIN goes nowhere: the broker holds a half-open connection
            client.wait(timeout=10)
            wait_until(
                lambda: broker.call_sync(lambda: len(broker.server.connections)) == 0,
                "the half-open connection closed",
                WAIT_S,
                poll_s=POLL_S,
            )
            assert closed_count(broker, "idle") == 1
        finally:
            if client.poll() is None:
                client.kill()
                client.wait(timeout=10)


def fetch_every_partition(broker, partition_max_bytes: int, correlation_id: int) -> bytes:
    module = importlib.import_module(request_schema(ApiKey.FETCH, 4).__module__)
    request = module.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=broker.partitions * partition_max_bytes,
        isolation_level=0,
        topics=(
            module.FetchTopic(
                topic=broker.topic,
                partitions=tuple(
                    module.FetchPartition(
                        partition=p, fetch_offset=0, partition_max_bytes=partition_max_bytes
                    )
                    for p in range(broker.partitions)
                ),
            ),
        ),
    )
    return frame(request, correlation_id)


def test_a_client_gone_during_sendfile_is_a_peer_gone_close_not_a_bug(make_broker, caplog):
    """Issue 23, scenario 7: a consumer (or follower) that resets its connection while a large
    fetch answer is being sent was closed as ``write_error`` with a traceback, the log of a bug
    (asyncio's sendfile reports a peer gone before its first byte as "sendfile unavailable").
    It is the ordinary ``peer_gone``: counted, logged at INFO, no traceback."""
    broker = make_broker()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    value = os.urandom(64 * 1024)
    for p in range(broker.partitions):
        for _ in range(32):  # 2 MiB a partition: far more than the sockets' buffers
            producer.produce(broker.topic, value=value, partition=p)
    assert producer.flush(WAIT_S) == 0
    connections = 24
    for i in range(connections):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.settimeout(WAIT_S)
        sock.connect(("127.0.0.1", broker.port))
        sock.sendall(fetch_every_partition(broker, 4 << 20, correlation_id=i + 1))
        # Read a different part of the answer each time, so the reset lands anywhere in it:
        # before the answer, in a partition's header, inside or between sendfiles.
        recv_exactly(sock, (i * 97 * 1024) % (5 << 20))
        time.sleep(0.02)
        abort(sock)
    wait_until(
        lambda: closed_count(broker, "peer_gone") >= connections,
        f"{connections} peer_gone closes",
        WAIT_S,
        poll_s=POLL_S,
    )
    assert closed_count(broker, "write_error") == 0
    bugs = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert bugs == [], [r.getMessage() for r in bugs]
    produce_and_consume(broker, n=5)  # and the broker serves on
