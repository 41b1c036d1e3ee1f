"""Raw AlterClientQuotas, DescribeClientQuotas and any other request to a broker, for the client
quota tests (the clients have no client quota API): one connection per request, bounded by
``CALL_TIMEOUT_S``, network only to the cluster under test."""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol.codec import decode_response, encode_request

__all__ = ["alter", "call", "describe"]

CALL_TIMEOUT_S = 30.0


def call(bootstrap: str, request: Any, client_id: str = "quota-tests") -> Any:
    """One raw request (the clients have no client quota API) and its answer."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=CALL_TIMEOUT_S) as sock:
        frame = encode_request(request, 1, client_id)
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
    return decode_response(int(request.__api_key__), int(request.__version__), data[4:]).body


def alter(
    bootstrap: str,
    client_id: str,
    value: float | None,
    validate_only=False,
    key="producer_byte_rate",
    user: str | None = None,
) -> Any:
    from kio.schema.alter_client_quotas.v1 import request as schema

    op = schema.OpData(key=key, value=value or 0.0, remove=value is None)
    entity = (schema.EntityData(entity_type="client-id", entity_name=client_id),)
    if user is not None:
        entity = (schema.EntityData(entity_type="user", entity_name=user), *entity)
    entry = schema.EntryData(entity=entity, ops=(op,))
    response = call(
        bootstrap,
        schema.AlterClientQuotasRequest(entries=(entry,), validate_only=validate_only),
    )
    return response.entries[0]


def describe(bootstrap: str, client_id: str) -> dict[str, float]:
    from kio.schema.describe_client_quotas.v1 import request as schema

    component = schema.ComponentData(entity_type="client-id", match_type=0, match=client_id)
    response = call(
        bootstrap, schema.DescribeClientQuotasRequest(components=(component,), strict=False)
    )
    assert response.error_code == 0, response.error_message
    return {v.key: v.value for e in response.entries for v in e.values}
