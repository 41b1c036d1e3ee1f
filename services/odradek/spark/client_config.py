"""``kafka.*`` options -> confluent-kafka configuration, as Spark's Kafka source passes them on.

Every option that starts with ``kafka.`` is given to the client without the prefix
(``kafka.bootstrap.servers`` -> ``bootstrap.servers``). Keys the data source itself decides are
refused with the option that replaces them, as Spark refuses them; keys librdkafka does not know
are refused by librdkafka when the client is made (a clear ``KafkaException`` naming the key).
"""

from __future__ import annotations

from collections.abc import Mapping

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
    for name, value in options.items():
        if not name.lower().startswith(PREFIX):
            continue
        key = name[len(PREFIX) :]
        if key.lower() in _REFUSED:
            raise OptionError(f"option {name!r} is not supported: {_REFUSED[key.lower()]}")
        config[key] = value
    if not config.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    return config
