"""PLAIN and SCRAM servers against scramp's client, and Kafka's SCRAM credential format."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

import pytest
import scramp

from odradek.security.sasl import PlainServer, SaslAuthenticationError, ScramServer
from odradek.security.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_password,
    credential_from_salted_password,
    sanitize,
)


def run(coro):
    return asyncio.run(coro)


def test_plain_accepts_the_right_password_only():
    server = PlainServer({"alice": "alice-secret"})
    assert run(server.evaluate_response(b"\x00alice\x00alice-secret")) == b""
    assert server.complete and server.authorization_id == "alice"
    for token in (b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret"):
        with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
            run(PlainServer({"alice": "alice-secret"}).evaluate_response(token))
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        run(PlainServer({"alice": "a"}).evaluate_response(b"bob\x00alice\x00a"))
    with pytest.raises(SaslAuthenticationError, match="expected 3 tokens, got 2"):
        run(PlainServer({}).evaluate_response(b"alice\x00a"))


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_with_scramps_client(mechanism):
    stored = {"alice": credential_from_password(mechanism, "alice-secret", 4096)}

    async def lookup(user, m):
        assert m is mechanism
        return stored.get(user)

    async def exchange(user, password):
        client = scramp.ScramClient([mechanism.mechanism_name], user, password)
        server = ScramServer(mechanism, lookup)
        first = await server.evaluate_response(client.get_client_first().encode())
        client.set_server_first(first.decode())
        final = await server.evaluate_response(client.get_client_final().encode())
        client.set_server_final(final.decode())  # checks the server's signature
        return server

    server = run(exchange("alice", "alice-secret"))
    assert server.complete and server.authorization_id == "alice"
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        with pytest.raises(SaslAuthenticationError, match="due to invalid credentials"):
            run(exchange(user, password))


def _rfc5802_client_final(mechanism, password, server_first, client_first_bare, nonce):
    """The client's final message and the server signature it expects, computed from RFC 5802
    with hashlib alone (scramp's own client refuses salts shorter than 12 bytes)."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    assert fields["r"].startswith(nonce)
    digest = "sha256" if mechanism is ScramMechanism.SCRAM_SHA_256 else "sha512"
    salted = hashlib.pbkdf2_hmac(
        digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.digest(salted, b"Server Key", digest)
    expected = base64.b64encode(hmac.digest(server_key, auth_message, digest)).decode()
    return f"{without_proof},p={base64.b64encode(proof).decode()}", f"v={expected}"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_with_a_short_salt_as_kafka_takes_one(mechanism):
    # AlterUserScramCredentials takes the client's salt; Kafka accepts any non-empty one (and
    # confluent-kafka-python's own test upserts b"salt"), so the server must serve it.
    digest = "sha256" if mechanism is ScramMechanism.SCRAM_SHA_256 else "sha512"
    salted = hashlib.pbkdf2_hmac(digest, b"password", b"salt", 10000)
    stored = credential_from_salted_password(mechanism, b"salt", salted, 10000)

    async def lookup(user, m):
        return stored if user == "non-existent" else None

    async def exchange(password):
        server = ScramServer(mechanism, lookup)
        bare = "n=non-existent,r=abcdefghijklmnop"
        first = (await server.evaluate_response(f"n,,{bare}".encode())).decode()
        final, expected = _rfc5802_client_final(
            mechanism, password, first, bare, "abcdefghijklmnop"
        )
        answer = await server.evaluate_response(final.encode())
        assert answer.decode() == expected
        return server

    server = run(exchange("password"))
    assert server.complete and server.authorization_id == "non-existent"
    with pytest.raises(SaslAuthenticationError, match="due to invalid credentials"):
        run(exchange("wrong"))


def test_credential_format_is_kafkas_and_round_trips():
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential = credential_from_password(mechanism, "pw", 4096)
    text = credential.encode()
    assert text.startswith(f"salt={base64.b64encode(credential.salt).decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.decode(text) == credential
    salted = scramp.utils.hi(mechanism.scramp.hf, b"pw", credential.salt, 4096)
    assert credential_from_salted_password(mechanism, credential.salt, salted, 4096) == credential
    with pytest.raises(ValueError):
        ScramCredential.decode("salt=xx,iterations=1")


def test_user_names_are_sanitized_as_kafkas():
    assert sanitize("alice") == "alice"
    assert sanitize("a b*c/d~.-_") == "a%20b%2Ac%2Fd%7E.-_"


def test_a_clients_salted_password_is_stored_as_the_password_would_be():
    """``salted_password`` (what the operator sends in AlterUserScramCredentials) gives the
    credential the password itself gives with that salt, SASLprep applied."""
    from odradek.security.scram import (
        ScramMechanism,
        credential_from_password,
        credential_from_salted_password,
        salted_password,
    )

    for mechanism in ScramMechanism:
        made = credential_from_password(mechanism, "p\u00e4ss\u00a0word", 4096)
        salted = salted_password(mechanism, "p\u00e4ss\u00a0word", made.salt, 4096)
        assert credential_from_salted_password(mechanism, made.salt, salted, 4096) == made
        other = salted_password(mechanism, "other", made.salt, 4096)
        assert credential_from_salted_password(mechanism, made.salt, other, 4096) != made
