"""SASL authentication of one connection on a SASL listener, as Kafka's SaslServerAuthenticator.

A connection on a SASL_PLAINTEXT or SASL_SSL listener starts unauthenticated. Until it has
authenticated it may send, in this order (Kafka's states HANDSHAKE_OR_VERSIONS_REQUEST,
HANDSHAKE_REQUEST, AUTHENTICATE):

1. ApiVersions (any number of times; served as usual, so a client can pick versions);
2. SaslHandshake v1 naming a mechanism the listener enables (``sasl.enabled.mechanisms``);
   an unknown one gets UNSUPPORTED_SASL_MECHANISM with the enabled ones, and fails;
3. SaslAuthenticate, as many as the mechanism's exchange takes (PLAIN one, SCRAM two); a
   refused token gets SASL_AUTHENTICATION_FAILED with the reason, and fails.

Anything else before the exchange completes (another API, a handshake twice, a SaslAuthenticate
before the handshake, any request pipelined behind a failed one) closes the connection without
an answer, as Kafka's
``IllegalSaslStateException``. SaslHandshake v0 (raw tokens without Kafka framing follow it) is
not served: it is not in the advertised range, and is refused with a message saying so.

Once complete the connection's principal is ``User:<name>`` (on SASL_SSL too: the SASL
identity, not the certificate's, as Kafka) and later SaslHandshake/SaslAuthenticate requests go
to their handlers, which answer ILLEGAL_SASL_STATE as Kafka's KafkaApis.

A failure is answered after ``connection.failed.authentication.delay.ms`` and then the
connection is closed (the server does both: ``AuthenticationFailed``). Until authenticated, a
connection's frames are bounded by ``sasl.server.max.receive.size`` (the server sets the frame
decoder's bound). Tokens are never logged.

One object per connection, on the broker's event loop.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from odradek.broker.handlers.build import build
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.header import RequestHeader
from odradek.security.oauthbearer import OAuthBearerServer, TokenValidator
from odradek.security.sasl import (
    CredentialLookup,
    PlainServer,
    SaslAuthenticationError,
    SaslServer,
    ScramServer,
)
from odradek.security.scram import ScramMechanism

__all__ = ["AuthenticationFailed", "ListenerSasl", "SaslAuthenticator", "UnexpectedRequest"]

NO_SESSION_LIFETIME = timedelta(0)  # SaslAuthenticate v1+: no re-authentication (no KIP-368)


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    """What a SASL listener's connections authenticate against; built at start."""

    listener: str
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    lookup: CredentialLookup  # SCRAM credentials (ZooKeeper)
    failed_authentication_delay_ms: int
    max_receive_bytes: int
    oauthbearer: TokenValidator | None = None  # OAUTHBEARER's, when the listener enables it

    def __repr__(self) -> str:
        return f"ListenerSasl({self.listener}, {self.enabled_mechanisms})"

    def server(self, mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism == OAuthBearerServer.mechanism:
            if self.oauthbearer is None:
                raise ValueError(f"listener {self.listener} has no OAUTHBEARER validator")
            return OAuthBearerServer(self.oauthbearer)
        scram = ScramMechanism.by_name(mechanism)
        if scram is None:
            raise ValueError(f"no SASL server for {mechanism}")
        return ScramServer(scram, self.lookup)


class UnexpectedRequest(Exception):
    """A request that may not come now: the connection is closed without an answer."""


class AuthenticationFailed(Exception):
    """The exchange failed: send ``response`` (after the delay), then close."""

    def __init__(self, response: Any, mechanism: str, message: str):
        super().__init__(message)
        self.response = response
        self.mechanism = mechanism


class _State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"  # nothing more is served: the connection is closing


class SaslAuthenticator:
    """One connection's SASL state; see the module."""

    def __init__(self, sasl: ListenerSasl):
        self.sasl = sasl
        self._state = _State.HANDSHAKE
        self._server: SaslServer | None = None

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def mechanism(self) -> str | None:
        return None if self._server is None else self._server.mechanism

    @property
    def user(self) -> str:
        if self._server is None or not self.complete:
            raise RuntimeError("not authenticated")
        return self._server.authorization_id

    def check_allowed(self, header: RequestHeader) -> None:
        """Raise ``UnexpectedRequest`` unless ``header``'s API may come now (not COMPLETE)."""
        api_key = header.api_key
        if api_key == ApiKey.API_VERSIONS and self._state is _State.HANDSHAKE:
            return
        if api_key == ApiKey.SASL_HANDSHAKE and self._state is _State.HANDSHAKE:
            return
        if api_key == ApiKey.SASL_AUTHENTICATE and self._state is _State.AUTHENTICATE:
            return
        name = _api_name(api_key)
        if self._state is _State.FAILED:
            raise UnexpectedRequest(f"{name} after a failed SASL authentication")
        if self._state is _State.HANDSHAKE:
            raise UnexpectedRequest(
                f"unexpected Kafka request of type {name} during SASL handshake (only "
                f"ApiVersions and SaslHandshake may come before authentication)"
            )
        raise UnexpectedRequest(
            f"unexpected Kafka request of type {name} during SASL authentication with "
            f"{self.mechanism} (only SaslAuthenticate may come now)"
        )

    def handshake(self, header: RequestHeader, request: Any) -> Any:
        """SaslHandshake: the mechanism's server, or ``AuthenticationFailed``."""
        enabled = self.sasl.enabled_mechanisms
        schema = schemas.response_schema(ApiKey.SASL_HANDSHAKE, header.api_version)
        mechanism = request.mechanism
        if mechanism not in enabled:
            self._state = _State.FAILED
            raise AuthenticationFailed(
                build(schema, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled),
                "unsupported",
                f"unsupported SASL mechanism {mechanism!r}: listener {self.sasl.listener} "
                f"enables {', '.join(enabled)}",
            )
        self._server = self.sasl.server(mechanism)
        self._state = _State.AUTHENTICATE
        return build(schema, error_code=ErrorCode.none, mechanisms=enabled)

    async def authenticate(self, header: RequestHeader, request: Any) -> Any:
        """SaslAuthenticate: the next server token, or ``AuthenticationFailed``."""
        server = self._server
        assert server is not None  # check_allowed: AUTHENTICATE follows a handshake
        schema = schemas.response_schema(ApiKey.SASL_AUTHENTICATE, header.api_version)
        try:
            challenge = await server.evaluate_response(bytes(request.auth_bytes))
        except SaslAuthenticationError as e:
            self._state = _State.FAILED
            raise AuthenticationFailed(
                build(
                    schema,
                    error_code=ErrorCode.sasl_authentication_failed,
                    error_message=str(e),
                    auth_bytes=b"",
                    session_lifetime=NO_SESSION_LIFETIME,
                ),
                server.mechanism,
                str(e),
            ) from None
        if server.complete:
            self._state = _State.COMPLETE
        return build(
            schema,
            error_code=ErrorCode.none,
            error_message=None,
            auth_bytes=challenge,
            session_lifetime=NO_SESSION_LIFETIME,
        )


def _api_name(api_key: int) -> str:
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"api key {api_key}"
