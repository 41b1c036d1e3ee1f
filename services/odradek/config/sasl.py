"""The broker's SASL keys (Kafka's names) and a SASL listener's settings.

Broker-wide rows (``SASL_KEYS``): ``sasl.enabled.mechanisms`` (Kafka's default GSSAPI, which
is not implemented: a SASL listener needs it set, broker-wide or for the listener),
``sasl.mechanism.inter.broker.protocol`` (refused when set: brokers and the controller do not
speak SASL to each other yet), ``connection.failed.authentication.delay.ms`` (100) and
``sasl.server.max.receive.size`` (524288: the largest request a connection may send before it
has authenticated) and ``connections.max.reauth.ms`` (0: KIP-368's session lifetime, after which
a connection that has not re-authenticated is closed at its next request; 0 is none).

Per listener, as Kafka's ``ListenerName.saslMechanismConfigPrefix``:

- ``listener.name.<l>.sasl.enabled.mechanisms`` wins over the broker-wide list;
- ``listener.name.<l>.<mechanism, lower case>.sasl.jaas.config``: for PLAIN (required) a
  ``org.apache.kafka.common.security.plain.PlainLoginModule`` whose ``user_<name>="<password>"``
  options are the users; for SCRAM (optional) a
  ``org.apache.kafka.common.security.scram.ScramLoginModule`` with no options (SCRAM users are
  in ZooKeeper); for OAUTHBEARER (optional) an ``OAuthBearerLoginModule`` with no options.
  ``username``/``password`` options are the broker's own credentials for inter-broker SASL,
  not implemented: refused;
- ``listener.name.<l>.<mechanism>.sasl.server.callback.handler.class``: only for OAUTHBEARER,
  where it must be Kafka's JWT validator (``config.oauthbearer``: the JWKS and claim keys, and
  why the unsecured validator, Kafka's default, is refused);
- ``listener.name.<l>.<mechanism, lower case>.connections.max.reauth.ms`` wins over the
  broker-wide ``connections.max.reauth.ms`` for that mechanism's connections on the listener.

``SaslSettings.resolve`` gives what one SASL listener uses; ``check`` refuses what is not
honoured, by name: GSSAPI or an unknown mechanism, OAUTHBEARER without Kafka's JWT validator, a
JAAS config of another login module, a JAAS config, callback handler or
``connections.max.reauth.ms`` for a mechanism the listener does not enable, a custom callback
handler. Pure and immutable: any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from odradek.config import oauthbearer
from odradek.config.keys import ConfigKey, ConfigType, invalid_value, string_list
from odradek.errors import InvalidConfigError
from odradek.security import jaas
from odradek.security.sasl import KNOWN_UNSUPPORTED_MECHANISMS, SUPPORTED_MECHANISMS

__all__ = [
    "CALLBACK_HANDLER_SUFFIX",
    "JAAS_SUFFIX",
    "LOGIN_MODULES",
    "SASL_KEYS",
    "SaslSettings",
    "is_listener_sasl_key",
    "listener_sasl_properties",
    "parse_listener_sasl_key",
    "unsupported_sasl_key",
]

_PREFIX = "listener.name."
JAAS_SUFFIX = "sasl.jaas.config"
MAX_REAUTH = "connections.max.reauth.ms"
CALLBACK_HANDLER_SUFFIX = oauthbearer.CALLBACK_HANDLER_SUFFIX
ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": oauthbearer.LOGIN_MODULE,
}
_PLAIN_USER_PREFIX = "user_"


def _mechanisms(name: str, raw: object) -> tuple[str, ...]:
    mechanisms = string_list(name, raw)
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS + KNOWN_UNSUPPORTED_MECHANISMS:
            raise invalid_value(
                name,
                raw,
                f"unknown SASL mechanism {mechanism}: Odradek serves "
                f"{', '.join(SUPPORTED_MECHANISMS)}",
            )
    return mechanisms


def _max_reauth_ms(name: str, raw: object) -> int:
    try:
        value = int(str(raw).strip()) if not isinstance(raw, bool) else None
    except ValueError:
        value = None
    if value is None or value < 0:
        raise invalid_value(name, raw, "Expected a value of type LONG, at least 0")
    return value


def _jaas(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise invalid_value(name, "[hidden]", "Expected a value of type PASSWORD")
    try:
        jaas.parse(raw)
    except jaas.JaasSyntaxError as e:
        raise InvalidConfigError(f"Invalid value [hidden] for configuration {name}: {e}") from e
    return raw.strip()


_T = ConfigType
SASL_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        ENABLED_MECHANISMS,
        _T.LIST,
        "GSSAPI",
        "SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER (Kafka's default, GSSAPI, is not implemented: set it when a listener uses "
        "SASL).",
        convert=_mechanisms,
    ),
    ConfigKey(
        "sasl.mechanism.inter.broker.protocol",
        _T.STRING,
        None,
        "Refused when set: brokers and the controller do not authenticate to each other with "
        "SASL yet (the inter-broker and control-plane listeners are PLAINTEXT).",
    ),
    ConfigKey(
        "connection.failed.authentication.delay.ms",
        _T.INT,
        100,
        "How long the answer to a failed authentication waits before it is sent and the "
        "connection closed (slows password guessing).",
        minimum=0,
    ),
    ConfigKey(
        "sasl.server.max.receive.size",
        _T.INT,
        524288,
        "The largest request a SASL connection may send before it has authenticated.",
        minimum=1,
    ),
    ConfigKey(
        MAX_REAUTH,
        _T.LONG,
        0,
        "KIP-368: a SASL connection's session lifetime (at most, with the credential's own "
        "expiry); the client must re-authenticate within it or its next request closes the "
        "connection. 0 (Kafka's default): no limit, no re-authentication.",
        minimum=0,
    ),
    *oauthbearer.OAUTHBEARER_KEYS,
)
_BROKER_WIDE = {key.name for key in SASL_KEYS}
_OAUTHBEARER_PREFIX = "oauthbearer.sasl.oauthbearer."
VALIDATORS = oauthbearer.VALIDATOR_CALLBACK_HANDLERS


def parse_listener_sasl_key(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<key>`` into (LISTENER, key) when key is a per-listener SASL key
    (``sasl.enabled.mechanisms``, ``<mechanism>.sasl.jaas.config``,
    ``<mechanism>.sasl.server.callback.handler.class``,
    ``<mechanism>.connections.max.reauth.ms``); None otherwise."""
    if not name.startswith(_PREFIX):
        return None
    listener, dot, key = name[len(_PREFIX) :].partition(".")
    if not dot or not listener:
        return None
    if key == ENABLED_MECHANISMS or key.endswith(
        (f".{JAAS_SUFFIX}", f".{CALLBACK_HANDLER_SUFFIX}")
    ):
        return listener.upper(), key
    if key.endswith(f".{MAX_REAUTH}") and len(key) > len(MAX_REAUTH) + 1:
        return listener.upper(), key
    return None


