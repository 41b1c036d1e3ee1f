"""The REST listener's security, with Kafka Connect's keys: HTTPS and basic authentication.

HTTPS: ``listeners=https://host:port`` and Kafka's ``listeners.https.`` keys; when none is given,
the worker's top-level keys of the same names (Kafka's all-or-nothing prefix of
``RestServerConfig``):

- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (the private key and the certificate
  chain in one file) and ``ssl.key.password``: what the listener serves;
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location``: the CA the listener checks client
  certificates against and that forwarding to another worker trusts;
- ``ssl.client.auth``: ``none`` (Kafka's default), ``requested``, ``required``;
- ``ssl.endpoint.identification.algorithm``: ``https`` (default) or empty, for forwarding.

Any other ``listeners.https.*`` key, and a JKS or PKCS12 store, are refused naming the key. The
TLS is Python's ``ssl`` (OpenSSL), served by aiohttp.

Basic authentication, as Kafka's ``BasicAuthSecurityRestExtension``:
``rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension.
BasicAuthSecurityRestExtension``, and the JVM's ``java.security.auth.login.config`` given as a
Kafka user gives it, in ``KAFKA_OPTS`` (``-Djava.security.auth.login.config=/etc/connect.jaas``):
a JAAS file whose ``KafkaConnect`` entry is Kafka's ``PropertyFileLoginModule`` with
``file="/etc/connect.credentials"``, a properties file of ``user=password`` lines. Read once, at
the start (Kafka keeps the file's content once loaded as well). A request without valid
credentials is answered 401 with Kafka's body ``User cannot access the resource.``; POST
``/connectors/<name>/tasks`` is let through, as Kafka's filter lets the workers' internal task
configs through. A forwarded request carries the client's ``Authorization`` header to the leader,
as Kafka's ``RestClient`` does. Other extension classes are refused.

``load`` reads the files (once, at the worker's start); ``RestSecurity`` is immutable and its
``authorized`` is pure: any thread.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import shlex
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
from odradek.connect.api import ConfigException
from odradek.security import jaas

__all__ = [
    "BASIC_AUTH_EXTENSION",
    "HTTPS_PREFIX",
    "UNAUTHORIZED_BODY",
    "RestSecurity",
    "load",
]

HTTPS_PREFIX = "listeners.https."
BASIC_AUTH_EXTENSION = (
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
)
PROPERTY_FILE_LOGIN_MODULE = (
    "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
)
JAAS_ENTRY = "KafkaConnect"
JAAS_PROPERTY = "java.security.auth.login.config"
UNAUTHORIZED_BODY = "User cannot access the resource."
HTTPS_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
)
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_INTERNAL_TASKS = re.compile(r"/?connectors/[^/]+/tasks/?")
_JAAS_SECTION = re.compile(r"([A-Za-z0-9_.-]+)\s*\{(.*?)\}\s*;", re.DOTALL)


@dataclass(frozen=True)
class RestSecurity:
    """What the listener serves with (``server_tls``), what forwarding connects with
    (``client_tls``) and the users of basic authentication (None: no authentication)."""

    scheme: str = "http"
    server_tls: ssl.SSLContext | None = None
    client_tls: ssl.SSLContext | None = None
    users: Mapping[str, str] | None = field(default=None, repr=False)

    def authorized(self, method: str, path: str, authorization: str | None) -> bool:
        """Whether a request may be answered (Kafka's ``JaasBasicAuthFilter``)."""
        if self.users is None:
            return True
        if method == "POST" and _INTERNAL_TASKS.fullmatch(path):
            return True
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, colon, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = self.users.get(user)
        if not colon or not user or expected is None:
            return False
        return hmac.compare_digest(expected.encode(), password.encode())


def _https(props: Mapping[str, str], key: str) -> tuple[str, str] | None:
    """(the name given, value) of a listener key: ``listeners.https.<key>`` when any
    ``listeners.https.`` key is given, else ``<key>`` (Kafka's all-or-nothing prefix)."""
    prefixed = any(k.startswith(HTTPS_PREFIX) for k in props)
    name = HTTPS_PREFIX + key if prefixed else key
    return (name, props[name].strip()) if name in props else None


def _pem_store(props: Mapping[str, str], kind: str) -> str | None:
    location = _https(props, f"ssl.{kind}store.location")
    store_type = _https(props, f"ssl.{kind}store.type")
    if location is None:
        return None
    if store_type is None or store_type[1].upper() != "PEM":
        name = store_type[0] if store_type else location[0]
        shown = store_type[1] if store_type else "JKS (Kafka's default)"
        raise ConfigException(name, f"{shown} is not supported: give a PEM file (type PEM)")
    return location[1]


def _tls(props: Mapping[str, str]) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    unknown = sorted(
        k for k in props if k.startswith(HTTPS_PREFIX) and k[len(HTTPS_PREFIX) :] not in HTTPS_KEYS
    )
    if unknown:
        raise ConfigException(
            unknown[0], f"not supported for the REST listener (one of {', '.join(HTTPS_KEYS)})"
        )
    keystore = _pem_store(props, "key")
    if keystore is None:
        raise ConfigException(
            HTTPS_PREFIX + "ssl.keystore.location", "an https listener needs a PEM keystore"
        )
    truststore = _pem_store(props, "trust")
    password = _https(props, "ssl.key.password")
    client_auth = _https(props, "ssl.client.auth") or ("", "none")
    if client_auth[1].lower() not in CLIENT_AUTH:
        raise ConfigException(
            client_auth[0], f"{client_auth[1]!r} is not one of {', '.join(CLIENT_AUTH)}"
        )
    algorithm = _https(props, "ssl.endpoint.identification.algorithm") or ("", "https")
    if algorithm[1].lower() not in ("https", ""):
        raise ConfigException(algorithm[0], f"{algorithm[1]!r} is not https or empty")
    try:
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=truststore)
        server.load_cert_chain(keystore, keystore, password[1] if password else None)
        server.verify_mode = CLIENT_AUTH[client_auth[1].lower()]
        client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=truststore)
        client.load_cert_chain(keystore, keystore, password[1] if password else None)
        client.check_hostname = algorithm[1].lower() == "https"
    except (OSError, ssl.SSLError) as e:
        raise ConfigException(
            HTTPS_PREFIX + "ssl.keystore.location", f"cannot load the TLS files: {e}"
        ) from e
    return server, client


