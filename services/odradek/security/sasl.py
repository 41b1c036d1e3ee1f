"""The broker's side of the SASL mechanisms it serves: PLAIN and SCRAM-SHA-256/512 here,
OAUTHBEARER in ``security.oauthbearer`` (same ``SaslServer`` protocol).

Each ``SaslServer`` is one connection's exchange, as Kafka's ``SaslServer`` implementations
(``PlainSaslServer``, ``ScramSaslServer``): ``evaluate_response(token)`` takes the client's next
token and returns the server's next one; once ``complete`` the client is ``authorization_id``.
A failure raises ``SaslAuthenticationError`` whose message is what the client is told: it names
no password, and for PLAIN and SCRAM it is the same for an unknown user and a wrong password
(no user enumeration).

- PLAIN (RFC 4616): one token ``authzid NUL authcid NUL passwd``; the users are the JAAS
  ``user_<name>="<password>"`` options of the listener's ``PlainLoginModule``
  (``config.sasl``). Passwords are compared with ``hmac.compare_digest``, and an unknown user
  is compared against a dummy, so the time taken does not say which users exist.
- SCRAM (RFC 5802, RFC 7677): two rounds, with ``scramp`` doing the crypto. The first token
  names the user (``n=``, with ``=2C``/``=3D`` decoded as Kafka's ``ScramFormatter.username``);
  the credential is then looked up (``CredentialLookup``, awaited: the broker reads ZooKeeper),
  and the rest is scramp's. No channel binding (``n,,`` or ``y,,`` only), as Kafka's. A stored
  salt may be of any length, as Kafka's (AlterUserScramCredentials takes the client's salt):
  scramp's ``make_server`` refuses salts under 12 bytes, a rule for making new salts, so the
  server is built from ``scramp.core`` with the stored salt as it is (``_scramp_server``).

``credential_expires_at_ms`` is when the credential the client authenticated with stops being
valid (epoch milliseconds; Kafka's ``CREDENTIAL_LIFETIME_MS`` negotiated property), or None when
it does not expire (PLAIN, SCRAM): the session lifetime of KIP-368 is bounded by it
(``broker.sasl_authenticator``).

An authorization id different from the user name is refused, as Kafka does. One exchange per
object, on one event loop; not thread-safe.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import scramp

from odradek.security.scram import ScramCredential, ScramMechanism

__all__ = [
    "KNOWN_UNSUPPORTED_MECHANISMS",
    "PASSWORD_MECHANISMS",
    "SUPPORTED_MECHANISMS",
    "CredentialLookup",
    "PlainServer",
    "SaslAuthenticationError",
    "SaslServer",
    "ScramServer",
]

# The mechanisms that authenticate a user name and a password: the project's own client and
# --command-config speak these (not OAUTHBEARER, whose tokens come from an identity provider).
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SUPPORTED_MECHANISMS = (*PASSWORD_MECHANISMS, "OAUTHBEARER")
KNOWN_UNSUPPORTED_MECHANISMS = ("GSSAPI",)  # Kafka's, not implemented here

CredentialLookup = Callable[[str, ScramMechanism], Awaitable[ScramCredential | None]]

_DIFFERENT_AUTHZID = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class SaslAuthenticationError(Exception):
    """The exchange failed; ``str(e)`` is what the client is told (never a secret)."""


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user name (only once ``complete``)."""
        ...

    @property
    def credential_expires_at_ms(self) -> int | None:
        """When the credential expires (epoch ms), None if never (only once ``complete``)."""
        ...

    async def evaluate_response(self, token: bytes) -> bytes: ...


