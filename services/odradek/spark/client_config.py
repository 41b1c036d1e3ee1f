"""``kafka.*`` options -> confluent-kafka configuration, as Spark's Kafka source passes them on.

Every option that starts with ``kafka.`` is given to the client without the prefix
(``kafka.bootstrap.servers`` -> ``bootstrap.servers``). Keys the data source itself decides are
refused with the option that replaces them, as Spark refuses them; keys librdkafka does not know
are refused by librdkafka when the client is made (a clear ``KafkaException`` naming the key).

Security options are written as Spark users write them for the Java client
(``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config`` for PLAIN or
SCRAM, ``kafka.ssl.truststore.location`` with ``kafka.ssl.truststore.type=PEM``, a PEM keystore)
or with librdkafka's names: every ``kafka.security.protocol``, ``kafka.sasl.*`` and
``kafka.ssl.*`` option goes through the one mapping, ``client.java_security`` (shared with the
commands and Connect), and what it cannot map (a JKS truststore, ``kafka.sasl.kerberos.*``,
``kafka.ssl.keystore.password``...) is an ``OptionError`` naming the option. No message holds a
secret. Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.client import java_security

__all__ = ["OptionError", "client_config"]

PREFIX = "kafka."

# Client keys the source sets itself, and what to use instead (Spark's own messages, in short).
_REFUSED = {
    "auto.offset.reset": "use the option startingOffsets",
    "enable.auto.commit": "offsets are kept in the checkpoint, never committed by the source",
    "key.deserializer": "keys are read as bytes; cast or parse them in the DataFrame",
    "value.deserializer": "values are read as bytes; cast or parse them in the DataFrame",
    "key.serializer": "keys are written as bytes or strings; serialize them in the DataFrame",
    "value.serializer": "values are written as bytes or strings; serialize them in the DataFrame",
    "interceptor.classes": "Java interceptors do not apply to this Python source",
}


class OptionError(ValueError):
    """An option the data source does not take; the message names the option."""


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The client configuration from ``kafka.*`` options (``kafka.bootstrap.servers`` required)."""
    config: dict[str, str] = {}
    security: dict[str, str] = {}
    names: dict[str, str] = {}
    for name, value in options.items():
        if not name.lower().startswith(PREFIX):
            continue
        key = name[len(PREFIX) :]
        if key.lower() in _REFUSED:
            raise OptionError(f"option {name!r} is not supported: {_REFUSED[key.lower()]}")
        if java_security.is_security_key(key.lower()):
            security[key.lower()] = value
            names[java_security.ALIASES.get(key.lower(), key.lower())] = name
            names[key.lower()] = name
        else:
            config[key] = value
    try:
        config.update(
            java_security.translate(security, describe=lambda key: repr(names.get(key, key)))
        )
    except java_security.JavaSecurityError as e:
        option = names.get(e.key, PREFIX + e.key)
        raise OptionError(f"option {option!r}: {e.reason}") from e
    if not config.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    return config
