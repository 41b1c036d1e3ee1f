"""How a client connection secures itself: TLS (an ``ssl.SSLContext``) and SASL PLAIN or SCRAM.

``ClientSecurity`` is what a caller hands to ``client.admin.ClusterClient``: ``tls`` for SSL and
SASL_SSL listeners, ``sasl`` for SASL_PLAINTEXT and SASL_SSL ones. ``authenticate`` runs the
exchange on a just-opened connection, after ApiVersions, as Kafka's clients do (KIP-152):

1. SaslHandshake v1 naming the mechanism; an error (UNSUPPORTED_SASL_MECHANISM lists the
   enabled ones) fails;
2. SaslAuthenticate with Kafka's framing: PLAIN sends one token ``\\0user\\0password``; SCRAM
   (RFC 5802, with ``scramp``) sends the client-first message, then the client-final one, and
   checks the server's signature in the last answer, so a broker that does not hold the
   credential cannot pass for one that does.

A refusal is ``SaslAuthenticationError`` with the broker's message; neither the password nor a
token is ever put in a message. Session re-authentication (KIP-368) is not done: the broker
answers a session lifetime of 0. One exchange per connection, on its event loop.

``client_security(settings)`` builds a ``ClientSecurity`` from librdkafka's security settings (as
``client.java_security.translate`` returns them), so a tool or a worker configured with Kafka's
keys gives Odradek's own client the same TLS and SASL as its librdkafka clients.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import scramp

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.client.java_security import JavaSecurityError
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.sasl import PASSWORD_MECHANISMS

__all__ = [
    "MECHANISMS",
    "ClientSecurity",
    "SaslAuthenticationError",
    "SaslCredentials",
    "client_security",
]

MECHANISMS = PASSWORD_MECHANISMS  # the brokers' (security.sasl) but OAUTHBEARER: not spoken here


class SaslAuthenticationError(ClientError):
    """The broker refused the exchange (or its answer did not prove it knows the credential)."""


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    mechanism: str  # one of MECHANISMS
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism} is not one of {MECHANISMS}")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    tls: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None


def client_security(settings: Mapping[str, str]) -> ClientSecurity:
    """TLS and SASL of librdkafka's security ``settings``; reads the PEM files they name.

    Refuses (``JavaSecurityError``) what this client does not speak: OAUTHBEARER, and TLS files
    that do not load."""
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    sasl = None
    if protocol.startswith("SASL_"):
        mechanism = settings.get("sasl.mechanism", "")
        if mechanism not in MECHANISMS:
            raise JavaSecurityError(
                "sasl.mechanism",
                f"{mechanism or 'none'} is not spoken by Odradek's own client (one of "
                f"{', '.join(MECHANISMS)})",
            )
        sasl = SaslCredentials(mechanism, settings["sasl.username"], settings["sasl.password"])
    return ClientSecurity(_ssl_context(settings) if protocol.endswith("SSL") else None, sasl)


def _ssl_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
    except (OSError, ssl.SSLError) as e:
        raise JavaSecurityError("ssl.ca.location", f"cannot load the CA file: {e}") from e
    if "ssl.certificate.location" in settings:
        try:
            context.load_cert_chain(
                settings["ssl.certificate.location"],
                settings.get("ssl.key.location"),
                settings.get("ssl.key.password"),
            )
        except (OSError, ssl.SSLError) as e:
            raise JavaSecurityError(
                "ssl.certificate.location", f"cannot load the certificate and key: {e}"
            ) from e
    if settings.get("ssl.endpoint.identification.algorithm", "https") != "https":
        context.check_hostname = False
    return context


async def _exchange(connection: BrokerConnection, api_key: int, max_version: int, **fields: Any):
    version = connection.pick_version(api_key, max_version)
    response = await connection.send(schemas.request_schema(api_key, version)(**fields))
    if int(response.error_code) != 0:
        message = getattr(response, "error_message", None) or ""
        name = getattr(response.error_code, "name", response.error_code)
        raise SaslAuthenticationError(f"SASL authentication failed: {name} {message}".rstrip())
    return response


async def authenticate(connection: BrokerConnection, credentials: SaslCredentials) -> None:
    """The SASL exchange of ``credentials`` on ``connection`` (versions already negotiated)."""
    try:
        await _exchange(connection, ApiKey.SASL_HANDSHAKE, 1, mechanism=credentials.mechanism)
    except SaslAuthenticationError as e:
        raise SaslAuthenticationError(f"{e} (mechanism {credentials.mechanism})") from None
    if credentials.mechanism == "PLAIN":
        token = b"\0" + credentials.username.encode() + b"\0" + credentials.password.encode()
        await _exchange(connection, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token)
        return
    client = scramp.ScramClient([credentials.mechanism], credentials.username, credentials.password)
    first = await _exchange(
        connection, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=client.get_client_first().encode()
    )
    try:
        client.set_server_first(bytes(first.auth_bytes).decode())
        final_message = client.get_client_final()
    except scramp.ScramException as e:
        raise SaslAuthenticationError(f"SCRAM: the broker's first message: {e}") from None
    final = await _exchange(
        connection, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=final_message.encode()
    )
    try:
        client.set_server_final(bytes(final.auth_bytes).decode())
    except scramp.ScramException as e:
        raise SaslAuthenticationError(f"SCRAM: the broker's signature: {e}") from None
