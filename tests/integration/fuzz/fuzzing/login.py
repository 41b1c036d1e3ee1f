"""A connection's SASL/SCRAM login before its fuzz cases, over the raw streams ``traffic`` uses.

The fuzz plays cases on raw sockets; on a SASL listener they would be refused before the broker
looked at them, so an authenticated target (``Target.login``) first does the exchange a client
does (SaslHandshake v1, then SaslAuthenticate v2 twice, with scramp as the client) and only
then sends its cases. The login's correlation ids are negative, which no drawn case relies on
being answered first. A login that fails raises ``LoginFailed``: a broker that refuses the
right password is a finding, not a closed connection to excuse.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

import scramp

from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import decode_response, encode_request

__all__ = ["Login", "LoginFailed", "log_in"]

LOGIN_TIMEOUT_S = 10.0
CLIENT_ID = "odradek-fuzz-login"


@dataclass(frozen=True)
class Login:
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    username: str
    password: str

    def __repr__(self) -> str:  # no password in reports
        return f"Login({self.mechanism}, {self.username})"


class LoginFailed(Exception):
    pass


async def _call(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    correlation_id: int,
    api_key: int,
    version: int,
    **fields: object,
) -> object:
    data = encode_request(
        schemas.request_schema(api_key, version)(**fields), correlation_id, CLIENT_ID
    )
    writer.write(struct.pack(">i", len(data)) + data)
    await writer.drain()
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    response = decode_response(api_key, version, await reader.readexactly(size)).body
    if int(response.error_code) != 0:
        raise LoginFailed(f"{ApiKey(api_key).name}: error {response.error_code}")
    return response


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, login: Login
) -> None:
    await _call(reader, writer, -1, ApiKey.SASL_HANDSHAKE, 1, mechanism=login.mechanism)
    client = scramp.ScramClient([login.mechanism], login.username, login.password)
    first = await _call(
        reader,
        writer,
        -2,
        ApiKey.SASL_AUTHENTICATE,
        2,
        auth_bytes=client.get_client_first().encode(),
    )
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = await _call(
        reader,
        writer,
        -3,
        ApiKey.SASL_AUTHENTICATE,
        2,
        auth_bytes=client.get_client_final().encode(),
    )
    client.set_server_final(bytes(final.auth_bytes).decode())


async def log_in(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, login: Login) -> None:
    """Authenticate the connection as ``login``; ``LoginFailed`` if the broker refuses."""
    try:
        await asyncio.wait_for(_exchange(reader, writer, login), LOGIN_TIMEOUT_S)
    except (OSError, EOFError, TimeoutError, scramp.ScramException) as e:
        raise LoginFailed(f"{login}: {type(e).__name__}: {e}") from e
