"""Kafka requests over a plain blocking socket with the project's codec, for tests that must
control every frame on a connection (SASL exchanges, re-authentication): ``send`` a request,
``receive`` the next answer, ``read_exactly`` raw bytes; ``open_idle`` a connection that sends
nothing and ``closed`` whether the peer has closed it (connection floods). The socket's own
timeout bounds each read."""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol.codec import decode_response, encode_request

__all__ = ["closed", "open_idle", "read_exactly", "receive", "send"]


def send(sock: socket.socket, request: Any, correlation_id: int, client_id: str = "raw") -> None:
    frame = encode_request(request, correlation_id, client_id)
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def receive(sock: socket.socket, api_key: int, version: int) -> Any:
    """The body of the next answer on ``sock``, to a request of ``api_key`` v``version``."""
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    return decode_response(api_key, version, read_exactly(sock, size)).body


def read_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes (answers of tens of MiB too: read in chunks of at most 1 MiB, joined once);
    ``ConnectionError`` if the peer closes first."""
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def open_idle(address: str) -> socket.socket:
    """A connection to ``host:port`` that sends nothing (5 s to connect)."""
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def closed(sock: socket.socket) -> bool:
    """Whether the peer has closed ``sock`` (or reset it), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
