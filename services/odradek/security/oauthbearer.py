"""The broker's side of SASL/OAUTHBEARER (RFC 7628): a JWT checked against a JWKS, as Kafka's
``OAuthBearerSaslServer`` with its KIP-768 ``OAuthBearerValidatorCallbackHandler``.

The exchange (``OAuthBearerServer``), one connection's:

1. the client's initial response is RFC 7628's GS2 message
   ``n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A`` (``^A`` is ``\\x01``),
   parsed as Kafka's ``OAuthBearerClientInitialResponse`` (a malformed one fails the exchange);
   extensions are accepted and ignored, as Kafka's validator handler accepts every one;
2. the token is validated (``TokenValidator``). Valid: the server answers an empty token and the
   exchange is complete; the principal is ``User:<sub claim>``, and an authzid, if given, must
   equal it. Refused: the server answers RFC 7628's error challenge, Kafka's
   ``{"status":"invalid_token"}``, and logs why (never the token);
3. after an error challenge the client must answer ``\\x01``, and the exchange then fails with
   that JSON as the SASL_AUTHENTICATION_FAILED message (what librdkafka, the Java client and
   kafka-python expect). Anything else after it fails the same way: one token per exchange.

``TokenValidator`` is Kafka's ``ValidatorAccessTokenValidator`` over jose4j, here over PyJWT:
a signed JWS (``alg`` one of ``ALGORITHMS``: RSA, RSA-PSS, ECDSA, EdDSA; ``none`` and the
HMAC algorithms are refused, a JWKS holds public keys); the key is the JWKS key whose ``kid`` is
the header's (without a ``kid``, each key whose type fits is tried), whose ``kty`` (and ``crv``)
fit ``alg``, whose ``alg``, if it says one, is the header's, and whose ``use``, if any, is
``sig``. Claims: ``exp`` and ``iat`` required (numbers), ``exp`` in the future, ``iat`` and
``nbf`` not, each with ``sasl.oauthbearer.clock.skew.seconds`` of slack; ``aud`` one of
``sasl.oauthbearer.expected.audience`` when set (and, as jose4j's default, a token that has an
``aud`` is refused when none is expected); ``iss`` equal to ``sasl.oauthbearer.expected.issuer``
when set; the subject claim (``sasl.oauthbearer.sub.claim.name``, ``sub``) a non-blank string;
the scope claim (``sasl.oauthbearer.scope.claim.name``) a string or a list of distinct non-blank
strings, or absent.

Keys come from a ``VerificationKeys`` (``security.jwks``: an HTTP(S) endpoint refreshed in the
background, or a file): ``current()`` is the last good set and never waits; when a token names
a key that set does not have, the validator asks ``refresh_for_missing(kid)`` once, which the
key source bounds (at most one refresh per backoff, a bounded wait) and then looks again.
Tokens whose keys are known never wait for the endpoint.

One ``OAuthBearerServer`` per connection, on one event loop; the validator is shared by every
connection of the listeners and keeps no state of its own. No I/O here.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import jwt

from odradek.security.sasl import SaslAuthenticationError

__all__ = [
    "ALGORITHMS",
    "INVALID_TOKEN_CHALLENGE",
    "ClaimRules",
    "ClientInitialResponse",
    "InvalidToken",
    "OAuthBearerServer",
    "OAuthBearerToken",
    "TokenValidator",
    "VerificationKey",
    "VerificationKeys",
    "parse_client_initial_response",
    "parse_jwks",
]

log = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"
# alg -> (kty, crv or None): the JWS algorithms served and the key each needs.
ALGORITHMS: Mapping[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", None),
}
_KEY_TYPES = {kty for kty, _ in ALGORITHMS.values()}
JWKS_MAX_KEYS = 64  # keys kept from one JWKS: a token without kid tries at most these
INVALID_TOKEN_CHALLENGE = '{"status":"invalid_token"}'  # Kafka's jsonErrorResponse
_CONTROL_A = b"\x01"

# Kafka's OAuthBearerClientInitialResponse grammar.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # \x01-\x7F but "," and "="
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.DOTALL
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class InvalidToken(Exception):
    """A token the validator refuses; ``str(e)`` says why (never the token itself)."""


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    token: str
    authorization_id: str  # "" when the client gave none
    extensions: Mapping[str, str]

    def __repr__(self) -> str:  # the token is a credential: never printed
        return f"ClientInitialResponse(authzid={self.authorization_id!r})"


def parse_client_initial_response(data: bytes) -> ClientInitialResponse:
    """RFC 7628's client initial response, as Kafka reads it; ``SaslAuthenticationError``
    (Kafka's words for a ``SaslException``) when it is not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _failed("Invalid OAUTHBEARER client first message: not UTF-8") from None
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise _failed("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in match.group("kvpairs").split("\x01"):
        if pair:
            key, _, value = pair.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise _failed("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise _failed("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match.group("scheme").lower() != "bearer":
        raise _failed("Invalid scheme in OAUTHBEARER client first message")
    authzid = (match.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return ClientInitialResponse(auth_match.group("token"), authzid, pairs)


def _failed(reason: str) -> SaslAuthenticationError:
    # What Kafka's SaslServerAuthenticator tells the client for a SaslException; the reason is
    # logged here, as Kafka logs it.
    log.info("OAUTHBEARER exchange refused: %s", reason)
    return SaslAuthenticationError(
        f"Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {MECHANISM}"
    )


# --- keys -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One public key of a JWKS, as published (``jwk``) and what selects it."""

    kid: str | None
    kty: str
    crv: str | None
    alg: str | None
    jwk: Mapping[str, Any]

    def fits(self, alg: str) -> bool:
        kty, crv = ALGORITHMS[alg]
        return self.kty == kty and (crv is None or self.crv == crv) and self.alg in (None, alg)

    def verifier(self, alg: str) -> jwt.PyJWK:
        return jwt.PyJWK(dict(self.jwk), algorithm=alg)


def parse_jwks(data: bytes) -> tuple[VerificationKey, ...]:
    """The signing keys of a JWKS document (RFC 7517); ``ValueError`` when it is not one. Keys
    this server cannot use (symmetric, another ``use``, an unknown type or curve, malformed)
    are skipped and logged, as jose4j skips them; at most ``JWKS_MAX_KEYS`` are kept."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a JSON document: {e}") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError('not a JWKS: expected an object with a "keys" list')
    usable: list[VerificationKey] = []
    for jwk_data in keys:
        key = _verification_key(jwk_data)
        if key is None:
            continue
        if len(usable) == JWKS_MAX_KEYS:
            log.warning("JWKS has more than %d usable keys: the rest are ignored", JWKS_MAX_KEYS)
            break
        usable.append(key)
    return tuple(usable)


def _verification_key(jwk_data: object) -> VerificationKey | None:
    if not isinstance(jwk_data, dict):
        log.warning("JWKS entry skipped: not an object")
        return None
    kid, kty, crv, alg = (jwk_data.get(name) for name in ("kid", "kty", "crv", "alg"))
    use = jwk_data.get("use")
    if kty not in _KEY_TYPES or (use is not None and use != "sig"):
        log.info("JWKS key %r skipped: kty %r, use %r (signing keys only)", kid, kty, use)
        return None
    if alg is not None and alg not in ALGORITHMS:
        log.info("JWKS key %r skipped: alg %r is not served", kid, alg)
        return None
    if not all(v is None or isinstance(v, str) for v in (kid, crv)):
        log.warning("JWKS key skipped: kid and crv must be strings")
        return None
    key = VerificationKey(kid, kty, crv, alg, dict(jwk_data))
    algs = [a for a in ALGORITHMS if key.fits(a)]
    if not algs:
        log.info("JWKS key %r skipped: no served algorithm fits kty %s crv %s", kid, kty, crv)
        return None
    try:
        key.verifier(algs[0])
    except jwt.PyJWTError as e:
        log.warning("JWKS key %r skipped: %s", kid, e)
        return None
    return key


class VerificationKeys(Protocol):
    """Where the validator's keys come from (``security.jwks``)."""

    def current(self) -> tuple[VerificationKey, ...]:
        """The last good key set; never waits."""
        ...

    async def refresh_for_missing(self, kid: str | None) -> bool:
        """A token names a key ``current()`` lacks: refresh if the bounds allow, wait a
        bounded time; True when a new key set came in."""
        ...


# --- tokens -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimRules:
    """Kafka's ``sasl.oauthbearer.*`` validation keys."""

    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    scope_claim_name: str = "scope"
    sub_claim_name: str = "sub"
    clock_skew_seconds: int = 30


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    principal_name: str
    lifetime_ms: int  # exp, in ms since the epoch
    start_time_ms: int  # iat
    scope: frozenset[str]


class TokenValidator:
    """Validates a token's signature and claims; see the module. Shared, stateless."""

    def __init__(
        self,
        keys: VerificationKeys,
        rules: ClaimRules,
        *,
        clock: Callable[[], float] = time.time,
    ):
        self.keys = keys
        self.rules = rules
        self._clock = clock

    async def validate(self, token: str) -> OAuthBearerToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise InvalidToken(f"malformed JWT: {e}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise InvalidToken(
                f"JWS algorithm {alg!r} is not allowed (one of {', '.join(ALGORITHMS)})"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the JWS header's kid is not a string")
        candidates = self._candidates(kid, alg)
        if not candidates and await self.keys.refresh_for_missing(kid):
            candidates = self._candidates(kid, alg)
        if not candidates:
            raise InvalidToken(
                f"no suitable verification key in the JWKS for a JWS with kid {_shown(kid)} "
                f"and alg {alg}"
            )
        claims = self._verified_claims(token, alg, candidates)
        return self._token(claims)

    def _candidates(self, kid: str | None, alg: str) -> list[VerificationKey]:
        return [
            key for key in self.keys.current() if (kid is None or key.kid == kid) and key.fits(alg)
        ]

    def _verified_claims(
        self, token: str, alg: str, candidates: list[VerificationKey]
    ) -> dict[str, Any]:
        rules = self.rules
        for key in candidates:
            try:
                return jwt.decode(
                    token,
                    key=key.verifier(alg),
                    algorithms=[alg],
                    audience=list(rules.expected_audience) or None,
                    issuer=rules.expected_issuer,
                    options={
                        "require": ["exp", "iat"],
                        # times are checked below, against the injected clock
                        "verify_exp": False,
                        "verify_nbf": False,
                        "verify_iat": False,
                        "verify_sub": False,
                        "verify_jti": False,
                    },
                )
            except jwt.InvalidSignatureError:
                continue  # without a kid another key may fit
            except (jwt.PyJWTError, ValueError, TypeError) as e:  # a library's refusal
                raise InvalidToken(f"could not validate the access token: {e}") from None
        raise InvalidToken("could not validate the access token: signature verification failed")

    def _token(self, claims: dict[str, Any]) -> OAuthBearerToken:
        rules = self.rules
        now = self._clock()
        skew = rules.clock_skew_seconds
        exp, iat, nbf = (_numeric_date(claims, name) for name in ("exp", "iat", "nbf"))
        assert exp is not None and iat is not None  # required above
        if now - skew >= exp:
            raise InvalidToken(f"the token expired at {exp:.0f} (now {now:.0f}, skew {skew} s)")
        if iat > now + skew:
            raise InvalidToken(f"the token is issued in the future, at {iat:.0f} (now {now:.0f})")
        if nbf is not None and nbf > now + skew:
            raise InvalidToken(f"the token is not valid before {nbf:.0f} (now {now:.0f})")
        sub = claims.get(rules.sub_claim_name)
        if not isinstance(sub, str) or not sub.strip():
            raise InvalidToken(f"the {rules.sub_claim_name!r} claim is missing or blank")
        return OAuthBearerToken(
            principal_name=sub.strip(),
            lifetime_ms=int(exp * 1000),
            start_time_ms=int(iat * 1000),
            scope=_scopes(rules.scope_claim_name, claims.get(rules.scope_claim_name)),
        )


def _numeric_date(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidToken(f"the {name!r} claim is not a NumericDate")
    return float(value)


def _scopes(name: str, raw: object) -> frozenset[str]:
    # Kafka's ClaimValidationUtils.validateScopes: a string is one scope, a list its items.
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    scopes: set[str] = set()
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidToken(f"the {name!r} claim holds a blank or non-string scope")
        if item.strip() in scopes:
            raise InvalidToken(f"the {name!r} claim holds the scope {item.strip()!r} twice")
        scopes.add(item.strip())
    return frozenset(scopes)


def _shown(kid: str | None) -> str:
    if kid is None:
        return "(none)"
    return repr(kid if len(kid) <= 64 else kid[:64] + "...")


# --- the exchange -----------------------------------------------------------------------------


class OAuthBearerServer:
    """SASL/OAUTHBEARER for one connection; see the module."""

    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator):
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None  # the error challenge sent, awaiting the client's ^A

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise RuntimeError("OAUTHBEARER authentication has not completed")
        return self._token.principal_name

    @property
    def credential_expires_at_ms(self) -> int | None:
        """The token's ``exp`` in ms since the epoch (Kafka's ``CREDENTIAL.LIFETIME.MS``
        negotiated property, which bounds the session lifetime, KIP-368)."""
        return None if self._token is None else self._token.lifetime_ms

    async def evaluate_response(self, token: bytes) -> bytes:
        if self._error is not None:  # RFC 7628: the client answers ^A, and the exchange fails
            if token != _CONTROL_A:
                log.info("OAUTHBEARER client answered an error challenge with other than ^A")
            raise SaslAuthenticationError(self._error)
        if self._token is not None:
            raise SaslAuthenticationError("OAUTHBEARER authentication has already completed")
        response = parse_client_initial_response(token)
        try:
            validated = await self._validator.validate(response.token)
        except InvalidToken as e:
            log.warning("OAUTHBEARER token refused: %s", e)
            self._error = INVALID_TOKEN_CHALLENGE
            return self._error.encode()
        if response.authorization_id and response.authorization_id != validated.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal "
                f"name ({validated.principal_name})"
            )
        self._token = validated
        return b""
