"""SASL authentication of one connection on a SASL listener, as Kafka's SaslServerAuthenticator.

A connection on a SASL_PLAINTEXT or SASL_SSL listener starts unauthenticated. Until it has
authenticated it may send, in this order (Kafka's states HANDSHAKE_OR_VERSIONS_REQUEST,
HANDSHAKE_REQUEST, AUTHENTICATE):

1. ApiVersions (any number of times; served as usual, so a client can pick versions);
2. SaslHandshake v0 or v1 naming a mechanism the listener enables (``sasl.enabled.mechanisms``);
   an unknown one gets UNSUPPORTED_SASL_MECHANISM with the enabled ones, and fails;
3. the mechanism's tokens, as many as its exchange takes (PLAIN one, SCRAM two):

   - after SaslHandshake v1, each in a SaslAuthenticate request; a refused token gets
     SASL_AUTHENTICATION_FAILED with the reason, and fails;
   - after SaslHandshake v0 (before KIP-152), each as a raw frame: a 4-byte size and the token,
     no Kafka request header (``expects_raw_token``); the server's tokens go back the same way
     (PLAIN's empty one too, as Kafka's). A refused token fails without an answer (there is
     no Kafka response to carry the error, as Kafka's): the connection is closed. Kafka
     requests resume once the exchange is complete.

Anything else before the exchange completes (another API, a handshake twice, a SaslAuthenticate
before the handshake or after a v0 one, any request pipelined behind a failed one) closes the
connection without an answer, as Kafka's ``IllegalSaslStateException``.

Once complete the connection's principal is ``User:<name>`` (on SASL_SSL too: the SASL
identity, not the certificate's, as Kafka).

Sessions and re-authentication (KIP-368). On completion the session gets a lifetime, as Kafka's
``ReauthInfo``: the smaller of the mechanism's ``connections.max.reauth.ms`` (when above 0) and
what remains of the credential (``SaslServer.credential_expires_at_ms``, when it expires); with
neither there is no session expiry (lifetime 0). SaslAuthenticate v1+ answers it
(``session_lifetime_ms``). A session that has expired (``session_expired``) closes the
connection at its next request (the server does that: Kafka's
``KafkaChannel.serverAuthenticationSessionExpired``), whatever client it is (a v0 client cannot
re-authenticate). Before that the client re-authenticates on the same connection: a SaslHandshake
on an authenticated connection whose session expires, at most once a second
(``MIN_REAUTH_INTERVAL_MS``), begins it (``begin_reauthentication``), then the exchange runs as
above (only SaslHandshake and the tokens: anything else fails it). The mechanism must be the
same (a SaslHandshake naming another enabled one is answered, and the next token fails with
Kafka's message, REAUTH_BAD_MECHANISM; where Kafka only closes, a SaslAuthenticate gets
SASL_AUTHENTICATION_FAILED with that message first) and so must the principal ("Cannot change
principals during re-authentication from User.alice: User.bob"); either failure closes the
connection. Other
SaslHandshake/SaslAuthenticate requests of an authenticated connection go to their handlers,
which answer ILLEGAL_SASL_STATE as Kafka's KafkaApis.

A failure is answered (when there is an answer) after ``connection.failed.authentication.delay.ms``
and then the connection is closed (the server does both: ``AuthenticationFailed``). Until
authenticated, and while re-authenticating, a connection's frames, raw tokens included, are
bounded by ``sasl.server.max.receive.size`` (the server sets the frame decoder's bound; a larger
one closes the connection). Tokens are never logged.

Time is the injected wall clock ``clock_ms`` (epoch milliseconds, as credential expiries are).
One object per connection, on the broker's event loop.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from odradek.broker.handlers.build import build
from odradek.common.clock import wall_clock_ms
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

__all__ = [
    "MIN_REAUTH_INTERVAL_MS",
    "AuthenticationFailed",
    "ListenerSasl",
    "SaslAuthenticator",
    "UnexpectedRequest",
]

NO_SESSION_LIFETIME = timedelta(0)  # SaslAuthenticate v1+: no session expiry
MIN_REAUTH_INTERVAL_MS = 1000  # Kafka's: a re-authentication begins at most once a second


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    """What a SASL listener's connections authenticate against; built at start."""

    listener: str
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    lookup: CredentialLookup  # SCRAM credentials (ZooKeeper)
    failed_authentication_delay_ms: int
    max_receive_bytes: int
    # connections.max.reauth.ms by mechanism (0 or absent: no limit), per listener as Kafka's
    max_reauth_ms: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
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
    """The exchange failed: send ``response`` (after the delay), then close; a failed raw
    token (SaslHandshake v0) has no ``response`` (None): the connection is just closed."""

    def __init__(self, response: Any, mechanism: str, message: str):
        super().__init__(message)
        self.response = response
        self.mechanism = mechanism


