"""``--command-config FILE``: a Kafka client properties file, as Kafka's tools take it, turned into
librdkafka's settings (and, for the commands on Odradek's own client, into a
``client.security.ClientSecurity``: TLS, SASL PLAIN or SCRAM).

The file is a Java ``.properties`` file (``config.properties.parse_properties``). Accepted keys:

- librdkafka's own security keys pass through as they are (``security.protocol``,
  ``sasl.mechanism`` or ``sasl.mechanisms``, ``sasl.username``, ``sasl.password``,
  ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm``, ``client.id``), so the file that ``odradek local up
  --security sasl_ssl`` writes works as is;
- the Java client's keys are translated: ``sasl.jaas.config`` with Kafka's ``PlainLoginModule``
  or ``ScramLoginModule`` and its ``username``/``password`` options becomes ``sasl.username`` and
  ``sasl.password``; ``ssl.truststore.location`` with ``ssl.truststore.type=PEM`` becomes
  ``ssl.ca.location``; ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (the private key
  and the certificate chain in one file, as Kafka's PEM keystore holds them) becomes both
  ``ssl.certificate.location`` and ``ssl.key.location`` (librdkafka's own
  ``ssl.keystore.location`` is a PKCS#12 file: a different thing under the same name);
- ``sasl.mechanism=OAUTHBEARER`` with librdkafka's OIDC client-credentials keys, which pass
  through (``sasl.oauthbearer.method=oidc``, ``sasl.oauthbearer.client.id``,
  ``sasl.oauthbearer.client.secret``, ``sasl.oauthbearer.token.endpoint.url``, optional
  ``sasl.oauthbearer.scope``): librdkafka fetches the token. The Java client's (KIP-768)
  ``sasl.login.callback.handler.class=...OAuthBearerLoginCallbackHandler`` with
  ``sasl.jaas.config=...OAuthBearerLoginModule required clientId=".." clientSecret=".."
  [scope=".."];`` becomes them. For the commands on librdkafka only: ``client_security``
  (Odradek's own client) refuses it;
- ``bootstrap.servers`` is kept apart: the commands use it when ``--bootstrap-server`` is not
  given.

Refused, with the key named (an accepted setting is one the commands honour): JKS and PKCS12
stores, store passwords, the GSSAPI mechanism, OAUTHBEARER other than librdkafka's OIDC
(``sasl.oauthbearer.method=default`` makes librdkafka sign its own unsecured token, and the Java
``OAuthBearerLoginModule`` without the OIDC handler is Kafka's unsecured login: the brokers
refuse both; other ``sasl.login.*`` keys are not taken), any other login module or JAAS option,
and every other key. A Java key and a librdkafka key that say different things (two passwords)
are refused too. Error messages never hold a value of a secret key.

Everything here is pure except ``load`` (reads the file) and ``client_security`` (reads the
PEM files it names); any thread.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from odradek.client.security import ClientSecurity, SaslCredentials
from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
from odradek.errors import InvalidConfigError
from odradek.security import jaas
from odradek.security.sasl import KNOWN_UNSUPPORTED_MECHANISMS, PASSWORD_MECHANISMS

__all__ = ["ClientProperties", "ClientPropertiesError", "load", "translate"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (*PASSWORD_MECHANISMS, OAUTHBEARER)  # OAUTHBEARER: librdkafka's OIDC only
UNSUPPORTED_MECHANISMS = KNOWN_UNSUPPORTED_MECHANISMS
OIDC_REQUIRED = (
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
)
OIDC_KEYS = (*OIDC_REQUIRED, "sasl.oauthbearer.scope")
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    OAUTHBEARER_LOGIN_MODULE: (OAUTHBEARER,),
}
# login module -> {JAAS option: librdkafka key}, and which options must be there
JAAS_OPTIONS = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": {
        "username": "sasl.username",
        "password": "sasl.password",
    },
    "org.apache.kafka.common.security.scram.ScramLoginModule": {
        "username": "sasl.username",
        "password": "sasl.password",
    },
    OAUTHBEARER_LOGIN_MODULE: {
        "clientId": "sasl.oauthbearer.client.id",
        "clientSecret": "sasl.oauthbearer.client.secret",
        "scope": "sasl.oauthbearer.scope",
    },
}
OPTIONAL_JAAS_OPTIONS = ("scope",)
# The Java client's OIDC login (KIP-768), which librdkafka's sasl.oauthbearer.method=oidc does.
OIDC_LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
PASS_THROUGH = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "client.id",
    *OIDC_KEYS,
)
ALIASES = {"sasl.mechanisms": "sasl.mechanism"}  # librdkafka takes both spellings
JAVA_KEYS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
)
SECRET_KEYS = (
    "sasl.password",
    "ssl.key.password",
    "sasl.jaas.config",
    "sasl.oauthbearer.client.secret",
)
ENDPOINT_ALGORITHMS = ("https", "none", "")


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
        sasl = None
        if protocol.startswith("SASL_") and settings.get("sasl.mechanism") == OAUTHBEARER:
            raise ClientPropertiesError(
                f"{self.source}: sasl.mechanism OAUTHBEARER is not supported by this command: it "
                f"runs on Odradek's own client, which speaks {', '.join(PASSWORD_MECHANISMS)} "
                f"(the commands on librdkafka, such as topics, produce and consume, take it)"
            )
        if protocol.startswith("SASL_"):
            sasl = SaslCredentials(
                settings["sasl.mechanism"], settings["sasl.username"], settings["sasl.password"]
            )
        return ClientSecurity(self._ssl_context() if protocol.endswith("SSL") else None, sasl)

    def _ssl_context(self) -> ssl.SSLContext:
        settings = self.librdkafka
        try:
            context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
            if "ssl.certificate.location" in settings:
                context.load_cert_chain(
                    settings["ssl.certificate.location"],
                    settings.get("ssl.key.location"),
                    settings.get("ssl.key.password"),
                )
        except (OSError, ssl.SSLError) as e:
            raise ClientPropertiesError(f"{self.source}: cannot load the TLS files: {e}") from e
        if settings.get("ssl.endpoint.identification.algorithm", "https") != "https":
            context.check_hostname = False
        return context


def _fail(source: str, line: int, key: str, reason: str) -> ClientPropertiesError:
    return ClientPropertiesError(f"{source}:{line}: {key}: {reason}")


def _store(entries: dict[str, tuple[str, int]], source: str, kind: str) -> str | None:
    """The PEM file of ``ssl.<kind>store.location``, or a refusal of any other store type."""
    location = entries.get(f"ssl.{kind}store.location")
    store_type = entries.get(f"ssl.{kind}store.type")
    if location is None:
        if store_type is not None:
            _, line = store_type
            raise _fail(source, line, f"ssl.{kind}store.type", f"no ssl.{kind}store.location")
        return None
    value, line = location
    if store_type is None or store_type[0].strip().upper() != "PEM":
        named = store_type[0].strip() if store_type else "JKS (the Java client's default)"
        raise _fail(
            source,
            line,
            f"ssl.{kind}store.location",
            f"ssl.{kind}store.type {named} is not supported: give a PEM file with "
            f"ssl.{kind}store.type=PEM",
        )
    return value.strip()


def _jaas(value: str, line: int, source: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(librdkafka's settings, mechanisms the login module serves) of a ``sasl.jaas.config``."""
    try:
        entry = jaas.parse(value)
    except jaas.JaasSyntaxError as e:
        raise _fail(source, line, "sasl.jaas.config", str(e)) from e
    mechanisms = LOGIN_MODULES.get(entry.login_module)
    if mechanisms is None:
        raise _fail(
            source,
            line,
            "sasl.jaas.config",
            f"login module {entry.login_module} is not supported (one of "
            f"{', '.join(LOGIN_MODULES)})",
        )
    options = JAAS_OPTIONS[entry.login_module]
    unknown = sorted(set(entry.options) - set(options))
    if unknown:
        raise _fail(source, line, "sasl.jaas.config", f"option {unknown[0]} is not supported")
    missing = [
        name for name in options if name not in entry.options and name not in OPTIONAL_JAAS_OPTIONS
    ]
    if missing:
        raise _fail(source, line, "sasl.jaas.config", f"option {missing[0]} is missing")
    return {options[name]: value for name, value in entry.options.items()}, mechanisms