class PlainServer:
    """SASL/PLAIN against the listener's JAAS users; see the module."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]):
        self._users = users
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        if self._user is None:
            raise RuntimeError("PLAIN authentication has not completed")
        return self._user

    @property
    def credential_expires_at_ms(self) -> int | None:
        return None  # a password does not expire

    async def evaluate_response(self, token: bytes) -> bytes:
        if self._user is not None:
            raise SaslAuthenticationError("PLAIN authentication has already completed")
        try:
            parts = token.decode("utf-8").split("\x00")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # An unknown user costs the same comparison as a known one.
        matches = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\x00" + password).encode()
        )
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(_DIFFERENT_AUTHZID)
        self._user = username
        return b""


def _scram_username(client_first: str) -> tuple[str, str]:
    """(authzid, user name) of a client-first message; ``SaslAuthenticationError`` if it is not
    one this server can answer."""
    parts = client_first.split(",", 2)
    if len(parts) != 3:
        raise SaslAuthenticationError("Invalid SCRAM client first message")
    cbind, authzid, bare = parts
    if cbind not in ("n", "y"):
        raise SaslAuthenticationError(
            "Invalid SCRAM client first message: channel binding is not supported"
        )
    if authzid and not authzid.startswith("a="):
        raise SaslAuthenticationError("Invalid SCRAM client first message")
    first = bare.split(",", 1)[0]
    if not first.startswith("n=") or len(first) == 2:
        raise SaslAuthenticationError("Invalid SCRAM client first message: no user name")
    username = first[2:].replace("=2C", ",").replace("=3D", "=")
    return authzid[2:].replace("=2C", ",").replace("=3D", "="), username


class ScramServer:
    """SASL/SCRAM-SHA-256 or -512 (``mechanism``); see the module."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup):
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._lookup = lookup
        self._server: scramp.core.ScramServer | None = None
        self._username: str | None = None
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._username is None:
            raise RuntimeError(f"{self.mechanism} authentication has not completed")
        return self._username

    @property
    def credential_expires_at_ms(self) -> int | None:
        return None  # a SCRAM credential does not expire (delegation tokens are not served)

    def _failed(self) -> SaslAuthenticationError:
        # Kafka's words for a SaslException from its ScramSaslServer: the same for an unknown
        # user, a wrong password and a malformed message.
        return SaslAuthenticationError(
            f"Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    async def evaluate_response(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed() from None
        if self._complete:
            raise SaslAuthenticationError(f"{self.mechanism} authentication has already completed")
        if self._server is None:
            return await self._first(message)
        try:
            self._server.set_client_final(message)
            server_final = self._server.get_server_final()
        except scramp.ScramException:
            raise self._failed() from None
        self._complete = True
        return server_final.encode()

    async def _first(self, client_first: str) -> bytes:
        authzid, username = _scram_username(client_first)
        if authzid and authzid != username:
            raise SaslAuthenticationError(_DIFFERENT_AUTHZID)
        credential = await self._lookup(username, self._scram)
        if credential is None:
            raise self._failed()
        try:
            server = _scramp_server(self._scram, credential)
            server.set_client_first(client_first)
            server_first = server.get_server_first()
        except scramp.ScramException:
            raise self._failed() from None
        self._server = server
        self._username = username
        return server_first.encode()


class _StoredSalt(scramp.core.Salt):
    """A stored credential's salt, however short: scramp's ``Salt`` wants 12 bytes or more."""

    MIN_LENGTH = 1


def _scramp_server(
    mechanism: ScramMechanism, credential: ScramCredential
) -> scramp.core.ScramServer:
    """scramp's server for one exchange against ``credential``. ``make_server`` would wrap the
    lookup in scramp's ``AuthFn``, which turns the salt into a ``Salt`` and so refuses a short
    one that Kafka accepts; here the lookup answers scramp's value types itself. The iteration
    count keeps scramp's bounds (at least 4096, Kafka's minimum too)."""
    salt, stored_key, server_key, iterations = credential.auth_info()
    answer = (_StoredSalt(salt), stored_key, server_key, scramp.core.IterationCount(iterations))
    return scramp.core.ScramServer(mechanism.scramp, lambda _user: answer)
