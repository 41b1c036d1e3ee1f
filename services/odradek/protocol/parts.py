"""An outgoing message as a list of parts: buffers, and file regions the server sends with sendfile.

A Fetch response carries record sets that already sit in segment files. The protocol layer never
reads them: a ``records`` field may hold any object with ``file``, ``position`` and ``size`` (the
storage engine's ``FileSlice`` is one), and ``writer``/``codec`` leave a hole for it, so an encoded
response is ``[bytes, region, bytes, region, ..., bytes]``. ``framing.encode_frame`` prefixes the
total size; the server writes the buffers and calls ``os.sendfile`` for each region, in order.

Values only; nothing here does I/O.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias, runtime_checkable

__all__ = ["FileRegion", "Part", "part_size", "is_buffer"]


@runtime_checkable
class FileRegion(Protocol):
    """``size`` bytes of ``file`` (an open file with ``fileno()``) from byte ``position``."""

    @property
    def file(self) -> Any: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...


Part: TypeAlias = bytes | bytearray | memoryview | FileRegion


def is_buffer(part: object) -> bool:
    return isinstance(part, bytes | bytearray | memoryview)


def part_size(part: Part) -> int:
    """Bytes this part puts on the wire."""
    if isinstance(part, memoryview):
        return part.nbytes
    if isinstance(part, bytes | bytearray):
        return len(part)
    return part.size