def _jaas_file(environ: Mapping[str, str]) -> Path:
    for word in shlex.split(environ.get("KAFKA_OPTS", "")):
        if word.startswith(f"-D{JAAS_PROPERTY}="):
            return Path(word.split("=", 1)[1])
    raise ConfigException(
        "rest.extension.classes",
        f"BasicAuthSecurityRestExtension needs a JAAS file: set KAFKA_OPTS="
        f"-D{JAAS_PROPERTY}=FILE, with a {JAAS_ENTRY} entry of {PROPERTY_FILE_LOGIN_MODULE}",
    )


def _read(path: Path, what: str) -> str:
    try:
        if path.stat().st_size > PROPERTIES_FILE_MAX_BYTES:
            raise ConfigException("rest.extension.classes", f"{what} {path} is too large")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigException("rest.extension.classes", f"cannot read {what} {path}: {e}") from e


def _users(environ: Mapping[str, str]) -> dict[str, str]:
    path = _jaas_file(environ)
    sections = {name: body for name, body in _JAAS_SECTION.findall(_read(path, "the JAAS file"))}
    if JAAS_ENTRY not in sections:
        raise ConfigException("rest.extension.classes", f"{path} has no {JAAS_ENTRY} entry")
    try:
        entry = jaas.parse(sections[JAAS_ENTRY])
    except jaas.JaasSyntaxError as e:
        raise ConfigException("rest.extension.classes", f"{path}: {JAAS_ENTRY}: {e}") from e
    if entry.login_module != PROPERTY_FILE_LOGIN_MODULE or "file" not in entry.options:
        raise ConfigException(
            "rest.extension.classes",
            f"{path}: {JAAS_ENTRY} must be {PROPERTY_FILE_LOGIN_MODULE} with file=...",
        )
    credentials = Path(entry.options["file"])
    text = _read(credentials, "the credentials file")
    return {p.key: p.value for p in parse_properties(text, source=str(credentials))}


def load(props: Mapping[str, str], scheme: str, environ: Mapping[str, str]) -> RestSecurity:
    """The REST listener's security from the worker's properties, the listener's scheme
    (``http``/``https``) and the environment (``KAFKA_OPTS``); reads the files it names."""
    server_tls = client_tls = None
    if scheme == "https":
        server_tls, client_tls = _tls(props)
    elif any(k.startswith(HTTPS_PREFIX) for k in props):
        key = next(k for k in props if k.startswith(HTTPS_PREFIX))
        raise ConfigException(key, "the listener is not https://")
    users = None
    extensions = [c.strip() for c in props.get("rest.extension.classes", "").split(",")]
    for extension in filter(None, extensions):
        if extension != BASIC_AUTH_EXTENSION:
            raise ConfigException(
                "rest.extension.classes",
                f"{extension} is not supported (only {BASIC_AUTH_EXTENSION})",
            )
        users = _users(environ)
    return RestSecurity(scheme, server_tls, client_tls, users)
