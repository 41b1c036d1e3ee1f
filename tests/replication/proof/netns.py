"""A network namespace joined to ours by one veth pair, to cut a broker off and let it back.

The link is a /30 in 198.18.0.0/15 (reserved for benchmarking, RFC 2544, never routed): our end
``host_address``, the namespace's end ``ns_address``. A test runs ZooKeeper, the controllers'
peers and the other brokers on ``host_address`` and one broker inside the namespace on
``ns_address``; ``cut`` takes the namespace's end of the link down, so nothing crosses in either
direction (no FIN, no reset: the peers see silence, as with a pulled cable), and ``heal`` brings
it back up. Nothing here routes anywhere else: the two addresses are all there is.

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
    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.name = f"odrf-{suffix}"
        self.host_side, self.ns_side = f"odrfh{suffix}", f"odrfn{suffix}"
        # 198.19.<octet>.0/30: the other half of the benchmarking range from the connection
        # limit tests' (198.18.x), so the two never collide when run at the same time.
        octet = int(suffix[:2], 16)
        self.host_address, self.ns_address = f"198.19.{octet}.1", f"198.19.{octet}.2"

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
        subprocess.run(["ip", "link", "del", self.host_side], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=10)