def translate(text: str, source: str = "<command-config>") -> ClientProperties:
    """The settings of a client properties file's text; see the module."""
    config: dict[str, str] = {}
    lines: dict[str, int] = {}
    java: dict[str, tuple[str, int]] = {}
    bootstrap: str | None = None
    for entry in parse_properties(text, source):
        key = ALIASES.get(entry.key, entry.key)
        if key == "bootstrap.servers":
            bootstrap = entry.value.strip()
        elif key in PASS_THROUGH:
            config[key] = entry.value.strip()
            lines[key] = entry.line
        elif key in JAVA_KEYS:
            java[key] = (entry.value.strip(), entry.line)
        else:
            raise _fail(source, entry.line, entry.key, "not a client setting the commands honour")

    def put(key: str, value: str, line: int, from_key: str) -> None:
        if key in config and config[key] != value:
            shown = "" if key in SECRET_KEYS else f" ({config[key]!r} and {value!r})"
            raise _fail(
                source, line, from_key, f"says otherwise than {key} on line {lines[key]}{shown}"
            )
        config[key] = value
        lines.setdefault(key, line)

    ca = _store(java, source, "trust")
    if ca is not None:
        put("ssl.ca.location", ca, java["ssl.truststore.location"][1], "ssl.truststore.location")
    keystore = _store(java, source, "key")
    if keystore is not None:
        line = java["ssl.keystore.location"][1]
        put("ssl.certificate.location", keystore, line, "ssl.keystore.location")
        put("ssl.key.location", keystore, line, "ssl.keystore.location")
    jaas_mechanisms: tuple[str, ...] = ()
    if "sasl.jaas.config" in java:
        value, line = java["sasl.jaas.config"]
        translated, jaas_mechanisms = _jaas(value, line, source)
        for key, setting in translated.items():
            put(key, setting, line, "sasl.jaas.config")
    handler = java.get("sasl.login.callback.handler.class")
    if handler is not None:
        value, line = handler
        if value not in OIDC_LOGIN_HANDLERS or jaas_mechanisms != (OAUTHBEARER,):
            raise _fail(
                source,
                line,
                "sasl.login.callback.handler.class",
                f"only {OIDC_LOGIN_HANDLERS[0]} is supported, with sasl.jaas.config="
                f"{OAUTHBEARER_LOGIN_MODULE} (clientId, clientSecret, scope)",
            )
        put("sasl.oauthbearer.method", "oidc", line, "sasl.login.callback.handler.class")
    elif jaas_mechanisms == (OAUTHBEARER,):
        raise _fail(
            source,
            java["sasl.jaas.config"][1],
            "sasl.jaas.config",
            f"{OAUTHBEARER_LOGIN_MODULE} without sasl.login.callback.handler.class="
            f"{OIDC_LOGIN_HANDLERS[0]} is Kafka's unsecured login, which the brokers refuse",
        )

    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise _fail(
            source,
            lines["security.protocol"],
            "security.protocol",
            f"{protocol} is not one of {', '.join(PROTOCOLS)}",
        )
    mechanism = config.get("sasl.mechanism")
    if mechanism is not None:
        line = lines["sasl.mechanism"]
        if mechanism.upper() in UNSUPPORTED_MECHANISMS:
            raise _fail(source, line, "sasl.mechanism", f"{mechanism} is not supported yet")
        if mechanism not in MECHANISMS:
            raise _fail(
                source, line, "sasl.mechanism", f"{mechanism} is not one of {', '.join(MECHANISMS)}"
            )
        if jaas_mechanisms and mechanism not in jaas_mechanisms:
            raise _fail(
                source,
                line,
                "sasl.mechanism",
                f"{mechanism} does not go with sasl.jaas.config's login module",
            )
    elif jaas_mechanisms:
        raise _fail(
            source, java["sasl.jaas.config"][1], "sasl.jaas.config", "no sasl.mechanism given"
        )
    _check_oauthbearer(config, lines, source)
    if protocol.startswith("SASL_"):
        credentials = (
            OIDC_REQUIRED
            if config.get("sasl.mechanism") == OAUTHBEARER
            else ("sasl.username", "sasl.password")
        )
        needed = [k for k in ("sasl.mechanism", *credentials) if k not in config]
        if needed:
            raise _fail(
                source,
                lines["security.protocol"],
                "security.protocol",
                f"{protocol} needs sasl.mechanism ({', '.join(MECHANISMS)}) and "
                f"sasl.jaas.config (or sasl.username and sasl.password): no {needed[0]}",
            )
    algorithm = config.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.lower() not in ENDPOINT_ALGORITHMS:
        raise _fail(
            source,
            lines["ssl.endpoint.identification.algorithm"],
            "ssl.endpoint.identification.algorithm",
            f"{algorithm} is not https or empty",
        )
    if algorithm is not None:
        # Kafka's empty value turns the check off; librdkafka spells that "none".
        config["ssl.endpoint.identification.algorithm"] = algorithm.lower() or "none"
    return ClientProperties(config, bootstrap or None, source)


