"""Whole messages: a request frame to (header, body), a response body to bytes, and back.

Server side: ``decode_request`` parses the header, refuses an API or version outside
``apis.SUPPORTED_VERSIONS`` with ``UnsupportedVersionError`` (carrying the header, for KIP-511),
and reads the body with ``reader`` (bounded; a Produce request's record sets come out as read-only
``memoryview`` slices of the frame, not copies). Any malformation is ``InvalidRequestError``,
never an ``IndexError`` or ``struct.error``. Bytes left over after the body are ignored, as Kafka
ignores them (librdkafka's AdminClient sends some).
``encode_response`` / ``encode_response_parts`` write the response header the API's schema calls
for (v0 for ApiVersions whatever the version) and the body with ``writer``. A Fetch response whose
``records`` fields hold file regions comes out as parts, with the regions left for ``sendfile``.
Frame size prefixes are ``framing``'s business.

Client side (the controller talks to brokers in Kafka's protocol, and tests use it):
``encode_request`` and ``decode_response``. Like Kafka's clients, ``decode_response`` reads an
ApiVersions response that carries UNSUPPORTED_VERSION as v0, whatever version was asked for.

Bodies are kio's schema dataclasses. Pure functions; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from odradek.errors import ErrorCode
from odradek.protocol import apis, schemas
from odradek.protocol.errors import (
    InvalidRequestError,
    InvalidResponseError,
    UnsupportedVersionError,
)
from odradek.protocol.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)
from odradek.protocol.parts import Part
from odradek.protocol.reader import MalformedError, read_entity
from odradek.protocol.writer import OutBuffer, entity_writer

__all__ = [
    "DecodedRequest",
    "DecodedResponse",
    "decode_request",
    "encode_response",
    "encode_response_parts",
    "encode_request",
    "decode_response",
]


class DecodedRequest(NamedTuple):
    header: RequestHeader
    body: Any  # the kio request dataclass for (header.api_key, header.api_version)


class DecodedResponse(NamedTuple):
    correlation_id: int
    body: Any  # the kio response dataclass


_UNSUPPORTED_VERSION = ErrorCode.unsupported_version.to_bytes(2, "big")


def _view(frame: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view if view.readonly else view.toreadonly()


def decode_request(
    frame: bytes | bytearray | memoryview,
    supported: Mapping[int, tuple[int, int]] = apis.SUPPORTED_VERSIONS,
) -> DecodedRequest:
    """A request frame (without its size prefix). Raises ``InvalidRequestError`` or
    ``UnsupportedVersionError`` (for what ``supported``, the broker's table by default, lacks)."""
    view = _view(frame)
    header = parse_request_header(view)
    if not apis.is_supported(header.api_key, header.api_version, supported):
        raise UnsupportedVersionError(
            f"api key {header.api_key} v{header.api_version} is not served", header
        )
    schema = schemas.request_schema(header.api_key, header.api_version)
    try:
        body, end = read_entity(schema, view, header.size)
    except MalformedError as e:
        raise InvalidRequestError(
            f"malformed {schema.__name__} v{header.api_version}: {e}", header
        ) from e
    # Bytes after the body are ignored, as Kafka's own parser ignores them: librdkafka 2.16's
    # AdminClient sends a Metadata v12 request with three of them, and real brokers answer it.
    return DecodedRequest(header, body)


def _is_api_versions_fallback(response: Any) -> bool:
    return (
        response.__api_key__ == apis.ApiKey.API_VERSIONS
        and response.__version__ == 0
        and response.error_code == ErrorCode.unsupported_version
    )


def encode_response_parts(header: RequestHeader, response: Any) -> list[Part]:
    """Response header and body as parts: buffers, and the file regions of ``records`` fields."""
    api_key, version = int(response.__api_key__), int(response.__version__)
    if api_key != header.api_key or (
        version != header.api_version and not _is_api_versions_fallback(response)
    ):
        raise ValueError(
            f"{type(response).__name__} v{version} does not answer api key {header.api_key} "
            f"v{header.api_version}"
        )
    header_bytes = encode_response_header(
        header.correlation_id, schemas.response_header_version(api_key, version)
    )
    out = OutBuffer(header_bytes)
    entity_writer(type(response))(out, response)
    return out.parts()


def encode_response(header: RequestHeader, response: Any) -> bytes:
    """Response header and body as bytes (``records`` fields must hold bytes, not regions)."""
    parts = encode_response_parts(header, response)
    if len(parts) != 1 or not isinstance(parts[0], bytes):
        raise TypeError("the response holds file regions: use encode_response_parts")
    return parts[0]


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Request header and body (no size prefix), as a client sends them."""
    api_key, version = int(request.__api_key__), int(request.__version__)
    out = OutBuffer(encode_request_header(api_key, version, correlation_id, client_id))
    entity_writer(type(request))(out, request)
    if out.holes:
        raise TypeError("a request cannot carry file regions")
    return bytes(out)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> DecodedResponse:
    """A response frame (without its size prefix) to a request of ``api_key`` v``api_version``.

    Raises ``InvalidResponseError``.
    """
    view = _view(frame)
    correlation_id, pos = parse_response_header(
        view, schemas.response_header_version(api_key, api_version)
    )
    if api_key == apis.ApiKey.API_VERSIONS and view[pos : pos + 2] == _UNSUPPORTED_VERSION:
        api_version = 0  # KIP-511: the broker answered in v0
    try:
        schema = schemas.response_schema(api_key, api_version)
        body, end = read_entity(schema, view, pos)
    except (MalformedError, schemas.SchemaNotFoundError) as e:
        raise InvalidResponseError(f"api key {api_key} v{api_version}: {e}") from e
    if end != len(view):
        raise InvalidResponseError(f"{len(view) - end} bytes after the response body")
    return DecodedResponse(correlation_id, body)
