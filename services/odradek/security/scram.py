"""SCRAM credentials as Kafka stores them, and the SCRAM mechanisms' fixed facts.

Kafka keeps a user's SCRAM credentials in ``/config/users/<sanitized user>`` among the user's
other configs (quotas), one key per mechanism (``ScramCredentialUtils``)::

    {"version":1,"config":{"SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

Only the salt, the stored key (H(HMAC(SaltedPassword, "Client Key"))) and the server key
(HMAC(SaltedPassword, "Server Key")) are stored: never the password nor the salted password.
Base64 is the standard alphabet with padding, as Java's ``Base64.getEncoder``.

``ScramMechanism`` carries Kafka's names, wire types (DescribeUserScramCredentials and
AlterUserScramCredentials: SCRAM-SHA-256 = 1, SCRAM-SHA-512 = 2) and iteration bounds (at least
4096, Kafka's ``minIterations``; at most 16384, the bound of Kafka's AlterUserScramCredentials).
The crypto is ``scramp``'s. ``sanitize`` is Kafka's ``Sanitizer.sanitize``, which names the
znode. Values and pure functions: any thread.
"""

from __future__ import annotations

import base64
import binascii
import enum
import urllib.parse
from dataclasses import dataclass

import scramp
from scramp import utils as scramp_utils

__all__ = [
    "ITERATIONS_MAX",
    "ScramCredential",
    "ScramMechanism",
    "credential_from_password",
    "credential_from_salted_password",
    "salted_password",
    "sanitize",
    "unsanitize",
]

ITERATIONS_MAX = 16384  # AlterUserScramCredentials refuses more, as Kafka's


class ScramMechanism(enum.Enum):
    """(mechanism name, wire type, minimum iterations)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, 4096)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, 4096)

    @property
    def mechanism_name(self) -> str:
        return self.value[0]

    @property
    def wire_type(self) -> int:
        return self.value[1]

    @property
    def min_iterations(self) -> int:
        return self.value[2]

    @property
    def scramp(self) -> scramp.ScramMechanism:
        return scramp.ScramMechanism(self.mechanism_name)

    @property
    def digest_bytes(self) -> int:
        return 32 if self is ScramMechanism.SCRAM_SHA_256 else 64

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def by_wire_type(cls, wire_type: int) -> ScramMechanism | None:
        return next((m for m in cls if m.wire_type == wire_type), None)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # the keys are secrets (an offline dictionary attack's input)
        return f"ScramCredential(iterations={self.iterations})"

    def encode(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        """Kafka's ``credentialFromString``; ``ValueError`` (without the value) if malformed."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            name, equals, value = part.partition("=")
            if not equals or name in fields:
                raise ValueError("a SCRAM credential is salt=,stored_key=,server_key=,iterations=")
            fields[name] = value
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(
                f"a SCRAM credential has salt, stored_key, server_key and iterations; found "
                f"{sorted(fields)}"
            )
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"a SCRAM credential field does not decode: {type(e).__name__}") from e

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """What ``scramp``'s server asks its ``auth_fn`` for."""
        return self.salt, self.stored_key, self.server_key, self.iterations


def credential_from_password(
    mechanism: ScramMechanism, password: str, iterations: int
) -> ScramCredential:
    """A new credential with a random salt (tests and tools; the broker is given salted ones)."""
    salt, stored_key, server_key, _ = mechanism.scramp.make_auth_info(
        password, iteration_count=iterations
    )
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802's SaltedPassword, Hi(Normalize(password), salt, i): what a client sends in an
    AlterUserScramCredentials upsertion (the password itself never leaves the client)."""
    normalized = scramp_utils.uenc(scramp_utils.saslprep(password))
    return scramp_utils.hi(mechanism.scramp.hf, normalized, salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials' upsertion (salt, SaltedPassword) is stored as."""
    hf = mechanism.scramp.hf
    client_key = scramp_utils.hmac(hf, salted_password, b"Client Key")
    stored_key = scramp_utils.h(hf, client_key)
    server_key = scramp_utils.hmac(hf, salted_password, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's URL encoding (UTF-8) with ``*`` as ``%2A`` and a
    space as ``%20``; letters, digits, ``.``, ``-`` and ``_`` stay as they are."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def unsanitize(name: str) -> str:
    return urllib.parse.unquote(name)
