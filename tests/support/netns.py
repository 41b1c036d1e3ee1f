"""A network namespace joined to ours by one veth pair: a process in it can vanish (``cut``)
without a FIN or a reset reaching us, as with a pulled cable, and come back (``heal``).

The link is a /30 in 198.18.0.0/15 (reserved for benchmarking, RFC 2544, never routed): our end
``host_address``, the namespace's end ``ns_address``. The replication fault tests run one broker
inside the namespace and the rest of the cluster on ``host_address`` (198.19.x); the connection
limit tests run half-open clients in it (198.18.x), so the two never collide when run at the same
time. Nothing here routes anywhere else: the two addresses are all there is.

Needs root (``ip netns``); ``__exit__`` deletes the link and the namespace whatever happened, so
use it in a ``with``. Not thread-safe: one test owns it.
"""

from __future__ import annotations

import os
import subprocess
import uuid

IP_TIMEOUT_S = 10


def can_make_namespaces() -> bool:
    return (
        os.geteuid() == 0 and subprocess.run(["which", "ip"], capture_output=True).returncode == 0
    )


class NetworkNamespace:
    def __init__(self, network: str = "198.19", tag: str = "odrf") -> None:
        """``network``: the first two octets of the link's /30 (198.18 or 198.19); ``tag``
        prefixes the namespace's and the interfaces' names (at most 4 characters)."""
        suffix = uuid.uuid4().hex[:6]
        self.name = f"{tag}-{suffix}"
        self.host_side, self.ns_side = f"{tag}h{suffix}", f"{tag}n{suffix}"
        octet = int(suffix[:2], 16)
        self.host_address, self.ns_address = f"{network}.{octet}.1", f"{network}.{octet}.2"

    def _ip(self, *args: str, inside: bool = False) -> None:
        command = ["ip", "netns", "exec", self.name, "ip", *args] if inside else ["ip", *args]
        subprocess.run(command, check=True, capture_output=True, timeout=IP_TIMEOUT_S)

    def __enter__(self) -> NetworkNamespace:
        self._ip("netns", "add", self.name)
        try:
            self._ip("link", "add", self.host_side, "type", "veth", "peer", "name", self.ns_side)
            self._ip("link", "set", self.ns_side, "netns", self.name)
            self._ip("addr", "add", f"{self.host_address}/30", "dev", self.host_side)
            self._ip("link", "set", self.host_side, "up")
            self._ip("addr", "add", f"{self.ns_address}/30", "dev", self.ns_side, inside=True)
            self._ip("link", "set", self.ns_side, "up", inside=True)
            self._ip("link", "set", "lo", "up", inside=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def cut(self) -> None:
        """Take the namespace's end of the link down: nothing crosses any more."""
        self._ip("link", "set", self.ns_side, "down", inside=True)

    def heal(self) -> None:
        """Bring the namespace's end of the link back up (its address stays)."""
        self._ip("link", "set", self.ns_side, "up", inside=True)

    def __exit__(self, *exc: object) -> None:
        for command in (["link", "del", self.host_side], ["netns", "del", self.name]):
            subprocess.run(["ip", *command], capture_output=True, timeout=IP_TIMEOUT_S)
