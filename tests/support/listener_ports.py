"""What a running member bound, as it wrote it to its ``listeners.json``
(``odradek.listeners``): the address and the port of each listener by name, and its admin (HTTP)
address. The file is written once the member listens, so a member the cluster fixture has
started has it. Reads only: any number of tests may ask at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odradek.listeners import read_listeners_file
from odradek.local.cluster import LISTENERS_FILE

__all__ = ["admin_host_port", "listener_addresses", "listener_ports"]


def _bound(member: Any) -> tuple[dict[str, str], str | None]:
    bound = read_listeners_file(Path(member.data_dir) / LISTENERS_FILE)
    assert bound is not None, f"{member.data_dir} has no {LISTENERS_FILE}"
    return bound


def listener_addresses(member: Any) -> dict[str, str]:
    """Listener name -> the ``host:port`` ``member`` (a ``ClusterState`` member) bound for it."""
    return _bound(member)[0]


def listener_ports(member: Any) -> dict[str, int]:
    """Listener name -> the port ``member`` bound for it."""
    return {name: int(address.rsplit(":", 1)[1]) for name, address in _bound(member)[0].items()}


def admin_host_port(member: Any) -> str:
    """``host:port`` of ``member``'s admin (metrics, health) listener."""
    address = _bound(member)[1]
    assert address is not None, f"{member.data_dir}: no admin listener bound"
    return address
