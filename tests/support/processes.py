"""What a test reads of a process it started, from ``/proc``."""

from __future__ import annotations

__all__ = ["rss_bytes"]


def rss_bytes(pid: int) -> int:
    """The process's resident memory (``VmRSS``); ``AssertionError`` if it has none (gone)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")