def is_listener_sasl_key(name: str) -> bool:
    """Whether ``name`` is ``listener.name.<l>.sasl.*`` or ``listener.name.<l>.<x>.sasl.*``."""
    if not name.startswith(_PREFIX):
        return False
    _, _, key = name[len(_PREFIX) :].partition(".")
    return key.startswith("sasl.") or ".sasl." in key


def unsupported_sasl_key(name: str) -> InvalidConfigError | None:
    """The error for a ``sasl.*`` key (or a listener's) that is not honoured; None otherwise."""
    if name.startswith(_PREFIX):
        if not is_listener_sasl_key(name) or parse_listener_sasl_key(name) is not None:
            return None
        _, _, key = name[len(_PREFIX) :].partition(".")
        if key.startswith(_OAUTHBEARER_PREFIX):
            broker_wide = key.removeprefix("oauthbearer.")
            return InvalidConfigError(
                f"{name} is not supported: the OAUTHBEARER validator's keys are broker-wide "
                f"here; set {broker_wide} instead"
            )
        return InvalidConfigError(
            f"{name} is not supported: per listener, Odradek's SASL honours only "
            f"listener.name.<listener>.{ENABLED_MECHANISMS}, "
            f"listener.name.<listener>.<mechanism>.{JAAS_SUFFIX}, "
            f"listener.name.<listener>.oauthbearer.{CALLBACK_HANDLER_SUFFIX} and "
            f"listener.name.<listener>.<mechanism>.{MAX_REAUTH}; remove it"
        )
    if not name.startswith("sasl.") or name in _BROKER_WIDE:
        return None
    if name in (JAAS_SUFFIX, CALLBACK_HANDLER_SUFFIX):
        return InvalidConfigError(
            f"{name} is not a broker key: as in Kafka, it is given per listener and mechanism, "
            f"listener.name.<listener>.<mechanism>.{name}"
        )
    if name.startswith(("sasl.oauthbearer.", "sasl.login.")):
        return InvalidConfigError(
            f"{name} is not supported: it configures a client's OAUTHBEARER login (the broker's "
            f"own, for inter-broker SASL, which is not implemented); the broker validates tokens "
            f"with {', '.join(k.name for k in oauthbearer.OAUTHBEARER_KEYS)}; remove it"
        )
    return InvalidConfigError(
        f"{name} is not supported: Odradek's SASL honours only {', '.join(sorted(_BROKER_WIDE))} "
        f"and the per-listener keys (GSSAPI and custom callback handlers are not implemented); "
        f"remove it"
    )


