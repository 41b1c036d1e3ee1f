"""Write options and the written DataFrame's columns, checked on the driver before any task runs.

Spark's Kafka sink takes a DataFrame of these columns (matched by name, case-insensitively):

=========  ======================================  ==========================================
column     type                                    meaning
=========  ======================================  ==========================================
value      binary or string (required)             the record's value; null writes a tombstone
key        binary or string (optional)             the record's key; null or absent: no key
topic      string (optional)                       the record's topic, unless option ``topic``
partition  int (optional)                          the record's partition; null or absent: the
                                                   partitioner's choice
headers    array<struct<key string,value binary>>  the record's headers, in order
=========  ======================================  ==========================================

A column of another name or type is refused with an error naming it (Spark's sink ignores
columns it does not know; refusing them catches a misspelt ``Key`` or ``headres`` before it loses
data silently). Options, besides ``kafka.*`` (``client_config``): ``topic`` (every row's topic;
overrides the column), ``includeHeaders`` (accepted as in Spark's sink table; the ``headers``
column is written whenever it is present), ``transactional`` (streaming only: exactly-once per
micro-batch, see ``stream_write``), and Spark's own ``checkpointLocation`` on streaming writes.
Anything else is refused with an error naming it.

Every write uses the idempotent producer (``enable.idempotence=true``, ``acks=all``); options
that would turn it off are refused. The default partitioner is ``murmur2_random``: the hash of
Java's default partitioner, so a keyed record lands where a Java producer would put it (set
``kafka.partitioner`` to choose another librdkafka partitioner).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.spark.client_config import OptionError, client_config

__all__ = [
    "Columns",
    "OptionError",
    "SchemaError",
    "WriteOptions",
    "refuse_overwrite",
    "write_options",
]

# Options other than kafka.* a write takes (lower case: Spark passes option names lower-cased).
_BATCH_OPTIONS = frozenset({"topic", "includeheaders", "transactional"})
# Spark itself passes the checkpoint and the query's name (``.queryName(...)``) to a stream sink.
_STREAM_OPTIONS = _BATCH_OPTIONS | {"checkpointlocation", "queryname"}

# Producer settings the writer owns, and why (the user's kafka.* may not change them).
_PRODUCER_REFUSED = {
    "transactional.id": "use the option transactional=true: transactional ids are derived from "
    "the query id and the Spark partition",
    "group.id": "a write has no consumer group",
    "partitioner.class": "Java partitioner classes do not apply here; set kafka.partitioner "
    "(a librdkafka partitioner; murmur2_random, Java's default hash, is the default)",
}
_PRODUCER_FORCED = {"enable.idempotence": ("true",), "acks": ("all", "-1")}
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random"}


class SchemaError(ValueError):
    """The DataFrame cannot be written as records; the message names the column."""


@dataclass(frozen=True)
class Columns:
    """Where each record field is in the written rows (``None``: the column is absent)."""

    value: int
    key: int | None = None
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None


@dataclass(frozen=True)
class WriteOptions:
    """A write's parsed options: plain data, pickled to every task."""

    producer_config: dict[str, str]
    columns: Columns
    topic: str | None = None
    transactional: bool = False


def refuse_overwrite(overwrite: bool) -> None:
    """Batch writes append only, as Spark's Kafka sink (Spark itself refuses Ignore/ErrorIfExists
    for Python data sources, so ``mode("append")`` is the one mode that writes)."""
    if overwrite:
        raise OptionError(
            "Save mode Overwrite not allowed for Kafka. Allowed save mode is Append "
            '(df.write.mode("append")): records cannot be removed from a topic'
        )


def write_options(
    options: Mapping[str, str], schema: StructType, *, streaming: bool
) -> WriteOptions:
    """Parse and check ``options`` and ``schema``; raise ``OptionError`` or ``SchemaError``."""
    known = _STREAM_OPTIONS if streaming else _BATCH_OPTIONS
    for name in options:
        lower = name.lower()
        if lower.startswith("kafka.") or lower in known:
            continue
        if lower == "path":
            raise OptionError(
                "option 'path' (save(path) or start(path)) is not supported: "
                "name the topic with the option 'topic' or a 'topic' column"
            )
        raise OptionError(
            f"option {name!r} is not supported by the odradek sink; it takes "
            f"{', '.join(sorted(known))} and kafka.* (docs/spark.md)"
        )
    lowered = {name.lower(): value for name, value in options.items()}
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' must not be empty")
    _flag(lowered, "includeheaders", "includeHeaders")
    transactional = _flag(lowered, "transactional", "transactional")
    if transactional and not streaming:
        raise OptionError(
            "option 'transactional' applies to streaming writes (writeStream) only: a batch "
            "write has no batch id to make a retried task's transaction idempotent"
        )
    return WriteOptions(
        producer_config=_producer_config(options),
        columns=columns(schema, topic),
        topic=topic,
        transactional=transactional,
    )


def columns(schema: StructType, topic_option: str | None) -> Columns:
    """The record fields' positions in ``schema``; ``SchemaError`` names a bad column."""
    positions: dict[str, int] = {}
    for index, field in enumerate(schema.fields):
        name = field.name.lower()
        if name in positions:
            raise SchemaError(f"column {field.name!r} appears twice")
        expected = _EXPECTED.get(name)
        if expected is None:
            raise SchemaError(
                f"column {field.name!r} cannot be written: the odradek sink takes the columns "
                "value (required), key, topic, partition and headers; drop or rename the column"
            )
        type_name, accepts = expected
        if not accepts(field.dataType):
            raise SchemaError(
                f"column {field.name!r} must be {type_name}, not {field.dataType.simpleString()}"
            )
        positions[name] = index
    if "value" not in positions:
        raise SchemaError("column 'value' (binary or string) is required")
    if topic_option is None and "topic" not in positions:
        raise SchemaError(
            "topic option required when no 'topic' attribute is present: "
            "set the option 'topic' or write a 'topic' column"
        )
    return Columns(
        value=positions["value"],
        key=positions.get("key"),
        topic=positions.get("topic"),
        partition=positions.get("partition"),
        headers=positions.get("headers"),
    )


def _bytes_or_string(data_type: DataType) -> bool:
    return isinstance(data_type, BinaryType | StringType)


def _headers(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, BinaryType)
    )


_EXPECTED = {
    "value": ("binary or string", _bytes_or_string),
    "key": ("binary or string", _bytes_or_string),
    "topic": ("string", lambda t: isinstance(t, StringType)),
    "partition": ("int", lambda t: isinstance(t, IntegerType)),
    "headers": ("array<struct<key:string,value:binary>>", _headers),
}


def _flag(lowered: Mapping[str, str], key: str, name: str) -> bool:
    value = lowered.get(key)
    if value is None:
        return False
    if value.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def _producer_config(options: Mapping[str, str]) -> dict[str, str]:
    config = client_config(options)
    lowered = {key.lower(): key for key in config}
    for key, why in _PRODUCER_REFUSED.items():
        if key in lowered:
            raise OptionError(f"option 'kafka.{lowered[key]}' is not supported: {why}")
    for key, allowed in _PRODUCER_FORCED.items():
        if key in lowered and config[lowered[key]].strip().lower() not in allowed:
            raise OptionError(
                f"option 'kafka.{lowered[key]}={config[lowered[key]]}' is not supported: "
                "writes always use the idempotent producer (enable.idempotence=true, acks=all)"
            )
    for key, value in _PRODUCER_DEFAULTS.items():
        if key not in lowered:
            config[key] = value
    config["enable.idempotence"] = "true"
    config["acks"] = "all"
    return config
