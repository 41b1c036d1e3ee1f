"""Write options and columns are checked on the driver; errors name the option or column."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from odradek.spark.schema import HEADERS_TYPE
from odradek.spark.write_options import (
    Columns,
    OptionError,
    SchemaError,
    refuse_overwrite,
    write_options,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
TO_T = {**BOOTSTRAP, "topic": "t"}


def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in fields])


VALUE_ONLY = schema(("value", BinaryType()))


def test_every_column_is_found_by_name_case_insensitively() -> None:
    written = schema(
        ("Topic", StringType()),
        ("headers", HEADERS_TYPE),
        ("key", StringType()),
        ("PARTITION", IntegerType()),
        ("value", StringType()),
    )
    options = write_options(BOOTSTRAP, written, streaming=False)
    assert options.columns == Columns(value=4, key=2, topic=0, partition=3, headers=1)
    assert options.topic is None and not options.transactional


def test_the_producer_is_idempotent_with_javas_partitioner_by_default() -> None:
    config = write_options({**TO_T, "kafka.linger.ms": "20"}, VALUE_ONLY, streaming=False)
    assert config.producer_config == {
        "bootstrap.servers": "127.0.0.1:9092",
        "linger.ms": "20",
        "partitioner": "murmur2_random",
        "enable.idempotence": "true",
        "acks": "all",
    }
    chosen = write_options({**TO_T, "kafka.partitioner": "consistent"}, VALUE_ONLY, streaming=False)
    assert chosen.producer_config["partitioner"] == "consistent"
    same = write_options({**TO_T, "kafka.acks": "-1"}, VALUE_ONLY, streaming=False)
    assert same.producer_config["acks"] == "all"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((("key", BinaryType()),), "column 'value' (binary or string) is required"),
        ((("value", LongType()),), "column 'value' must be binary or string, not bigint"),
        (
            (("value", BinaryType()), ("key", IntegerType())),
            "column 'key' must be binary or string",
        ),
        ((("value", BinaryType()), ("partition", LongType())), "column 'partition' must be int"),
        ((("value", BinaryType()), ("topic", BinaryType())), "column 'topic' must be string"),
        ((("value", BinaryType()), ("offset", LongType())), "column 'offset' cannot be written"),
        ((("value", BinaryType()), ("Value", BinaryType())), "column 'Value' appears twice"),
        (
            (("value", BinaryType()), ("headers", ArrayType(StringType()))),
            "column 'headers' must be array<struct<key:string,value:binary>>",
        ),
    ],
)
def test_bad_columns_are_named(fields: tuple[tuple[str, object], ...], message: str) -> None:
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        write_options({**BOOTSTRAP, "topic": "t"}, schema(*fields), streaming=False)


def test_a_topic_is_required_as_option_or_column() -> None:
    with pytest.raises(SchemaError, match="topic option required"):
        write_options(BOOTSTRAP, VALUE_ONLY, streaming=False)
    with_option = write_options({**BOOTSTRAP, "topic": "t"}, VALUE_ONLY, streaming=False)
    assert with_option.topic == "t"
    with pytest.raises(OptionError, match="'topic' must not be empty"):
        write_options({**BOOTSTRAP, "topic": " "}, VALUE_ONLY, streaming=False)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("subscribe", "t", "option 'subscribe' is not supported by the odradek sink"),
        ("checkpointLocation", "/tmp/x", "option 'checkpointLocation' is not supported"),
        ("path", "t", "option 'path'"),
        ("includeHeaders", "yes", "'includeHeaders' must be true or false"),
        ("transactional", "true", "'transactional' applies to streaming writes"),
        ("kafka.transactional.id", "x", "use the option transactional=true"),
        ("kafka.enable.idempotence", "false", "always use the idempotent producer"),
        ("kafka.acks", "1", "always use the idempotent producer"),
        ("kafka.group.id", "g", "a write has no consumer group"),
        ("kafka.partitioner.class", "x", "set kafka.partitioner"),
        ("kafka.value.serializer", "x", "serialize them in the DataFrame"),
    ],
)
def test_bad_batch_options_are_named(option: str, value: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        write_options({**BOOTSTRAP, "topic": "t", option: value}, VALUE_ONLY, streaming=False)


def test_streaming_takes_transactional_the_checkpoint_and_the_query_name() -> None:
    options = write_options(
        {
            **BOOTSTRAP,
            "topic": "t",
            "transactional": "TRUE",
            "checkpointlocation": "/c",
            "queryname": "counts",  # what Spark passes for .queryName("counts")
        },
        VALUE_ONLY,
        streaming=True,
    )
    assert options.transactional
    with pytest.raises(OptionError, match="'transactional' must be true or false"):
        write_options({**BOOTSTRAP, "topic": "t", "transactional": "1"}, VALUE_ONLY, streaming=True)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        write_options({"topic": "t"}, VALUE_ONLY, streaming=False)


def test_overwrite_is_refused_as_sparks_kafka_sink_does() -> None:
    refuse_overwrite(False)
    with pytest.raises(OptionError, match="Save mode Overwrite not allowed for Kafka"):
        refuse_overwrite(True)
