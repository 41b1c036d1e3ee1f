"""A connection closed for a bad frame is counted (and logged) once in
odradek_connections_closed_total, however many requests it had queued (found by the fuzz).
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from odradek.protocol.codec import encode_request
from odradek.protocol.schemas import request_schema
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 10.0


def closed_count(broker, reason: str) -> float:
    sample = broker.registry.get_sample_value(
        "odradek_connections_closed_total", {"reason": reason}
    )
    return sample or 0.0


@pytest.mark.parametrize("queued", [0, 1, 5])
def test_a_bad_frame_behind_queued_requests_closes_and_counts_once(broker, queued, caplog):
    request = encode_request(request_schema(18, 0)(), 1, "fuzz")
    frame = struct.pack(">i", len(request)) + request
    bad = struct.pack(">i", 6) + b"abcdef"  # below the smallest request header
    before = closed_count(broker, "malformed_frame")
    with socket.create_connection(("127.0.0.1", broker.port), timeout=WAIT_S) as sock:
        sock.sendall(frame * queued + bad)
        while sock.recv(65536):  # until the broker closes the connection
            pass
    wait_until(
        lambda: closed_count(broker, "malformed_frame") != before,
        "a malformed_frame close counted",
        WAIT_S,
        poll_s=0.05,
    )
    time.sleep(0.2)  # room for any further count
    assert closed_count(broker, "malformed_frame") == before + 1
    assert sum("(malformed_frame)" in r.getMessage() for r in caplog.records) == 1
