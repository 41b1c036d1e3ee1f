"""How late a broker answers: ApiVersions round trips on a connection of its own, back to back
(``Prober``), and the broker's own count of late loop wake-ups (``lag_samples_over``; between two
readings of its histogram, ``lag_buckets``), for the tests that check a broker's event loop is
never held long."""

from __future__ import annotations

import socket
import struct
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from odradek.protocol.codec import encode_request
from odradek.protocol.framing import encode_frame
from odradek.protocol.schemas import request_schema

__all__ = [
    "Prober",
    "lag_buckets",
    "lag_samples_between",
    "lag_samples_over",
    "worst_lag_between",
]


class Prober:
    """ApiVersions round trips on a connection of its own, back to back, until stopped."""

    def __init__(self, address: str):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request = b"".join(
            encode_frame([encode_request(request_schema(18, 0)(), 1, "prober")])
        )
        self.round_trips: list[float] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for _ in range(1_000_000):
            if self.stopping.is_set():
                return
            started = time.perf_counter()
            self.sock.sendall(self.request)
            size = struct.unpack(">i", self._recv(4))[0]
            self._recv(size)
            self.round_trips.append(time.perf_counter() - started)
            time.sleep(0.002)

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the prober's connection")
            data += chunk
        return data

    def __enter__(self) -> Prober:
        self.thread.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.3)
        self.stopping.set()
        self.thread.join(timeout=30)
        self.sock.close()


def lag_buckets(member, timeout_s: float = 5.0) -> dict[float, float]:
    """The broker's ``odradek_event_loop_lag_seconds`` so far: for each bucket's upper edge
    (``inf`` last), how many samples were at most that late."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=timeout_s) as response:
        text = response.read().decode()
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "odradek_event_loop_lag_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                buckets[float(sample.labels["le"])] = sample.value
    return dict(sorted(buckets.items()))


def lag_samples_between(
    before: dict[float, float], after: dict[float, float], threshold_s: float
) -> float:
    """How many samples taken between two ``lag_buckets`` were above ``threshold_s`` (a
    bucket edge)."""
    inf = float("inf")
    return (after.get(inf, 0) - before.get(inf, 0)) - (
        after[threshold_s] - before.get(threshold_s, 0)
    )


def worst_lag_between(before: dict[float, float], after: dict[float, float]) -> float:
    """The smallest bucket edge that every sample between two ``lag_buckets`` stayed within
    (``inf``: some sample was later than the largest edge; 0: no sample)."""
    total = after.get(float("inf"), 0) - before.get(float("inf"), 0)
    if not total:
        return 0.0
    return next(le for le, n in after.items() if n - before.get(le, 0) >= total)


def lag_samples_over(member, threshold_s: float) -> float:
    """How many event-loop lag samples so far were above ``threshold_s``."""
    return lag_samples_between({}, lag_buckets(member), threshold_s)
