"""The Java client's security keys turned into librdkafka's: the one home of that mapping.

Who uses it: ``commands.client_properties`` (a ``--command-config`` file), ``connect.worker_config``
(a worker's top-level keys, its ``producer.``/``consumer.``/``admin.`` keys and a connector's
``*.override.*`` keys) and ``spark.client_config`` (the ``kafka.*`` options). Each front end says
where a key came from (a file's line, a prefix, an option) when it reports a ``JavaSecurityError``;
``client.security.client_security`` builds Odradek's own client's settings from the result.

The security keys are ``security.protocol`` and every ``sasl.*`` and ``ssl.*`` key
(``is_security_key``). ``translate`` takes them (and only them) and returns librdkafka's:

- librdkafka's own keys pass through as they are (``security.protocol``, ``sasl.mechanism`` or
  ``sasl.mechanisms``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``,
  ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm``);
- the Java client's keys are translated: ``sasl.jaas.config`` with Kafka's ``PlainLoginModule``
  or ``ScramLoginModule`` and its ``username``/``password`` options becomes ``sasl.username`` and
  ``sasl.password``; ``ssl.truststore.location`` with ``ssl.truststore.type=PEM`` becomes
  ``ssl.ca.location``; ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (the private key
  and the certificate chain in one file, as Kafka's PEM keystore holds them) becomes both
  ``ssl.certificate.location`` and ``ssl.key.location`` (librdkafka's own
  ``ssl.keystore.location`` is a PKCS#12 file: a different thing under the same name); Kafka's
  empty ``ssl.endpoint.identification.algorithm`` (no host name check) is librdkafka's ``none``;
- ``sasl.mechanism=OAUTHBEARER`` with librdkafka's OIDC client-credentials keys, which pass
  through (``sasl.oauthbearer.method=oidc``, ``sasl.oauthbearer.client.id``,
  ``sasl.oauthbearer.client.secret``, ``sasl.oauthbearer.token.endpoint.url``, optional
  ``sasl.oauthbearer.scope``): librdkafka fetches the token. The Java client's (KIP-768)
  ``sasl.login.callback.handler.class=...OAuthBearerLoginCallbackHandler`` with
  ``sasl.jaas.config=...OAuthBearerLoginModule required clientId=".." clientSecret=".."
  [scope=".."];`` becomes them.

Refused, with the key named (``JavaSecurityError.key``): JKS and PKCS12 stores and their
passwords, PEM content given in a property, the GSSAPI mechanism and ``sasl.kerberos.*``,
OAUTHBEARER other than librdkafka's OIDC (``sasl.oauthbearer.method=default`` makes librdkafka
sign its own unsecured token, and the Java ``OAuthBearerLoginModule`` without the OIDC handler is
Kafka's unsecured login: the brokers refuse both), Java login classes and callbacks, any other
login module or JAAS option, and every other ``sasl.*`` or ``ssl.*`` key. A Java key and a
librdkafka key that say different things (two passwords) are refused too. A message never holds
the value of a secret key.

``layer(base, top)`` stacks two sets of security keys, as Connect stacks a worker's top-level
keys, its ``producer.`` ones and a connector's ``producer.override.`` ones: a key of ``top``
replaces in ``base`` every key that says the same thing under another name (``SAME_SETTING``:
``sasl.jaas.config`` replaces ``sasl.username`` and ``sasl.password``, and back), so a Java key
above a librdkafka key is an override, not a conflict.

Pure: no I/O (the files named are not opened here); any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from odradek.errors import InvalidConfigError
from odradek.security import jaas
from odradek.security.sasl import KNOWN_UNSUPPORTED_MECHANISMS, PASSWORD_MECHANISMS

__all__ = [
    "MECHANISMS",
    "OAUTHBEARER",
    "PROTOCOLS",
    "SECRET_KEYS",
    "JavaSecurityError",
    "is_security_key",
    "layer",
    "translate",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (*PASSWORD_MECHANISMS, OAUTHBEARER)  # OAUTHBEARER: librdkafka's OIDC only
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
# login module -> {JAAS option: librdkafka key}
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
# Keys that say the same thing (the Java client's and librdkafka's names): one replaces the others.
SAME_SETTING = (
    (
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
    ),
    ("sasl.login.callback.handler.class", "sasl.oauthbearer.method"),
    ("sasl.mechanism", "sasl.mechanisms"),
    ("ssl.truststore.location", "ssl.ca.location"),
    ("ssl.keystore.location", "ssl.certificate.location", "ssl.key.location"),
)
# Why a Java-only key is refused: exact keys first, then by prefix.
REFUSED = {
    "ssl.truststore.password": "store passwords go with JKS and PKCS12 stores, which are not "
    "supported: give a PEM file (ssl.truststore.type=PEM), which has none",
    "ssl.keystore.password": "store passwords go with JKS and PKCS12 stores, which are not "
    "supported: give a PEM file (ssl.keystore.type=PEM); an encrypted key's password is "
    "ssl.key.password",
    "ssl.truststore.certificates": "PEM content in a property is not supported: give "
    "ssl.truststore.location of a PEM file",
    "ssl.keystore.key": "PEM content in a property is not supported: give "
    "ssl.keystore.location of a PEM file",
    "ssl.keystore.certificate.chain": "PEM content in a property is not supported: give "
    "ssl.keystore.location of a PEM file",
}
REFUSED_PREFIXES = {
    "sasl.kerberos.": "GSSAPI (Kerberos) is not supported",
    "sasl.login.": "Java login classes and their settings do not apply to librdkafka",
    "sasl.client.callback.handler.": "Java callback handlers do not apply to librdkafka",
}
NOT_MAPPED = "not a security setting that maps to librdkafka's (see docs: Security)"


class JavaSecurityError(InvalidConfigError):
    """A security key that cannot be honoured; ``key`` is the one at fault (as given, aliases
    resolved), ``reason`` says why without the key and never holds a secret."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


