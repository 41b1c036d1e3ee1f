"""One connection's SASL states: what may come when, the answers a failure carries, and KIP-368's
session lifetime and re-authentication on a virtual clock."""

from __future__ import annotations

import asyncio
from types import MappingProxyType, SimpleNamespace

import pytest

from odradek.broker.sasl_authenticator import (
    MIN_REAUTH_INTERVAL_MS,
    AuthenticationFailed,
    ListenerSasl,
    SaslAuthenticator,
    UnexpectedRequest,
)
from odradek.common.clock import ManualClock
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.security.sasl import PlainServer


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


USERS = MappingProxyType({"alice": "alice-secret", "bob": "bob-secret"})


def _listener(max_reauth_ms: int) -> ListenerSasl:
    return ListenerSasl(
        "SASL",
        ("PLAIN", "SCRAM-SHA-512"),
        USERS,
        _no_credentials,
        100,
        524288,
        MappingProxyType({"PLAIN": max_reauth_ms, "SCRAM-SHA-512": max_reauth_ms}),
    )


def _plain(auth: SaslAuthenticator, user: str = "alice", version: int = 2):
    auth.handshake(_header(ApiKey.SASL_HANDSHAKE), SimpleNamespace(mechanism="PLAIN"))
    token = SimpleNamespace(auth_bytes=f"\0{user}\0{USERS[user]}".encode())
    return asyncio.run(auth.authenticate(_header(ApiKey.SASL_AUTHENTICATE, version), token))


def test_without_connections_max_reauth_ms_the_session_never_expires():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(0), clock)
    assert _plain(auth).session_lifetime.total_seconds() == 0  # Kafka's default
    assert auth.session_expires_at_ms is None
    clock.now_ms += 10**9
    assert not auth.session_expired()
    assert not auth.begin_reauthentication()  # the handshake goes to its handler


def test_the_session_lifetime_is_connections_max_reauth_ms_and_then_it_expires():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(2000), clock)
    answer = _plain(auth)
    assert answer.session_lifetime.total_seconds() * 1000 == 2000
    clock.now_ms += 2000
    assert not auth.session_expired()
    clock.now_ms += 1
    assert auth.session_expired()


def test_a_re_authentication_renews_the_session_at_most_once_a_second():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(2000), clock)
    _plain(auth)
    clock.now_ms += 1700
    assert auth.begin_reauthentication()
    assert auth.reauthenticating and not auth.complete
    with pytest.raises(UnexpectedRequest, match="re-authentication"):
        auth.check_allowed(_header(ApiKey.API_VERSIONS, 3))  # Kafka takes the handshake only
    clock.now_ms += 5
    answer = _plain(auth)
    assert answer.error_code is ErrorCode.none
    assert answer.session_lifetime.total_seconds() * 1000 == 2000  # from now
    assert auth.complete and auth.user == "alice" and not auth.reauthenticating
    assert auth.successful_authentications == 2
    assert auth.session_expires_at_ms == clock.now_ms + 2000
    clock.now_ms += MIN_REAUTH_INTERVAL_MS - 10
    assert not auth.begin_reauthentication()  # within a second of the last one
    clock.now_ms += 10
    assert auth.begin_reauthentication()


def test_a_re_authentication_as_another_user_fails_with_kafkas_message():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(2000), clock)
    _plain(auth, "alice")
    clock.now_ms += 1800
    assert auth.begin_reauthentication()
    with pytest.raises(AuthenticationFailed) as failed:
        _plain(auth, "bob")
    assert failed.value.response.error_code is ErrorCode.sasl_authentication_failed
    assert failed.value.response.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert not auth.complete and auth.reauthenticating
    with pytest.raises(UnexpectedRequest, match="after a failed SASL re-authentication"):
        auth.check_allowed(_header(ApiKey.METADATA))


def test_a_re_authentication_with_another_mechanism_fails_at_its_first_token():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(2000), clock)
    _plain(auth)
    clock.now_ms += 1800
    assert auth.begin_reauthentication()
    handshake = auth.handshake(
        _header(ApiKey.SASL_HANDSHAKE), SimpleNamespace(mechanism="SCRAM-SHA-512")
    )
    assert handshake.error_code is ErrorCode.none  # as Kafka: the token fails, not this
    token = SimpleNamespace(auth_bytes=b"n,,n=alice,r=abcdef")
    with pytest.raises(AuthenticationFailed) as failed:
        asyncio.run(auth.authenticate(_header(ApiKey.SASL_AUTHENTICATE, 2), token))
    assert failed.value.response.error_message == (
        "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )
    assert failed.value.mechanism == "PLAIN"


def test_requests_other_than_the_exchange_fail_a_re_authentication():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(2000), clock)
    _plain(auth)
    clock.now_ms += 1800
    assert auth.begin_reauthentication()
    auth.handshake(_header(ApiKey.SASL_HANDSHAKE), SimpleNamespace(mechanism="PLAIN"))
    with pytest.raises(UnexpectedRequest, match="Produce during SASL re-authentication with PLAIN"):
        auth.check_allowed(_header(ApiKey.PRODUCE))


class _ExpiringPlain(PlainServer):
    """PLAIN whose credential expires, as an OAUTHBEARER token's ``exp`` does."""

    def __init__(self, users, expires_at_ms: int):
        super().__init__(users)
        self.expires_at_ms = expires_at_ms

    @property
    def credential_expires_at_ms(self) -> int | None:
        return self.expires_at_ms


class _ExpiringListener(ListenerSasl):
    expires_at_ms = 0

    def server(self, mechanism):
        return _ExpiringPlain(self.plain_users, type(self).expires_at_ms)


@pytest.mark.parametrize(
    ("max_reauth_ms", "credential_left_ms", "lifetime_ms"),
    [(2000, 500, 500), (2000, 5000, 2000), (0, 500, 500), (2000, -100, 0)],
)
def test_the_session_lifetime_is_bounded_by_the_credentials_expiry(
    max_reauth_ms, credential_left_ms, lifetime_ms
):
    clock = ManualClock(now_ms=1_800_000_000_000)
    _ExpiringListener.expires_at_ms = clock.now_ms + credential_left_ms
    listener = _ExpiringListener(
        "SASL", ("PLAIN",), USERS, _no_credentials, 100, 524288, {"PLAIN": max_reauth_ms}
    )
    auth = SaslAuthenticator(listener, clock)
    assert _plain(auth).session_lifetime.total_seconds() * 1000 == lifetime_ms
    assert auth.session_expires_at_ms == clock.now_ms + lifetime_ms
    clock.now_ms += lifetime_ms + 1
    assert auth.session_expired()


def test_saslauthenticate_v0_has_no_lifetime_field_but_the_session_still_expires():
    clock = ManualClock(now_ms=1_800_000_000_000)
    auth = SaslAuthenticator(_listener(2000), clock)
    answer = _plain(auth, version=0)
    assert not hasattr(answer, "session_lifetime")
    clock.now_ms += 2001
    assert auth.session_expired()  # a client that cannot re-authenticate is disconnected
