"""Errors of the client, in Odradek's error tree.

Each names the Kafka error code it stands for, so a caller (the controller's retry loop) asks
``exc.retriable`` rather than matching classes:

- ``ConnectionClosedError`` (network_exception, retriable): the connection could not be opened, or
  closed before the response came (by the broker, by ``close()``, or after another request's
  timeout or protocol error). Reconnect and retry.
- ``RequestTimeoutError`` (request_timed_out, retriable): no response within the request's
  timeout. The connection is closed with it, since the stream is out of step with the requests.
- ``ProtocolError`` (corrupt_message, retriable, as Kafka's): a response that does not fit the
  requests sent (wrong correlation id, unsolicited, size out of bounds, a body that does not
  parse). The connection is closed and every pending request fails with it. Not to be confused
  with ``odradek.protocol.errors.ProtocolError``, the server side's bytes-it-cannot-read; a body
  that does not parse is chained here from that tree's ``InvalidResponseError``.
- ``RequestTooLargeError`` (message_too_large): a request above what the broker accepts
  (``socket.request.max.bytes``); nothing was sent.
- ``NoCommonVersionError`` (unsupported_version): the broker and this client share no version of
  an API.
- ``ErrorResponseError``: a response whose top-level error code the client cannot act on (for
  ApiVersions, anything but 0 and 35); carries the broker's code.

The admin client (``admin``, ``coordinators``) answers in a tree of its own, under
``AdminError`` (``odradek.ops`` exports it as ``OpsError`` and roots its own errors there):

- ``ClusterRequestError``: the cluster refused a request; carries the broker's ``error_code``
  and message, and per partition the refusals (``refusals``: "topic-p" -> (code, message)).
- ``UnsupportedByClusterError`` (unsupported_version): the cluster does not serve an API the
  caller needs (a broker without AlterPartitionReassignments, say).
- ``ClusterUnreachableError`` (network_exception): no broker of the bootstrap list answered.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "ClientError",
    "ConnectionClosedError",
    "RequestTimeoutError",
    "ProtocolError",
    "RequestTooLargeError",
    "NoCommonVersionError",
    "ErrorResponseError",
    "AdminError",
    "ClusterRequestError",
    "UnsupportedByClusterError",
    "ClusterUnreachableError",
]


class ClientError(OdradekError):
    """Base of the client's errors."""


class ConnectionClosedError(ClientError):
    """The connection failed to open, or closed before this request's response."""

    error_code = ErrorCode.network_exception


class RequestTimeoutError(ClientError):
    """No response within the request's timeout; the connection was closed."""

    error_code = ErrorCode.request_timed_out


class ProtocolError(ClientError):
    """The broker's bytes do not answer the requests sent; the connection was closed."""

    error_code = ErrorCode.corrupt_message


class RequestTooLargeError(ClientError):
    """A request larger than the broker accepts; it was not sent."""

    error_code = ErrorCode.message_too_large


class NoCommonVersionError(ClientError):
    """No version of an API is known to both sides."""

    error_code = ErrorCode.unsupported_version


class ErrorResponseError(ClientError):
    """The broker answered with an error code; ``error_code`` is the broker's."""

    def __init__(self, message: str, error_code: ErrorCode):
        super().__init__(message)
        self.error_code = error_code


class AdminError(OdradekError):
    """Base of the admin client's errors, and of the cluster operations' (``ops.OpsError``)."""


class ClusterRequestError(AdminError):
    """The cluster answered a request with an error code."""

    def __init__(
        self,
        message: str,
        error_code: ErrorCode = ErrorCode.unknown_server_error,
        refusals: Mapping[str, tuple[ErrorCode, str | None]] | None = None,
    ):
        super().__init__(message)
        self.error_code = error_code
        self.refusals = dict(refusals or {})


class UnsupportedByClusterError(AdminError):
    error_code = ErrorCode.unsupported_version


class ClusterUnreachableError(AdminError):
    error_code = ErrorCode.network_exception