def is_security_key(key: str) -> bool:
    """Whether ``key`` is one ``translate`` decides (the rest is not its business)."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl."))


def layer(base: Mapping[str, str], top: Mapping[str, str]) -> dict[str, str]:
    """``base`` with ``top``'s keys over it, each replacing its other names; see the module."""
    result = dict(base)
    for key in top:
        for group in SAME_SETTING:
            if key in group:
                for other in group:
                    if other not in top:
                        result.pop(other, None)
    result.update(top)
    for kind in ("trust", "key"):  # a store type goes with its location: base's, replaced
        if f"ssl.{kind}store.location" not in result and f"ssl.{kind}store.type" not in top:
            result.pop(f"ssl.{kind}store.type", None)
    return result


def _store(java: Mapping[str, str], kind: str) -> str | None:
    """The PEM file of ``ssl.<kind>store.location``, or a refusal of any other store type."""
    location = java.get(f"ssl.{kind}store.location")
    store_type = java.get(f"ssl.{kind}store.type")
    if location is None:
        if store_type is not None:
            raise JavaSecurityError(f"ssl.{kind}store.type", f"no ssl.{kind}store.location")
        return None
    if store_type is None or store_type.upper() != "PEM":
        named = store_type or "JKS (the Java client's default)"
        raise JavaSecurityError(
            f"ssl.{kind}store.type" if store_type else f"ssl.{kind}store.location",
            f"ssl.{kind}store.type {named} is not supported: give a PEM file with "
            f"ssl.{kind}store.type=PEM",
        )
    return location


