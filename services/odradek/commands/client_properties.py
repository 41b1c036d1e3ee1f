"""``--command-config FILE``: a Kafka client properties file, as Kafka's tools take it, turned into
librdkafka's settings (and, for the commands on Odradek's own client, into a
``client.security.ClientSecurity``: TLS, SASL PLAIN or SCRAM).

The file is a Java ``.properties`` file (``config.properties.parse_properties``). This module is
the file-reading front end; the security keys' mapping has its one home in
``client.java_security`` (shared with Connect's workers and Spark's options), which says what is
translated, what passes through and what is refused. Here:

- ``security.protocol``, ``sasl.*`` and ``ssl.*`` keys go to ``java_security.translate``, and
  its refusals come back with the file's line (``client.properties:4: ssl.keystore.location:
  ...``), so the file that ``odradek local up --security sasl_ssl`` writes works as is;
- ``client.id`` passes through; ``bootstrap.servers`` is kept apart: the commands use it when
  ``--bootstrap-server`` is not given;
- every other key is refused with the key named (an accepted setting is one the commands
  honour); OAUTHBEARER (librdkafka's OIDC) is for the commands on librdkafka only:
  ``client_security`` (Odradek's own client) refuses it.

Error messages never hold a value of a secret key. Everything here is pure except ``load``
(reads the file) and ``client_security`` (reads the PEM files it names); any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from odradek.client import java_security
from odradek.client.java_security import OAUTHBEARER, JavaSecurityError
from odradek.client.security import ClientSecurity, client_security
from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
from odradek.errors import InvalidConfigError
from odradek.security.sasl import PASSWORD_MECHANISMS

__all__ = ["ClientProperties", "ClientPropertiesError", "load", "translate"]

OTHER_KEYS = ("client.id",)  # passed through besides the security keys


class ClientPropertiesError(InvalidConfigError):
    """A client properties file the commands cannot honour; the message names the key."""


@dataclass(frozen=True, slots=True)
class ClientProperties:
    """What a client properties file says: librdkafka's settings and the bootstrap address."""

    librdkafka: dict[str, str] = field(default_factory=dict)
    bootstrap_servers: str | None = None
    source: str = "<none>"

    @property
    def security_protocol(self) -> str:
        return self.librdkafka.get("security.protocol", "PLAINTEXT").upper()

    def client_security(self) -> ClientSecurity:
        """TLS and SASL for Odradek's own client (``client.security``), from the same settings."""
        protocol, settings = self.security_protocol, self.librdkafka
        if protocol.startswith("SASL_") and settings.get("sasl.mechanism") == OAUTHBEARER:
            raise ClientPropertiesError(
                f"{self.source}: sasl.mechanism OAUTHBEARER is not supported by this command: it "
                f"runs on Odradek's own client, which speaks {', '.join(PASSWORD_MECHANISMS)} "
                f"(the commands on librdkafka, such as topics, produce and consume, take it)"
            )
        try:
            return client_security(settings)
        except JavaSecurityError as e:
            raise ClientPropertiesError(f"{self.source}: {e}") from e


def _fail(source: str, line: int | None, key: str, reason: str) -> ClientPropertiesError:
    where = f"{source}:{line}" if line is not None else source
    return ClientPropertiesError(f"{where}: {key}: {reason}")


def translate(text: str, source: str = "<command-config>") -> ClientProperties:
    """The settings of a client properties file's text; see the module."""
    security: dict[str, str] = {}
    other: dict[str, str] = {}
    lines: dict[str, int] = {}
    bootstrap: str | None = None
    for entry in parse_properties(text, source):
        key = java_security.ALIASES.get(entry.key, entry.key)
        if key == "bootstrap.servers":
            bootstrap = entry.value.strip()
            continue
        if java_security.is_security_key(key):
            security[entry.key] = entry.value  # aliases resolved (and compared) by translate
        elif key in OTHER_KEYS:
            other[key] = entry.value.strip()
        else:
            raise _fail(source, entry.line, entry.key, "not a client setting the commands honour")
        lines.setdefault(key, entry.line)
        lines[entry.key] = entry.line
    try:
        config = java_security.translate(
            security, describe=lambda key: f"{key} on line {lines[key]}"
        )
    except java_security.JavaSecurityError as e:
        raise _fail(source, lines.get(e.key), e.key, e.reason) from e
    return ClientProperties({**config, **other}, bootstrap or None, source)


def load(path: Path) -> ClientProperties:
    """``translate`` of the file at ``path``; a missing or unreadable file is refused."""
    try:
        if path.stat().st_size > PROPERTIES_FILE_MAX_BYTES:
            raise ClientPropertiesError(f"{path}: larger than {PROPERTIES_FILE_MAX_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ClientPropertiesError(f"cannot read {path}: {e}") from e
    return translate(text, str(path))