class _State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"  # SaslAuthenticate requests (after SaslHandshake v1)
    RAW_AUTHENTICATE = "raw_authenticate"  # raw token frames (after SaslHandshake v0)
    COMPLETE = "complete"
    FAILED = "failed"  # nothing more is served: the connection is closing


@dataclass(frozen=True, slots=True)
class _Reauthentication:
    """What a re-authentication must keep: Kafka's ``ReauthInfo``."""

    mechanism: str
    user: str
    began_at_ms: int


class SaslAuthenticator:
    """One connection's SASL state; see the module."""

    def __init__(self, sasl: ListenerSasl, clock_ms: Callable[[], int] = wall_clock_ms):
        self.sasl = sasl
        self._clock_ms = clock_ms
        self._state = _State.HANDSHAKE
        self._server: SaslServer | None = None
        self._user: str | None = None  # of the last completed exchange
        self._session_expires_at_ms: int | None = None
        self._reauth: _Reauthentication | None = None
        self._last_reauth_began_at_ms: int | None = None
        self._bad_mechanism: str | None = None  # Kafka's REAUTH_BAD_MECHANISM message
        self.successful_authentications = 0  # the first, then each re-authentication

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        """The next frame is a raw SASL token, not a Kafka request (after SaslHandshake v0)."""
        return self._state is _State.RAW_AUTHENTICATE

    @property
    def reauthenticating(self) -> bool:
        """A re-authentication has begun and not completed (it may have failed)."""
        return self._reauth is not None

    @property
    def mechanism(self) -> str | None:
        if self._server is not None:
            return self._server.mechanism
        return None if self._reauth is None else self._reauth.mechanism

    @property
    def user(self) -> str:
        if self._user is None or not self.complete:
            raise RuntimeError("not authenticated")
        return self._user

    @property
    def session_expires_at_ms(self) -> int | None:
        """When the session expires (epoch ms), None if it does not."""
        return self._session_expires_at_ms

    def session_expired(self) -> bool:
        """Kafka's ``serverAuthenticationSessionExpired``: the connection must be closed."""
        expires = self._session_expires_at_ms
        return expires is not None and self._clock_ms() > expires

    def begin_reauthentication(self) -> bool:
        """A SaslHandshake came on the authenticated connection: True if it begins a
        re-authentication (the session expires, and none began within the last second), as
        Kafka's ``maybeBeginServerReauthentication``; False: the request is served as usual."""
        if self._state is not _State.COMPLETE or self._session_expires_at_ms is None:
            return False
        now_ms = self._clock_ms()
        last = self._last_reauth_began_at_ms
        if last is not None and now_ms - last < MIN_REAUTH_INTERVAL_MS:
            return False
        assert self._server is not None and self._user is not None
        self._last_reauth_began_at_ms = now_ms
        self._reauth = _Reauthentication(self._server.mechanism, self._user, now_ms)
        self._server = None
        self._state = _State.HANDSHAKE
        return True

    def check_allowed(self, header: RequestHeader) -> None:
        """Raise ``UnexpectedRequest`` unless ``header``'s API may come now (not COMPLETE)."""
        api_key, state = header.api_key, self._state
        allowed = {
            # Kafka's re-authentication takes the handshake only, no ApiVersions
            ApiKey.API_VERSIONS: state is _State.HANDSHAKE and self._reauth is None,
            ApiKey.SASL_HANDSHAKE: state is _State.HANDSHAKE,
            ApiKey.SASL_AUTHENTICATE: state is _State.AUTHENTICATE,
        }
        if allowed.get(api_key, False):
            return
        name = _api_name(api_key)
        what = "authentication" if self._reauth is None else "re-authentication"
        if self._state is _State.FAILED:
            raise UnexpectedRequest(f"{name} after a failed SASL {what}")
        if self._state is _State.HANDSHAKE:
            raise UnexpectedRequest(
                f"unexpected Kafka request of type {name} during SASL handshake (only "
                f"ApiVersions and SaslHandshake may come before authentication)"
                if self._reauth is None
                else f"unexpected Kafka request of type {name} during SASL re-authentication "
                f"(it begins with SaslHandshake)"
            )
        raise UnexpectedRequest(
            f"unexpected Kafka request of type {name} during SASL {what} with "
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
        reauth = self._reauth
        if reauth is not None and mechanism != reauth.mechanism:
            # As Kafka: the handshake is answered, the next token fails (REAUTH_BAD_MECHANISM).
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{reauth.mechanism}'"
            )
        else:
            self._server = self.sasl.server(mechanism)
        # v1 (KIP-152): tokens in SaslAuthenticate requests; v0: raw token frames.
        self._state = _State.AUTHENTICATE if header.api_version >= 1 else _State.RAW_AUTHENTICATE
        return build(schema, error_code=ErrorCode.none, mechanisms=enabled)

    async def authenticate(self, header: RequestHeader, request: Any) -> Any:
        """SaslAuthenticate: the next server token, or ``AuthenticationFailed``."""
        schema = schemas.response_schema(ApiKey.SASL_AUTHENTICATE, header.api_version)
        try:
            challenge, lifetime_ms = await self._evaluate(bytes(request.auth_bytes))
        except AuthenticationFailed as e:
            e.response = build(
                schema,
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=str(e),
                auth_bytes=b"",
                session_lifetime=NO_SESSION_LIFETIME,
            )
            raise
        return build(
            schema,
            error_code=ErrorCode.none,
            error_message=None,
            auth_bytes=challenge,
            session_lifetime=timedelta(milliseconds=lifetime_ms),
        )

    async def authenticate_raw(self, token: bytes) -> bytes:
        """A raw token (after SaslHandshake v0): the server's raw token, or
        ``AuthenticationFailed`` with no response (Kafka has none to send)."""
        if self._state is not _State.RAW_AUTHENTICATE:
            raise RuntimeError("a raw SASL token outside a SaslHandshake v0 exchange")
        challenge, _ = await self._evaluate(token)
        return challenge

    async def _evaluate(self, token: bytes) -> tuple[bytes, int]:
        """The server's next token and, once complete, the session lifetime (ms)."""
        if self._bad_mechanism is not None:
            assert self._reauth is not None
            self._state = _State.FAILED
            raise AuthenticationFailed(None, self._reauth.mechanism, self._bad_mechanism)
        server = self._server
        assert server is not None  # check_allowed: tokens follow a handshake
        try:
            challenge = await server.evaluate_response(token)
            if server.complete:
                self._check_principal_unchanged(server.authorization_id)
        except SaslAuthenticationError as e:
            self._state = _State.FAILED
            raise AuthenticationFailed(None, server.mechanism, str(e)) from None
        if not server.complete:
            return challenge, 0
        self._state = _State.COMPLETE
        self._user = server.authorization_id
        self._reauth = None
        self.successful_authentications += 1
        return challenge, self._start_session(server)

    def _check_principal_unchanged(self, user: str) -> None:
        reauth = self._reauth
        if reauth is not None and user != reauth.user:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from User.{reauth.user}: "
                f"User.{user}"
            )

    def _start_session(self, server: SaslServer) -> int:
        """The session lifetime (ms; 0: none) of a completed exchange, as Kafka's
        ``calcCompletionTimesAndReturnSessionLifetimeMs``; sets when it expires."""
        now_ms = self._clock_ms()
        max_reauth_ms = self.sasl.max_reauth_ms.get(server.mechanism, 0)
        credential_expires_at_ms = server.credential_expires_at_ms
        limits = [] if max_reauth_ms <= 0 else [max_reauth_ms]
        if credential_expires_at_ms is not None:
            limits.append(credential_expires_at_ms - now_ms)
        if not limits:
            self._session_expires_at_ms = None
            return 0
        lifetime_ms = max(0, min(limits))
        self._session_expires_at_ms = now_ms + lifetime_ms
        return lifetime_ms


def _api_name(api_key: int) -> str:
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"api key {api_key}"