def _jaas(value: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(librdkafka's settings, mechanisms the login module serves) of a ``sasl.jaas.config``."""
    try:
        entry = jaas.parse(value)
    except jaas.JaasSyntaxError as e:
        raise JavaSecurityError("sasl.jaas.config", str(e)) from e
    mechanisms = LOGIN_MODULES.get(entry.login_module)
    if mechanisms is None:
        raise JavaSecurityError(
            "sasl.jaas.config",
            f"login module {entry.login_module} is not supported (one of "
            f"{', '.join(LOGIN_MODULES)})",
        )
    options = JAAS_OPTIONS[entry.login_module]
    unknown = sorted(set(entry.options) - set(options))
    if unknown:
        raise JavaSecurityError("sasl.jaas.config", f"option {unknown[0]} is not supported")
    missing = [
        name for name in options if name not in entry.options and name not in OPTIONAL_JAAS_OPTIONS
    ]
    if missing:
        raise JavaSecurityError("sasl.jaas.config", f"option {missing[0]} is missing")
    return {options[name]: value for name, value in entry.options.items()}, mechanisms


def _refusal(key: str) -> str:
    if key in REFUSED:
        return REFUSED[key]
    for prefix, reason in REFUSED_PREFIXES.items():
        if key.startswith(prefix):
            return reason
    return NOT_MAPPED


def translate(
    settings: Mapping[str, str], *, describe: Callable[[str], str] = str
) -> dict[str, str]:
    """librdkafka's settings of the security keys ``settings`` (values as given; each key must
    pass ``is_security_key``); see the module. ``describe(key)`` names a given key inside a
    message about another one (a front end adds where it was: "sasl.password on line 3")."""
    config: dict[str, str] = {}
    java: dict[str, str] = {}
    for given, raw in settings.items():
        key = ALIASES.get(given, given)
        value = raw.strip()
        if key in PASS_THROUGH:
            if key in config and config[key] != value:
                raise JavaSecurityError(given, f"says otherwise than {describe(key)}")
            config[key] = value
        elif key in JAVA_KEYS:
            java[key] = value
        elif is_security_key(key):
            raise JavaSecurityError(given, _refusal(key))
        else:
            raise ValueError(f"{given} is not a security key")  # the caller's mistake

    def put(key: str, value: str, from_key: str) -> None:
        if key in config and config[key] != value:
            shown = "" if key in SECRET_KEYS else f" ({config[key]!r} and {value!r})"
            raise JavaSecurityError(from_key, f"says otherwise than {describe(key)}{shown}")
        config[key] = value

    ca = _store(java, "trust")
    if ca is not None:
        put("ssl.ca.location", ca, "ssl.truststore.location")
    keystore = _store(java, "key")
    if keystore is not None:
        put("ssl.certificate.location", keystore, "ssl.keystore.location")
        put("ssl.key.location", keystore, "ssl.keystore.location")
    jaas_mechanisms: tuple[str, ...] = ()
    if "sasl.jaas.config" in java:
        translated, jaas_mechanisms = _jaas(java["sasl.jaas.config"])
        for key, setting in translated.items():
            put(key, setting, "sasl.jaas.config")
    _check_login_handler(java, jaas_mechanisms, put)
    _check_protocol_and_mechanism(config, jaas_mechanisms)
    _check_oauthbearer(config)
    _check_credentials(config)
    algorithm = config.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        if algorithm.lower() not in ENDPOINT_ALGORITHMS:
            raise JavaSecurityError(
                "ssl.endpoint.identification.algorithm", f"{algorithm} is not https or empty"
            )
        # Kafka's empty value turns the check off; librdkafka spells that "none".
        config["ssl.endpoint.identification.algorithm"] = algorithm.lower() or "none"
    return config


def _check_login_handler(
    java: Mapping[str, str],
    jaas_mechanisms: tuple[str, ...],
    put: Callable[[str, str, str], None],
) -> None:
    """The Java client's OIDC login handler goes with the OAUTHBEARER login module, and back."""
    handler = java.get("sasl.login.callback.handler.class")
    if handler is not None:
        if handler not in OIDC_LOGIN_HANDLERS or jaas_mechanisms != (OAUTHBEARER,):
            raise JavaSecurityError(
                "sasl.login.callback.handler.class",
                f"only {OIDC_LOGIN_HANDLERS[0]} is supported, with sasl.jaas.config="
                f"{OAUTHBEARER_LOGIN_MODULE} (clientId, clientSecret, scope)",
            )
        put("sasl.oauthbearer.method", "oidc", "sasl.login.callback.handler.class")
    elif jaas_mechanisms == (OAUTHBEARER,):
        raise JavaSecurityError(
            "sasl.jaas.config",
            f"{OAUTHBEARER_LOGIN_MODULE} without sasl.login.callback.handler.class="
            f"{OIDC_LOGIN_HANDLERS[0]} is Kafka's unsecured login, which the brokers refuse",
        )


def _check_protocol_and_mechanism(config: Mapping[str, str], jaas_mechanisms: tuple[str, ...]):
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise JavaSecurityError(
            "security.protocol", f"{protocol} is not one of {', '.join(PROTOCOLS)}"
        )
    mechanism = config.get("sasl.mechanism")
    if mechanism is not None:
        if mechanism.upper() in KNOWN_UNSUPPORTED_MECHANISMS:
            raise JavaSecurityError("sasl.mechanism", f"{mechanism} is not supported yet")
        if mechanism not in MECHANISMS:
            raise JavaSecurityError(
                "sasl.mechanism", f"{mechanism} is not one of {', '.join(MECHANISMS)}"
            )
        if jaas_mechanisms and mechanism not in jaas_mechanisms:
            raise JavaSecurityError(
                "sasl.mechanism", f"{mechanism} does not go with sasl.jaas.config's login module"
            )
    elif jaas_mechanisms:
        raise JavaSecurityError("sasl.jaas.config", "no sasl.mechanism given")


def _check_credentials(config: Mapping[str, str]) -> None:
    """A SASL protocol has a mechanism and its credentials."""
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    mechanism = config.get("sasl.mechanism")
    if protocol.startswith("SASL_"):
        credentials = (
            OIDC_REQUIRED if mechanism == OAUTHBEARER else ("sasl.username", "sasl.password")
        )
        needed = [k for k in ("sasl.mechanism", *credentials) if k not in config]
        if needed:
            raise JavaSecurityError(
                "security.protocol",
                f"{protocol} needs sasl.mechanism ({', '.join(MECHANISMS)}) and "
                f"sasl.jaas.config (or sasl.username and sasl.password): no {needed[0]}",
            )


def _check_oauthbearer(config: Mapping[str, str]) -> None:
    """OAUTHBEARER goes with librdkafka's OIDC keys, and they with it alone."""
    oauth = config.get("sasl.mechanism") == OAUTHBEARER
    for key in OIDC_KEYS if not oauth else ("sasl.username", "sasl.password"):
        if key in config:
            what = "sasl.mechanism=OAUTHBEARER" if not oauth else "OAUTHBEARER (a token)"
            raise JavaSecurityError(key, f"goes only with {what}")
    method = config.get("sasl.oauthbearer.method")
    if method is not None and method.lower() != "oidc":
        raise JavaSecurityError(
            "sasl.oauthbearer.method",
            f"{method} is not supported: only oidc (librdkafka's default method signs its own "
            f"unsecured token, which the brokers refuse)",
        )
