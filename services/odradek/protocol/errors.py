"""Errors of the protocol layer, in Odradek's error tree.

Each names the Kafka error code it stands for, as every ``OdradekError`` does. What the server does
with them follows Kafka's ``SocketServer``:

- ``InvalidFrameError`` (a size prefix out of bounds) and ``InvalidRequestError`` (a header or body
  that does not parse): close the connection; nothing was decoded that could be answered.
- ``UnsupportedVersionError``: an ApiVersions request gets the KIP-511 fallback answer (error 35 in
  a v0 body, see ``apis.api_versions_fallback``); any other API is closed, as Kafka does.
- ``InvalidResponseError``: raised on the client side (controller, tests) for a response that does
  not parse.
"""

from __future__ import annotations

from typing import Any

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "ProtocolError",
    "InvalidRequestError",
    "InvalidFrameError",
    "UnsupportedVersionError",
    "InvalidResponseError",
]


class ProtocolError(OdradekError):
    """Bytes on the wire that this layer cannot turn into a message."""

    error_code = ErrorCode.invalid_request


class InvalidRequestError(ProtocolError):
    """A request whose header or body does not parse. ``header`` is set if the header did."""

    error_code = ErrorCode.invalid_request

    def __init__(self, message: str, header: Any = None):
        super().__init__(message)
        self.header = header  # a header.RequestHeader, or None (not imported: errors is lowest)


class InvalidFrameError(InvalidRequestError):
    """A size prefix below the smallest header or above ``socket.request.max.bytes``."""


class UnsupportedVersionError(ProtocolError):
    """An API key this broker does not serve, or a version outside its range.

    ``header`` is always set: the correlation id is what the KIP-511 answer needs.
    """

    error_code = ErrorCode.unsupported_version

    def __init__(self, message: str, header: Any):
        super().__init__(message)
        self.header = header  # a header.RequestHeader


class InvalidResponseError(ProtocolError):
    """A response (read by a client of ours) that does not parse."""

    error_code = ErrorCode.corrupt_message
