"""SASL/OAUTHBEARER's validator, key sources and exchange with tokens signed by keys made here
(RSA and EC via cryptography): what is accepted, and every refusal Kafka's validator makes."""

from __future__ import annotations

import asyncio
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from odradek.errors import InvalidConfigError
from odradek.security.jwks import FileJwks, HttpJwks, JwksSettings
from odradek.security.oauthbearer import (
    INVALID_TOKEN_CHALLENGE,
    ClaimRules,
    InvalidToken,
    OAuthBearerServer,
    TokenValidator,
    parse_client_initial_response,
    parse_jwks,
)
from odradek.security.sasl import SaslAuthenticationError

NOW = 1_800_000_000.0
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
RULES = ClaimRules(expected_audience=("kafka",), expected_issuer="https://idp.test")


def run(coro):
    return asyncio.run(coro)


def jwk(private_key, kid: str, **extra) -> dict:
    algorithm = RSAAlgorithm if isinstance(private_key, rsa.RSAPrivateKey) else ECAlgorithm
    return {**algorithm.to_jwk(private_key.public_key(), as_dict=True), "kid": kid, **extra}


def jwks_bytes(*keys: dict) -> bytes:
    return json.dumps({"keys": list(keys)}).encode()


def token(private_key=RSA_KEY, kid: str | None = "rsa-1", alg="RS256", **claims) -> str:
    body = {
        "sub": "alice",
        "aud": "kafka",
        "iss": "https://idp.test",
        "iat": int(NOW) - 10,
        "exp": int(NOW) + 300,
        **claims,
    }
    body = {k: v for k, v in body.items() if v is not None}
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(body, private_key, algorithm=alg, headers=headers)


class Endpoint:
    """A JWKS endpoint's answers, as HttpJwks's fetch sees them; counts the fetches."""

    def __init__(self, *keys: dict):
        self.keys = list(keys)
        self.fetches = 0
        self.down = False
        self.body: bytes | None = None  # an answer other than the keys

    async def fetch(self, url: str) -> bytes:
        self.fetches += 1
        if self.down:
            raise OSError("connection refused")
        return self.body if self.body is not None else jwks_bytes(*self.keys)


async def _http_validator(endpoint: Endpoint, rules=RULES, **settings) -> TokenValidator:
    keys = HttpJwks(JwksSettings("http://idp.test/jwks", **settings), fetch=endpoint.fetch)
    await keys.start()
    for _ in range(100):  # the first fetch, in the background
        if endpoint.fetches:
            break
        await asyncio.sleep(0.001)
    return TokenValidator(keys, rules, clock=lambda: NOW)


def validate(raw: str, *keys: dict, rules=RULES, now=NOW):
    async def go():
        validator = await _http_validator(Endpoint(*keys), rules)
        validator._clock = lambda: now
        try:
            return await validator.validate(raw)
        finally:
            await validator.keys.close()

    return run(go())


def test_a_good_rs256_and_es256_token_name_the_sub_and_the_expiry():
    accepted = validate(token(scope="read write"), jwk(RSA_KEY, "rsa-1"))
    assert accepted.principal_name == "alice"
    assert accepted.lifetime_ms == (int(NOW) + 300) * 1000
    assert accepted.scope == frozenset({"read write"})  # Kafka: a string is one scope
    es = token(EC_KEY, kid="ec-1", alg="ES256", sub=" bob ")
    assert validate(es, jwk(EC_KEY, "ec-1")).principal_name == "bob"
    # without a kid, each fitting key is tried
    assert validate(token(kid=None), jwk(OTHER_RSA_KEY, "x"), jwk(RSA_KEY, "y")).principal_name


