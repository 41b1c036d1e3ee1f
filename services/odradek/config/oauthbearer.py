"""The broker's SASL/OAUTHBEARER keys, Kafka's (KIP-768), and the names of the classes Kafka's
broker configs give for it.

A listener serves OAUTHBEARER (``security.oauthbearer``) when it enables the mechanism and says,
as a Kafka broker must, which validator checks the tokens:

- ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` is Kafka's JWT
  validator, ``org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler``
  (or its 3.1-3.3 name under ``...oauthbearer.secured.``). Unset it is Kafka's default, the
  *unsecured* validator (``OAuthBearerUnsecuredValidatorCallbackHandler``, which checks no
  signature): it is not served, and saying so is refused, as is any other class;
- ``listener.name.<l>.oauthbearer.sasl.jaas.config``, optional: ``OAuthBearerLoginModule`` with
  no options (the ``unsecuredValidator*`` options belong to the unsecured validator, the
  ``unsecuredLogin*`` ones and any other to a login this broker does not do: refused).

The validator's keys are broker-wide (``OAUTHBEARER_KEYS``, with Kafka's defaults):
``sasl.oauthbearer.jwks.endpoint.url`` (required when a listener serves OAUTHBEARER: an http,
https or file URL), ``.jwks.endpoint.refresh.ms``, ``.jwks.endpoint.retry.backoff.ms``,
``.jwks.endpoint.retry.backoff.max.ms``, ``.expected.audience``, ``.expected.issuer``,
``.scope.claim.name``, ``.sub.claim.name``, ``.clock.skew.seconds``. Kafka also takes them per
listener and mechanism (``listener.name.<l>.oauthbearer.sasl.oauthbearer.*``): not here, refused
(``config.sasl``). The client-side OAUTHBEARER keys (``sasl.oauthbearer.token.endpoint.url``,
``sasl.login.*``) are the broker's own login for inter-broker SASL, not implemented: refused.

Pure and immutable: any thread. The file of a ``file:`` URL is read when the broker starts
(``security.jwks``), as Kafka's resolver reads it then.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from odradek.config.keys import ConfigKey, ConfigType, invalid_value
from odradek.errors import InvalidConfigError

__all__ = [
    "CALLBACK_HANDLER_SUFFIX",
    "LOGIN_MODULE",
    "OAUTHBEARER_KEYS",
    "UNSECURED_VALIDATOR",
    "VALIDATOR_CALLBACK_HANDLERS",
    "check_validator_keys",
    "jaas_option_refusal",
    "jwks_url",
]

MECHANISM = "OAUTHBEARER"
CALLBACK_HANDLER_SUFFIX = "sasl.server.callback.handler.class"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR_CALLBACK_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
UNSECURED_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)
JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
_URL_SCHEMES = ("http", "https", "file")


def jwks_url(name: str, raw: object) -> str:
    """An http, https or file URL, as Kafka's ``ConfigurationUtils.validateUrl``."""
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    value = raw.strip()
    try:
        parts = urlsplit(value)
    except ValueError as e:
        raise invalid_value(name, value, f"a malformed URL: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in _URL_SCHEMES:
        raise invalid_value(
            name, value, 'only "http", "https", and "file" URLs are supported (Kafka\'s)'
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not unquote(parts.path).startswith("/"):
            raise invalid_value(name, value, "a file URL names an absolute path: file:///...")
    elif not parts.hostname:
        raise invalid_value(name, value, "the URL names no host")
    return value


_T = ConfigType
OAUTHBEARER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        JWKS_URL,
        _T.STRING,
        None,
        "Where the OAUTHBEARER listeners' JWT verification keys (a JWKS) come from: an http(s) "
        "URL, refreshed in the background, or a file URL, read at start.",
        convert=jwks_url,
    ),
    ConfigKey(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        _T.LONG,
        3600000,
        "How often the JWKS endpoint is fetched again.",
        minimum=1,
    ),
    ConfigKey(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        _T.LONG,
        100,
        "The first wait between failed JWKS fetches (doubling); also the least time between "
        "two refreshes asked for by tokens naming an unknown key id.",
        minimum=0,
    ),
    ConfigKey(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        _T.LONG,
        10000,
        "How long one JWKS refresh retries in all.",
        minimum=0,
    ),
    ConfigKey(
        "sasl.oauthbearer.expected.audience",
        _T.LIST,
        None,
        "The audiences a token's aud must name one of; unset: a token with an aud is refused.",
    ),
    ConfigKey(
        "sasl.oauthbearer.expected.issuer",
        _T.STRING,
        None,
        "The iss a token must have; unset: not checked.",
    ),
    ConfigKey(
        "sasl.oauthbearer.scope.claim.name",
        _T.STRING,
        "scope",
        "The claim that holds a token's scopes.",
    ),
    ConfigKey(
        "sasl.oauthbearer.sub.claim.name",
        _T.STRING,
        "sub",
        "The claim that names the principal: User:<its value>.",
    ),
    ConfigKey(
        "sasl.oauthbearer.clock.skew.seconds",
        _T.INT,
        30,
        "Slack allowed between the broker's clock and the token issuer's for exp, iat and nbf.",
        minimum=0,
    ),
)


def jaas_option_refusal(name: str, option: str) -> str:
    """Why ``option`` of an ``OAuthBearerLoginModule`` JAAS config is refused."""
    if option.startswith("unsecuredValidator"):
        return (
            f"{name}: option {option} configures Kafka's unsecured validator "
            f"(OAuthBearerUnsecuredValidatorCallbackHandler), which is not served: tokens are "
            f"JWTs checked against sasl.oauthbearer.jwks.endpoint.url; remove it"
        )
    if option.startswith("unsecuredLogin"):
        return (
            f"{name}: option {option} configures the broker's own unsecured login, for "
            f"inter-broker SASL, which is not implemented; remove it"
        )
    return f"{name}: option {option} is not supported ({LOGIN_MODULE} takes no options here)"


def check_validator_keys(listener: str, values: dict[str, object]) -> None:
    """Refuse an OAUTHBEARER listener whose broker-wide keys (``values`` by key name) cannot
    work: no JWKS URL, a maximum backoff below the first."""
    if values.get(JWKS_URL) is None:
        raise InvalidConfigError(
            f"listener {listener} (SASL) enables OAUTHBEARER, but {JWKS_URL} is not set: it "
            f"names the JWKS (http, https or file URL) the tokens' signatures are checked against"
        )
    backoff = values["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"]
    backoff_max = values["sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"]
    assert isinstance(backoff, int) and isinstance(backoff_max, int)
    if backoff_max < backoff:
        raise InvalidConfigError(
            f"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms ({backoff_max}) is less than "
            f"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms ({backoff})"
        )