def parse_listener_sasl_value(key: str, name: str, raw: object) -> object:
    if key == ENABLED_MECHANISMS:
        return _mechanisms(name, raw)
    if key.endswith(f".{MAX_REAUTH}"):
        return _max_reauth_ms(name, raw)
    if key.endswith(f".{CALLBACK_HANDLER_SUFFIX}"):
        if not isinstance(raw, str):
            raise invalid_value(name, raw, "Expected a value of type CLASS")
        return raw.strip()
    return _jaas(name, raw)


def listener_sasl_properties(overrides: tuple[tuple[str, str, object], ...]) -> dict[str, str]:
    """The per-listener SASL values as properties again (``to_properties``)."""
    return {
        f"{_PREFIX}{listener.lower()}.{key}": ",".join(value)
        if isinstance(value, tuple)
        else str(value)
        for listener, key, value in overrides
    }


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What one SASL listener uses; the PLAIN users' passwords are never printed."""

    listener: str
    enabled_mechanisms: tuple[str, ...]
    jaas_configs: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False
    )  # mechanism -> raw sasl.jaas.config
    callback_handlers: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({})
    )  # mechanism -> sasl.server.callback.handler.class
    broker_max_reauth_ms: int = 0  # connections.max.reauth.ms
    max_reauth_overrides: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({})
    )  # mechanism -> listener.name.<l>.<mechanism>.connections.max.reauth.ms

    @classmethod
    def resolve(
        cls,
        listener: str,
        broker_wide_mechanisms: tuple[str, ...],
        overrides: tuple[tuple[str, str, object], ...],
        broker_max_reauth_ms: int = 0,
    ) -> SaslSettings:
        mechanisms = broker_wide_mechanisms
        configs: dict[str, str] = {}
        max_reauth: dict[str, int] = {}
        handlers: dict[str, str] = {}
        for name, key, value in overrides:
            if name != listener:
                continue
            if key == ENABLED_MECHANISMS:
                assert isinstance(value, tuple)
                mechanisms = value
            elif key.endswith(f".{MAX_REAUTH}"):
                assert isinstance(value, int)
                max_reauth[key.removesuffix(f".{MAX_REAUTH}").upper()] = value
            elif key.endswith(f".{CALLBACK_HANDLER_SUFFIX}"):
                handlers[key.removesuffix(f".{CALLBACK_HANDLER_SUFFIX}").upper()] = str(value)
            else:
                configs[key.removesuffix(f".{JAAS_SUFFIX}").upper()] = str(value)
        return cls(
            listener,
            mechanisms,
            MappingProxyType(configs),
            MappingProxyType(handlers),
            broker_max_reauth_ms,
            MappingProxyType(max_reauth),
        )

    def max_reauth_ms(self) -> Mapping[str, int]:
        """``connections.max.reauth.ms`` of each enabled mechanism (0: none), as Kafka's
        ``connectionsMaxReauthMsByMechanism``."""
        return MappingProxyType(
            {
                mechanism: self.max_reauth_overrides.get(mechanism, self.broker_max_reauth_ms)
                for mechanism in self.enabled_mechanisms
            }
        )

    def check(self) -> None:
        """Refuse what is not honoured (see the module); raises ``InvalidConfigError``."""
        where = f"listener {self.listener} (SASL)"
        prefix = f"{_PREFIX}{self.listener.lower()}"
        if not self.enabled_mechanisms:
            raise InvalidConfigError(
                f"{where} enables no SASL mechanism: set {ENABLED_MECHANISMS} (or "
                f"{prefix}.{ENABLED_MECHANISMS}) to some of {', '.join(SUPPORTED_MECHANISMS)}"
            )
        for mechanism in self.enabled_mechanisms:
            if mechanism not in SUPPORTED_MECHANISMS:
                default = " (Kafka's default)" if mechanism == "GSSAPI" else ""
                raise InvalidConfigError(
                    f"{where}: SASL mechanism {mechanism}{default} is not implemented; set "
                    f"{ENABLED_MECHANISMS} (or {prefix}.{ENABLED_MECHANISMS}) to some of "
                    f"{', '.join(SUPPORTED_MECHANISMS)}"
                )
        for suffix, given in (
            (JAAS_SUFFIX, self.jaas_configs),
            (CALLBACK_HANDLER_SUFFIX, self.callback_handlers),
            (MAX_REAUTH, self.max_reauth_overrides),
        ):
            for mechanism in given:
                if mechanism not in self.enabled_mechanisms:
                    raise InvalidConfigError(
                        f"{prefix}.{mechanism.lower()}.{suffix} is set, but {where} does not "
                        f"enable {mechanism} (enabled: {', '.join(self.enabled_mechanisms)})"
                    )
        self._check_callback_handlers()
        if "PLAIN" in self.enabled_mechanisms and "PLAIN" not in self.jaas_configs:
            raise InvalidConfigError(
                f"{where} enables PLAIN but has no users: set {prefix}.plain.{JAAS_SUFFIX}="
                f'{LOGIN_MODULES["PLAIN"]} required user_<name>="<password>";'
            )
        for mechanism in self.jaas_configs:
            self._entry(mechanism)

    def _check_callback_handlers(self) -> None:
        prefix = f"{_PREFIX}{self.listener.lower()}"
        for mechanism, handler in self.callback_handlers.items():
            if mechanism != oauthbearer.MECHANISM:
                raise InvalidConfigError(
                    f"{prefix}.{mechanism.lower()}.{CALLBACK_HANDLER_SUFFIX}={handler}: custom "
                    f"SASL callback handlers are not supported ({mechanism} is served by "
                    f"Odradek's own); remove it"
                )
        if oauthbearer.MECHANISM not in self.enabled_mechanisms:
            return
        name = f"{prefix}.oauthbearer.{CALLBACK_HANDLER_SUFFIX}"
        handler = self.callback_handlers.get(oauthbearer.MECHANISM)
        wanted = oauthbearer.VALIDATOR_CALLBACK_HANDLERS[0]
        if handler is None or handler == oauthbearer.UNSECURED_VALIDATOR:
            what = "is not set" if handler is None else f"is {handler}"
            raise InvalidConfigError(
                f"listener {self.listener} (SASL) enables OAUTHBEARER, but {name} {what}: "
                f"Kafka's default, the unsecured validator (OAuthBearerUnsecuredValidatorCallback"
                f"Handler, which checks no signature), is not served; set {name}={wanted} "
                f"(JWTs checked against sasl.oauthbearer.jwks.endpoint.url)"
            )
        if handler not in oauthbearer.VALIDATOR_CALLBACK_HANDLERS:
            raise InvalidConfigError(
                f"{name}={handler} is not supported: OAUTHBEARER tokens are validated by "
                f"Kafka's JWT validator only, {' or '.join(VALIDATORS)}"
            )

    def _entry(self, mechanism: str) -> jaas.JaasEntry:
        name = f"{_PREFIX}{self.listener.lower()}.{mechanism.lower()}.{JAAS_SUFFIX}"
        entry = jaas.parse(self.jaas_configs[mechanism])
        expected = LOGIN_MODULES[mechanism]
        if entry.login_module != expected:
            raise InvalidConfigError(
                f"{name}: login module {entry.login_module} is not supported for {mechanism}; "
                f"use {expected}"
            )
        for option in entry.options:
            if mechanism == oauthbearer.MECHANISM:
                raise InvalidConfigError(oauthbearer.jaas_option_refusal(name, option))
            if option in ("username", "password"):
                raise InvalidConfigError(
                    f"{name}: option {option} is the broker's own credential for inter-broker "
                    f"SASL, which is not implemented (brokers talk PLAINTEXT to each other); "
                    f"remove it"
                )
            if mechanism != "PLAIN" or not option.startswith(_PLAIN_USER_PREFIX):
                what = "user_<name>" if mechanism == "PLAIN" else "no options"
                raise InvalidConfigError(
                    f"{name}: option {option} is not supported ({entry.login_module} takes "
                    f"{what} here)"
                )
            if len(option) == len(_PLAIN_USER_PREFIX):
                raise InvalidConfigError(f"{name}: option user_ names no user")
        return entry

    def plain_users(self) -> Mapping[str, str]:
        """PLAIN's users and their passwords (``check`` first)."""
        if "PLAIN" not in self.jaas_configs:
            return MappingProxyType({})
        entry = self._entry("PLAIN")
        return MappingProxyType(
            {
                option[len(_PLAIN_USER_PREFIX) :]: password
                for option, password in entry.options.items()
            }
        )
