"""The broker's ``ssl.*`` keys (Kafka's names, PEM only) and their per-listener overrides.

``SSL_KEYS`` are the rows ``BrokerConfig`` adds to its table; each one may also be given for one
listener as ``listener.name.<listener name, lower case>.<key>`` (Kafka's
``ListenerName.configPrefix``), which wins over the broker-wide key for that listener only.
``SslSettings`` is what one SSL listener uses, the overrides applied (``resolve``); ``check``
states the rules Kafka's ``DefaultSslEngineFactory`` applies to PEM stores, in its words where
it has them:

- ``ssl.keystore.type`` must be PEM, and ``ssl.truststore.type`` too when there is a trust
  store (Kafka's default, JKS, and PKCS12 are refused: no Java key stores);
- the key store is a file (``ssl.keystore.location``: the private key and its certificate chain,
  PEM) or inline (``ssl.keystore.key`` with ``ssl.keystore.certificate.chain``), not both;
  ``ssl.key.password`` decrypts an encrypted key (PKCS#8), as Kafka's;
- the trust store is a file (``ssl.truststore.location``) or inline
  (``ssl.truststore.certificates``), not both; ``ssl.client.auth`` requested or required needs
  one;
- ``ssl.enabled.protocols`` holds TLSv1.2 and/or TLSv1.3 only.

Any other ``ssl.*`` key is refused by name (``unsupported_key``): a setting that would be
silently ignored is worse than none. Pure and immutable: any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.config.keys import (
    ConfigKey,
    ConfigType,
    invalid_value,
    optional_string,
    string_list,
)
from odradek.errors import InvalidConfigError
from odradek.security.principal_mapping import parse_rules

__all__ = [
    "LISTENER_PREFIX",
    "SSL_KEYS",
    "SslSettings",
    "TLS_PROTOCOLS",
    "parse_listener_key",
    "tls_protocols",
    "unsupported_key",
]

LISTENER_PREFIX = "listener.name."
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
CLIENT_AUTH = ("required", "requested", "none")


def tls_protocols(name: str, raw: object, *, why: str = "") -> tuple[str, ...]:
    """``raw`` as a list of TLS protocols (``string_list``), each one of ``TLS_PROTOCOLS``; ``why``
    ends the message for any other. May be empty: each key says whether it may."""
    protocols = string_list(name, raw)
    for protocol in protocols:
        if protocol not in TLS_PROTOCOLS:
            raise invalid_value(
                name,
                raw,
                f"{protocol} is not supported: only {' and '.join(TLS_PROTOCOLS)} are{why}",
            )
    return protocols


def _protocols(name: str, raw: object) -> tuple[str, ...]:
    protocols = tls_protocols(name, raw, why=" (older versions are insecure)")
    if not protocols:
        raise invalid_value(name, raw, "at least one protocol is required")
    return protocols


def _rules(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    try:
        parse_rules(raw)
    except ValueError as e:
        raise invalid_value(name, raw, str(e)) from e
    return raw.strip()


_T = ConfigType
SSL_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "ssl.keystore.type",
        _T.STRING,
        "JKS",
        "The key store's format: only PEM is supported (an SSL listener must set it).",
    ),
    ConfigKey(
        "ssl.keystore.location",
        _T.STRING,
        None,
        "A PEM file with the listener's private key and its certificate chain.",
        convert=optional_string,
    ),
    ConfigKey(
        "ssl.keystore.key",
        _T.PASSWORD,
        None,
        "The private key in PEM (PKCS#8), inline; with ssl.keystore.certificate.chain.",
        convert=optional_string,
    ),
    ConfigKey(
        "ssl.keystore.certificate.chain",
        _T.PASSWORD,
        None,
        "The certificate chain in PEM, inline, the listener's own certificate first.",
        convert=optional_string,
    ),
    ConfigKey(
        "ssl.key.password",
        _T.PASSWORD,
        None,
        "The password of an encrypted private key.",
        convert=optional_string,
    ),
    ConfigKey(
        "ssl.truststore.type",
        _T.STRING,
        "JKS",
        "The trust store's format: only PEM is supported.",
    ),
    ConfigKey(
        "ssl.truststore.location",
        _T.STRING,
        None,
        "A PEM file of the certificate authorities client certificates are checked against.",
        convert=optional_string,
    ),
    ConfigKey(
        "ssl.truststore.certificates",
        _T.PASSWORD,
        None,
        "The trusted certificates in PEM, inline.",
        convert=optional_string,
    ),
    ConfigKey(
        "ssl.client.auth",
        _T.STRING,
        "none",
        "Client certificates: required, requested (checked when sent) or none.",
        choices=CLIENT_AUTH,
    ),
    ConfigKey(
        "ssl.enabled.protocols",
        _T.LIST,
        ",".join(TLS_PROTOCOLS),
        "The TLS versions accepted: TLSv1.2 and/or TLSv1.3.",
        convert=_protocols,
    ),
    ConfigKey(
        "ssl.principal.mapping.rules",
        _T.STRING,
        "DEFAULT",
        "Rules mapping a client certificate's distinguished name to a user name, as Kafka's.",
        convert=_rules,
    ),
)
_BY_NAME = {key.name: key for key in SSL_KEYS}


def unsupported_key(name: str) -> InvalidConfigError | None:
    """The error for an ``ssl.*`` key (or a listener's) that is not honoured; None otherwise."""
    _, key = parse_listener_key(name) if name.startswith(LISTENER_PREFIX) else (None, name)
    if key is None or not key.startswith("ssl.") or key in _BY_NAME:
        return None
    return InvalidConfigError(
        f"{name} is not supported: Odradek's TLS honours only {', '.join(_BY_NAME)} (PEM key "
        f"and trust stores); remove it"
    )


def parse_listener_key(name: str) -> tuple[str, str | None]:
    """``listener.name.<l>.<key>`` into (upper-case listener name, key); key None if malformed."""
    rest = name[len(LISTENER_PREFIX) :]
    listener, dot, key = rest.partition(".")
    return listener.upper(), key if dot and listener else None


def parse_listener_overrides(
    props: Mapping[str, object],
) -> tuple[dict[str, object], tuple[tuple[str, str, object], ...]]:
    """Split ``props`` into the rest and the parsed per-listener ``ssl.*`` overrides, as
    (listener, key, value) sorted; refuses an override of anything else."""
    rest: dict[str, object] = {}
    overrides: list[tuple[str, str, object]] = []
    for name, raw in props.items():
        if not name.startswith(LISTENER_PREFIX):
            rest[name] = raw
            continue
        listener, key = parse_listener_key(name)
        if key is None or key not in _BY_NAME:
            raise unsupported_key(name) or InvalidConfigError(
                f"{name}: per-listener overrides (listener.name.<listener>.<key>) are supported "
                f"for the ssl.* keys only ({', '.join(_BY_NAME)})"
            )
        overrides.append((listener, key, _BY_NAME[key].parse(raw)))
    return rest, tuple(sorted(overrides, key=lambda o: (o[0], o[1])))


def listener_override_properties(
    overrides: tuple[tuple[str, str, object], ...],
) -> dict[str, str]:
    """The overrides as properties again (``to_properties``)."""
    return {
        f"{LISTENER_PREFIX}{listener.lower()}.{key}": _BY_NAME[key].to_string(value)
        for listener, key, value in overrides
    }


@dataclass(frozen=True, slots=True)
class SslSettings:
    """The ``ssl.*`` values one listener uses (per-listener overrides applied)."""

    listener: str
    keystore_type: str
    keystore_location: str | None
    keystore_key: str | None
    keystore_certificate_chain: str | None
    key_password: str | None
    truststore_type: str
    truststore_location: str | None
    truststore_certificates: str | None
    client_auth: str
    enabled_protocols: tuple[str, ...]
    principal_mapping_rules: str

    @classmethod
    def resolve(
        cls,
        listener: str,
        broker_wide: Mapping[str, object],
        overrides: tuple[tuple[str, str, object], ...],
    ) -> SslSettings:
        """``broker_wide`` maps each SSL key to its broker value; this listener's overrides win."""
        values = {key.name: broker_wide[key.name] for key in SSL_KEYS}
        for name, key, value in overrides:
            if name == listener:
                values[key] = value
        return cls(listener, *(values[key.name] for key in SSL_KEYS))

    def check(self) -> None:
        """Kafka's rules for PEM stores (see the module); raises ``InvalidConfigError``."""
        where = f"listener {self.listener} (SSL)"
        stores = [("ssl.keystore.type", self.keystore_type)]
        if self.trusted() is not None:  # the type of a trust store that is not there is moot
            stores.append(("ssl.truststore.type", self.truststore_type))
        for key, value in stores:
            if value.upper() != "PEM":
                raise InvalidConfigError(
                    f"{key}={value} for {where} is not supported: only PEM key and trust stores "
                    f"are (set {key}=PEM, broker-wide or as listener.name."
                    f"{self.listener.lower()}.{key})"
                )
        inline = self.keystore_key is not None or self.keystore_certificate_chain is not None
        if self.keystore_location is not None and inline:
            raise InvalidConfigError(
                f"{where}: ssl.keystore.location and ssl.keystore.key/"
                f"ssl.keystore.certificate.chain are both set; use the file or the inline PEM"
            )
        if inline and (self.keystore_key is None or self.keystore_certificate_chain is None):
            raise InvalidConfigError(
                f"{where}: ssl.keystore.key and ssl.keystore.certificate.chain must both be "
                f"set for an inline PEM key store"
            )
        if self.keystore_location is None and not inline:
            raise InvalidConfigError(
                f"{where} has no key store: set ssl.keystore.location (a PEM file with the key "
                f"and its certificate chain) or ssl.keystore.key with "
                f"ssl.keystore.certificate.chain"
            )
        if self.truststore_location is not None and self.truststore_certificates is not None:
            raise InvalidConfigError(
                f"{where}: ssl.truststore.location and ssl.truststore.certificates are both set"
            )
        if self.client_auth != "none" and self.trusted() is None:
            raise InvalidConfigError(
                f"{where}: ssl.client.auth={self.client_auth} needs a trust store to check "
                f"client certificates against: set ssl.truststore.location or "
                f"ssl.truststore.certificates"
            )

    def trusted(self) -> str | None:
        """Where the trusted certificates come from, if anywhere."""
        return self.truststore_location or self.truststore_certificates