@pytest.mark.parametrize(
    ("claims", "rules", "words"),
    [
        ({"exp": int(NOW) - 31}, RULES, "expired"),
        ({"exp": None}, RULES, 'missing the "exp" claim'),
        ({"iat": None}, RULES, 'missing the "iat" claim'),
        ({"iat": int(NOW) + 60}, RULES, "issued in the future"),
        ({"nbf": int(NOW) + 60}, RULES, "not valid before"),
        ({"aud": "someone-else"}, RULES, "Audience doesn.t match"),
        ({"aud": None}, RULES, 'missing the "aud" claim'),
        ({}, ClaimRules(), "Invalid audience"),  # an aud, but none expected (jose4j's default)
        ({"iss": "https://evil.test"}, RULES, "issuer"),
        ({"sub": None}, RULES, "'sub' claim is missing"),
        ({"sub": "  "}, RULES, "'sub' claim is missing"),
        ({"scope": ["a", "a"]}, RULES, "twice"),
        ({"exp": "tomorrow"}, RULES, "exp"),
    ],
)
def test_claims_kafka_refuses(claims, rules, words):
    with pytest.raises(InvalidToken, match=words):
        validate(token(**claims), jwk(RSA_KEY, "rsa-1"), rules=rules)


def test_clock_skew_and_a_chosen_sub_claim():
    late = token(exp=int(NOW) - 20)  # expired 20 s ago: within the 30 s of skew
    assert validate(late, jwk(RSA_KEY, "rsa-1")).principal_name == "alice"
    with pytest.raises(InvalidToken, match="expired"):
        validate(late, jwk(RSA_KEY, "rsa-1"), rules=ClaimRules(("kafka",), clock_skew_seconds=0))
    rules = ClaimRules(("kafka",), sub_claim_name="client_id")
    assert validate(token(client_id="svc"), jwk(RSA_KEY, "rsa-1"), rules=rules).principal_name == (
        "svc"
    )


def test_a_bad_signature_alg_none_hmac_and_a_mismatched_key_are_refused():
    forged = token(OTHER_RSA_KEY)  # kid rsa-1, signed by another key
    with pytest.raises(InvalidToken, match="signature"):
        validate(forged, jwk(RSA_KEY, "rsa-1"))
    unsigned = jwt.encode({"sub": "alice"}, key=None, algorithm="none", headers={"kid": "rsa-1"})
    with pytest.raises(InvalidToken, match="'none' is not allowed"):
        validate(unsigned, jwk(RSA_KEY, "rsa-1"))
    hmac = jwt.encode({"sub": "a"}, "secret-of-32-bytes-at-least-xxxxx", algorithm="HS256")
    oct_key = {"kty": "oct", "k": "c2VjcmV0", "kid": "rsa-1"}
    with pytest.raises(InvalidToken, match="'HS256' is not allowed"):
        validate(hmac, oct_key, jwk(RSA_KEY, "rsa-1"))
    # An RS256 token whose kid names an EC key, or a key whose own alg is another
    with pytest.raises(InvalidToken, match="no suitable verification key"):
        validate(token(kid="ec-1"), jwk(EC_KEY, "ec-1"))
    with pytest.raises(InvalidToken, match="no suitable verification key"):
        validate(token(), jwk(RSA_KEY, "rsa-1", alg="PS256"))
    with pytest.raises(InvalidToken, match="malformed JWT"):
        validate("not.a.jwt", jwk(RSA_KEY, "rsa-1"))


def test_parse_jwks_keeps_signing_keys_only():
    keys = parse_jwks(
        jwks_bytes(
            jwk(RSA_KEY, "sig"),
            jwk(RSA_KEY, "enc", use="enc"),
            {"kty": "oct", "k": "c2VjcmV0", "kid": "sym"},
            {"kty": "EC", "crv": "P-256", "x": "bad", "y": "bad", "kid": "broken"},
            jwk(EC_KEY, "ec"),
        )
    )
    assert [k.kid for k in keys] == ["sig", "ec"]
    for bad in (b"{", b'{"keys": 3}', b"[]"):
        with pytest.raises(ValueError):
            parse_jwks(bad)


def test_an_unknown_kid_refreshes_the_jwks_once_per_backoff():
    async def go():
        endpoint = Endpoint(jwk(RSA_KEY, "rsa-1"))
        validator = await _http_validator(endpoint, retry_backoff_ms=60000)
        try:
            assert endpoint.fetches == 1
            endpoint.keys.append(jwk(OTHER_RSA_KEY, "rsa-2"))  # the provider rotates its keys
            rotated = await validator.validate(token(OTHER_RSA_KEY, kid="rsa-2"))
            assert rotated.principal_name == "alice" and endpoint.fetches == 2
            # another made-up kid within the backoff: no fetch, refused at once
            with pytest.raises(InvalidToken, match="no suitable verification key"):
                await validator.validate(token(kid="made-up"))
            assert endpoint.fetches == 2
        finally:
            await validator.keys.close()

    run(go())


