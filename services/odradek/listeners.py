"""Binding a listener on port 0, and telling the process's launcher which ports it got.

Port 0 in ``listeners`` or ``odradek.admin.listener`` means "any free port". The process binds
one itself (``bind_any_port``): at random below the kernel's ephemeral range
(``ip_local_port_range``), retrying another port on EADDRINUSE, at most ``BIND_ATTEMPTS_MAX``
times. So no port is chosen by one process for another to bind later (that window is where
another process took it: a local cluster's controller once died of EADDRINUSE), and a port a
process keeps across restarts (a local broker restarted on its address) is never one the
kernel hands out meanwhile as an outgoing connection's source port, which it takes from the
ephemeral range. The bound port is what is advertised (``/brokers/ids/<id>``, ``/controller``).

``odradek.listeners.file``: once every listener is bound, the process writes there (atomically:
a temporary file, then a rename) the address each listener got::

    {"listeners": {"PLAINTEXT": "127.0.0.1:23817", "CONTROL_PLANE": "127.0.0.1:14402"},
     "admin": "127.0.0.1:30117"}

``admin`` is null when the admin listener is off. ``odradek local`` and the test clusters start
their processes on port 0 and read this file (``read_listeners_file``). Any thread.
"""

from __future__ import annotations

import errno
import json
import os
import random
import socket
from pathlib import Path

__all__ = [
    "BIND_ATTEMPTS_MAX",
    "PORT_RANGE_LOW",
    "bind_any_port",
    "ephemeral_range_start",
    "read_listeners_file",
    "write_listeners_file",
]

PORT_RANGE_LOW = 10_000
PORT_RANGE_HIGH = 32_768  # Linux's default ephemeral range starts here
BIND_ATTEMPTS_MAX = 200
_random = random.SystemRandom()


def ephemeral_range_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default if unreadable)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return PORT_RANGE_HIGH


def bind_any_port(host: str) -> socket.socket:
    """A TCP socket bound (not yet listening) to a free port of ``host`` below the ephemeral
    range, with SO_REUSEADDR as asyncio's servers set it. Raises ``OSError`` when every
    attempt found its port taken, or at once for any other bind error."""
    # the first address of the host (a name, an IPv4 or IPv6 address; empty: every interface)
    family, _, _, _, address = socket.getaddrinfo(
        host or "0.0.0.0", 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    bind_host = address[0]
    low = min(ephemeral_range_start(), PORT_RANGE_HIGH)
    for _ in range(BIND_ATTEMPTS_MAX):
        port = _random.randrange(PORT_RANGE_LOW, low)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind_host, port))
        except OSError as e:
            sock.close()
            if e.errno == errno.EADDRINUSE:
                continue
            raise
        return sock
    raise OSError(
        errno.EADDRINUSE,
        f"no free port on {bind_host} in [{PORT_RANGE_LOW}, {low}) after {BIND_ATTEMPTS_MAX} tries",
    )


def write_listeners_file(path: str, listeners: dict[str, str], admin: str | None) -> None:
    """Write the bound addresses to ``path`` (see the module's docstring); atomic."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps({"listeners": listeners, "admin": admin}) + "\n")
    os.replace(tmp, target)


def read_listeners_file(path: str | Path) -> tuple[dict[str, str], str | None] | None:
    """The listeners and admin address a process wrote; None while it has written nothing."""
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    return dict(raw["listeners"]), raw.get("admin")