def _check_oauthbearer(config: dict[str, str], lines: dict[str, int], source: str) -> None:
    """OAUTHBEARER goes with librdkafka's OIDC keys, and they with it alone."""
    oauth = config.get("sasl.mechanism") == OAUTHBEARER
    for key in OIDC_KEYS if not oauth else ("sasl.username", "sasl.password"):
        if key in config:
            what = "sasl.mechanism=OAUTHBEARER" if not oauth else "OAUTHBEARER (a token)"
            raise _fail(source, lines[key], key, f"goes only with {what}")
    method = config.get("sasl.oauthbearer.method")
    if method is not None and method.lower() != "oidc":
        raise _fail(
            source,
            lines["sasl.oauthbearer.method"],
            "sasl.oauthbearer.method",
            f"{method} is not supported: only oidc (librdkafka's default method signs its own "
            f"unsecured token, which the brokers refuse)",
        )


def load(path: Path) -> ClientProperties:
    """``translate`` of the file at ``path``; a missing or unreadable file is refused."""
    try:
        if path.stat().st_size > PROPERTIES_FILE_MAX_BYTES:
            raise ClientPropertiesError(f"{path}: larger than {PROPERTIES_FILE_MAX_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ClientPropertiesError(f"cannot read {path}: {e}") from e
    return translate(text, str(path))