def test_a_jwks_endpoint_down_keeps_the_last_keys_and_stalls_no_known_token():
    async def go():
        endpoint = Endpoint(jwk(RSA_KEY, "rsa-1"))
        validator = await _http_validator(
            endpoint, retry_backoff_ms=1, retry_backoff_max_ms=5, refresh_ms=1
        )
        try:
            endpoint.body = b"<html>503 Service Unavailable</html>"
            await asyncio.sleep(0.03)  # periodic refreshes get no JWKS meanwhile
            endpoint.down = True
            fetches = endpoint.fetches
            await asyncio.sleep(0.03)  # and then no answer at all
            assert endpoint.fetches > fetches > 1
            started = time.monotonic()
            assert (await validator.validate(token())).principal_name == "alice"
            assert time.monotonic() - started < 0.5
            with pytest.raises(InvalidToken, match="no suitable verification key"):
                await validator.validate(token(OTHER_RSA_KEY, kid="rsa-2"))
        finally:
            await validator.keys.close()

    run(go())


def test_a_jwks_file_is_read_at_start(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_bytes(jwks_bytes(jwk(RSA_KEY, "rsa-1")))

    async def go(url):
        keys = FileJwks(url)
        await keys.start()
        validator = TokenValidator(keys, RULES, clock=lambda: NOW)
        assert (await validator.validate(token())).principal_name == "alice"
        with pytest.raises(InvalidToken, match="no suitable"):
            await validator.validate(token(OTHER_RSA_KEY, kid="rsa-2"))

    run(go(path.as_uri()))
    with pytest.raises(InvalidConfigError, match="cannot read a JWKS"):
        run(go((tmp_path / "missing.json").as_uri()))


def test_the_initial_response_as_kafka_parses_it():
    parsed = parse_client_initial_response(
        b"n,a=alice,\x01auth=Bearer abc.def-_~+/=\x01k=v w\x01\x01"
    )
    assert (parsed.token, parsed.authorization_id) == ("abc.def-_~+/=", "alice")
    assert dict(parsed.extensions) == {"k": "v w"}
    assert "abc" not in repr(parsed)
    assert parse_client_initial_response(b"n,,\x01auth=bearer t\x01\x01").token == "t"
    for bad in (
        b"n,,\x01auth=Basic dXNlcg==\x01\x01",
        b"n,,\x01k=v\x01\x01",
        b"y,,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"\xff",
    ):
        with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
            parse_client_initial_response(bad)


def _initial(raw: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {raw}\x01\x01".encode()


def test_the_exchange_ends_with_kafkas_error_after_the_clients_ctrl_a():
    async def go():
        validator = await _http_validator(Endpoint(jwk(RSA_KEY, "rsa-1")))
        try:
            server = OAuthBearerServer(validator)
            assert await server.evaluate_response(_initial(token())) == b""
            assert server.complete and server.authorization_id == "alice"
            assert server.credential_expires_at_ms == (int(NOW) + 300) * 1000

            refused = OAuthBearerServer(validator)
            challenge = await refused.evaluate_response(_initial(token(exp=int(NOW) - 100)))
            assert challenge == INVALID_TOKEN_CHALLENGE.encode() == b'{"status":"invalid_token"}'
            assert not refused.complete and refused.credential_expires_at_ms is None
            with pytest.raises(SaslAuthenticationError) as failed:
                await refused.evaluate_response(b"\x01")
            assert str(failed.value) == INVALID_TOKEN_CHALLENGE

            other = OAuthBearerServer(validator)
            with pytest.raises(SaslAuthenticationError, match="different from the token's"):
                await other.evaluate_response(_initial(token(), authzid="bob"))
        finally:
            await validator.keys.close()

    run(go())
