"""One connection's SASL states: what may come when, and the answers a failure carries."""

from __future__ import annotations

import asyncio
from types import MappingProxyType, SimpleNamespace

import pytest

from odradek.broker.sasl_authenticator import (
    AuthenticationFailed,
    ListenerSasl,
    SaslAuthenticator,
    UnexpectedRequest,
)
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey


async def _no_credentials(user, mechanism):
    return None


def _authenticator() -> SaslAuthenticator:
    sasl = ListenerSasl(
        "SASL",
        ("PLAIN", "SCRAM-SHA-512"),
        MappingProxyType({"alice": "alice-secret"}),
        _no_credentials,
        100,
        524288,
    )
    return SaslAuthenticator(sasl)


def _header(api_key: int, version: int = 1):
    return SimpleNamespace(api_key=api_key, api_version=version)


def test_plain_completes_after_versions_and_a_handshake():
    auth = _authenticator()
    auth.check_allowed(_header(ApiKey.API_VERSIONS, 3))
    with pytest.raises(UnexpectedRequest, match="SaslAuthenticate during SASL handshake"):
        auth.check_allowed(_header(ApiKey.SASL_AUTHENTICATE))
    auth.check_allowed(_header(ApiKey.SASL_HANDSHAKE))
    answer = auth.handshake(_header(ApiKey.SASL_HANDSHAKE), SimpleNamespace(mechanism="PLAIN"))
    assert answer.error_code is ErrorCode.none
    assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    for api_key in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.SASL_HANDSHAKE):
        with pytest.raises(UnexpectedRequest, match="during SASL authentication with PLAIN"):
            auth.check_allowed(_header(api_key))
    request = SimpleNamespace(auth_bytes=b"\x00alice\x00alice-secret")
    answer = asyncio.run(auth.authenticate(_header(ApiKey.SASL_AUTHENTICATE, 2), request))
    assert answer.error_code is ErrorCode.none
    assert auth.complete and auth.user == "alice"


def test_an_unsupported_mechanism_and_a_wrong_password_fail_with_kafkas_errors():
    auth = _authenticator()
    with pytest.raises(AuthenticationFailed) as failed:
        auth.handshake(_header(ApiKey.SASL_HANDSHAKE), SimpleNamespace(mechanism="GSSAPI"))
    assert failed.value.response.error_code is ErrorCode.unsupported_sasl_mechanism
    assert failed.value.response.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert failed.value.mechanism == "unsupported"
    with pytest.raises(UnexpectedRequest, match="after a failed SASL authentication"):
        auth.check_allowed(_header(ApiKey.SASL_HANDSHAKE))  # one failure, one delay
    auth = _authenticator()
    auth.handshake(_header(ApiKey.SASL_HANDSHAKE), SimpleNamespace(mechanism="SCRAM-SHA-512"))
    request = SimpleNamespace(auth_bytes=b"n,,n=alice,r=abcdef")
    with pytest.raises(AuthenticationFailed) as failed:
        asyncio.run(auth.authenticate(_header(ApiKey.SASL_AUTHENTICATE, 1), request))
    response = failed.value.response
    assert response.error_code is ErrorCode.sasl_authentication_failed
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in response.error_message
    assert not auth.complete


def test_after_a_v0_handshake_the_tokens_are_raw_and_kafka_requests_resume_once_complete():
    auth = _authenticator()
    auth.handshake(_header(ApiKey.SASL_HANDSHAKE, 0), SimpleNamespace(mechanism="PLAIN"))
    assert auth.expects_raw_token and not auth.complete
    with pytest.raises(UnexpectedRequest):  # a SaslAuthenticate request is not a v0 token
        auth.check_allowed(_header(ApiKey.SASL_HANDSHAKE))
    answer = asyncio.run(auth.authenticate_raw(b"\x00alice\x00alice-secret"))
    assert answer == b""  # PLAIN's empty token: sent as an empty frame, as Kafka's
    assert auth.complete and not auth.expects_raw_token and auth.user == "alice"


def test_a_refused_raw_token_fails_without_an_answer():
    auth = _authenticator()
    auth.handshake(_header(ApiKey.SASL_HANDSHAKE, 0), SimpleNamespace(mechanism="PLAIN"))
    with pytest.raises(AuthenticationFailed, match="not UTF-8") as failed:
        asyncio.run(auth.authenticate_raw(b"\xff garbage"))
    assert failed.value.response is None and failed.value.mechanism == "PLAIN"
    assert not auth.expects_raw_token and not auth.complete
    with pytest.raises(UnexpectedRequest, match="after a failed SASL authentication"):
        auth.check_allowed(_header(ApiKey.API_VERSIONS, 3))


def test_a_v1_handshake_takes_no_raw_token():
    auth = _authenticator()
    auth.handshake(_header(ApiKey.SASL_HANDSHAKE, 1), SimpleNamespace(mechanism="PLAIN"))
    assert not auth.expects_raw_token
    with pytest.raises(RuntimeError, match="outside a SaslHandshake v0 exchange"):
        asyncio.run(auth.authenticate_raw(b"\x00alice\x00alice-secret"))
