"""Request and response headers: the part of a message read before its API is known.

Request header v1 is ``api_key int16, api_version int16, correlation_id int32, client_id``; v2
(flexible API versions) adds a tagged-field section. ``client_id`` is an int16-length nullable
string in both: Kafka keeps it non-compact so that any broker can read the header of any request.
Response header v0 is ``correlation_id int32``; v1 adds a tagged-field section. Which version an
API uses comes from ``schemas`` (kio's schemas), never from a table here.

``parse_request_header`` succeeds for any API key and version, supported or not: KIP-511 needs
the correlation id of an ApiVersions request at a version the broker does not know. It is written
by hand (a ``struct`` and a loop) because kio's header reader raises on unknown tagged fields and
cannot parse a header whose version it does not know; ``client_id`` bytes that are not UTF-8 are
replaced, not refused, as Kafka's Java decoder does.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import NamedTuple

from odradek.protocol import schemas
from odradek.protocol.errors import InvalidRequestError, InvalidResponseError
from odradek.protocol.writer import write_uvarint

__all__ = [
    "REQUEST_HEADER_MIN_BYTES",
    "RESPONSE_HEADER_MIN_BYTES",
    "RequestHeader",
    "parse_request_header",
    "encode_request_header",
    "encode_response_header",
    "parse_response_header",
]

_FIXED = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
REQUEST_HEADER_MIN_BYTES = _FIXED.size + _INT16.size  # a null client_id: 10 bytes
RESPONSE_HEADER_MIN_BYTES = _INT32.size
_MAX_TAGGED_FIELDS = 64  # Kafka defines none in the request header; a bound for hostile input


class RequestHeader(NamedTuple):
    """A parsed request header (a NamedTuple: one is built per request, cheaply)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int  # 1 or 2
    size: int  # bytes the header takes: the body starts here
    tagged_fields: tuple[tuple[int, bytes], ...] = ()  # (tag, raw value); none are defined

    @property
    def response_header_version(self) -> int:
        return schemas.response_header_version(self.api_key, self.api_version)


@lru_cache(maxsize=1024)  # bounded: the keys come off the wire
def _header_version(api_key: int, api_version: int) -> int:
    return schemas.request_header_version(api_key, api_version)


def _read_uvarint(frame: bytes | memoryview, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    for index in range(pos, min(pos + 5, len(frame))):
        byte = frame[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1
        shift += 7
    raise ValueError(f"unsigned varint at byte {pos} is truncated or longer than 5 bytes")


def _parse(frame: bytes | memoryview) -> RequestHeader:
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    pos = _FIXED.size
    (length,) = _INT16.unpack_from(frame, pos)
    pos += _INT16.size
    client_id = None
    if length >= 0:
        if pos + length > len(frame):
            raise ValueError(f"client_id of {length} bytes overruns the frame")
        client_id = bytes(frame[pos : pos + length]).decode("utf-8", "replace")
        pos += length
    elif length != -1:
        raise ValueError(f"client_id length {length}")
    header_version = _header_version(api_key, api_version)
    tagged: list[tuple[int, bytes]] = []
    if header_version >= 2 and frame[pos] == 0:  # no tagged fields: the usual case
        pos += 1
    elif header_version >= 2:
        count, pos = _read_uvarint(frame, pos)
        if count > _MAX_TAGGED_FIELDS:
            raise ValueError(f"{count} tagged fields in a request header")
        for _ in range(count):
            tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            if pos + size > len(frame):
                raise ValueError(f"tagged field {tag} overruns the frame")
            tagged.append((tag, bytes(frame[pos : pos + size])))
            pos += size
    return RequestHeader(
        api_key, api_version, correlation_id, client_id, header_version, pos, tuple(tagged)
    )


def parse_request_header(frame: bytes | memoryview) -> RequestHeader:
    """The header at the start of a request frame (without its size prefix).

    Raises ``InvalidRequestError`` (with no header) if it does not parse.
    """
    try:
        return _parse(frame)
    except (struct.error, ValueError, IndexError) as e:
        raise InvalidRequestError(f"malformed request header: {e}") from e


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    out = bytearray(_FIXED.pack(api_key, api_version, correlation_id))
    if client_id is None:
        out += _INT16.pack(-1)
    else:
        raw = client_id.encode()
        out += _INT16.pack(len(raw))
        out += raw
    if schemas.request_header_version(api_key, api_version) >= 2:
        write_uvarint(out, 0)
    return bytes(out)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """v0: the correlation id; v1: and an empty tagged-field section."""
    if header_version == 0:
        return _INT32.pack(correlation_id)
    return _INT32.pack(correlation_id) + b"\x00"


def parse_response_header(frame: bytes | memoryview, header_version: int) -> tuple[int, int]:
    """(correlation_id, size) of a response header; tagged fields are skipped."""
    try:
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        pos = _INT32.size
        if header_version >= 1:
            count, pos = _read_uvarint(frame, pos)
            for _ in range(min(count, _MAX_TAGGED_FIELDS + 1)):
                _tag, pos = _read_uvarint(frame, pos)
                size, pos = _read_uvarint(frame, pos)
                pos += size
            if count > _MAX_TAGGED_FIELDS or pos > len(frame):
                raise ValueError("response header tagged fields overrun the frame")
        return correlation_id, pos
    except (struct.error, ValueError, IndexError) as e:
        raise InvalidResponseError(f"malformed response header: {e}") from e
