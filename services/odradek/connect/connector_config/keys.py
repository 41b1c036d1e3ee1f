"""The keys every connector shares, with Kafka's names, defaults, groups and validators
(``ConnectorConfig``, ``SinkConnectorConfig``, ``SourceConnectorConfig``)."""

from __future__ import annotations

import re
from typing import Any

from odradek.connect.api import NO_DEFAULT, ConfigDef, ConfigKey, ConfigType, Importance
from odradek.connect.config_def import in_range, invalid, one_of

NAME = "name"
CONNECTOR_CLASS = "connector.class"
TASKS_MAX = "tasks.max"
KEY_CONVERTER = "key.converter"
VALUE_CONVERTER = "value.converter"
HEADER_CONVERTER = "header.converter"
TRANSFORMS = "transforms"
PREDICATES = "predicates"
ERRORS_RETRY_TIMEOUT = "errors.retry.timeout"
ERRORS_RETRY_DELAY_MAX_MS = "errors.retry.delay.max.ms"
ERRORS_TOLERANCE = "errors.tolerance"
ERRORS_LOG_ENABLE = "errors.log.enable"
ERRORS_LOG_INCLUDE_MESSAGES = "errors.log.include.messages"
TOPICS = "topics"
TOPICS_REGEX = "topics.regex"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_TOPIC_REPLICATION_FACTOR = "errors.deadletterqueue.topic.replication.factor"
DLQ_CONTEXT_HEADERS_ENABLE = "errors.deadletterqueue.context.headers.enable"
EXACTLY_ONCE_SUPPORT = "exactly.once.support"
TRANSACTION_BOUNDARY = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_MS = "transaction.boundary.interval.ms"
OFFSETS_STORAGE_TOPIC = "offsets.storage.topic"

CLIENT_OVERRIDE_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")

COMMON_GROUP = "Common"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
ERROR_GROUP = "Error Handling"
EXACTLY_ONCE_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "offsets.topic"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _name_validator(name: str, value: Any) -> None:
    """Kafka's ``nonEmptyStringWithoutControlChars``."""
    if value is None or value == "":
        raise invalid(name, value, "String may not be empty")
    controls = _CONTROL.findall(value)
    if controls:
        shown = ", ".join(f"\\u{ord(c):04X}" for c in controls)
        raise invalid(
            name,
            value,
            f"String may not contain control sequences but had the following ISO control "
            f"characters: {shown}",
        )


def unique_aliases(name: str, value: Any) -> None:
    aliases = value or []
    if len(set(aliases)) != len(aliases):
        raise invalid(name, ",".join(aliases), "Duplicate alias provided.")
    for alias in aliases:
        if not alias:
            raise invalid(name, ",".join(aliases), "an alias may not be empty")


def _regex_validator(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as exc:
            raise invalid(name, value, f"not a valid regular expression: {exc}") from None


def _key(
    name: str, type_: ConfigType, default: Any, group: str, order: int, **kw: Any
) -> ConfigKey:
    return ConfigKey(name, type_, default, group=group, order_in_group=order, **kw)


def common_config_def() -> ConfigDef:
    """Kafka's ``ConnectorConfig.configDef()``."""
    keys = [
        _key(
            NAME,
            ConfigType.STRING,
            NO_DEFAULT,
            COMMON_GROUP,
            1,
            importance=Importance.HIGH,
            width="MEDIUM",
            display_name="Connector name",
            validator=_name_validator,
            documentation="Globally unique name to use for this connector.",
        ),
        _key(
            CONNECTOR_CLASS,
            ConfigType.STRING,
            NO_DEFAULT,
            COMMON_GROUP,
            2,
            importance=Importance.HIGH,
            width="LONG",
            display_name="Connector class",
            documentation="Name or alias of the class for this connector: the full name "
            "(org.apache.kafka.connect.file.FileStreamSinkConnector), the simple name "
            "(FileStreamSinkConnector), the simple name without Connector (FileStreamSink), or "
            "a Python path (package.module:Class).",
        ),
        _key(
            TASKS_MAX,
            ConfigType.INT,
            1,
            COMMON_GROUP,
            3,
            importance=Importance.HIGH,
            width="SHORT",
            display_name="Tasks max",
            validator=in_range(1),
            documentation="Maximum number of tasks to use for this connector.",
        ),
        _key(
            KEY_CONVERTER,
            ConfigType.CLASS,
            None,
            COMMON_GROUP,
            4,
            importance=Importance.LOW,
            width="SHORT",
            display_name="Key converter class",
            documentation="Converter class used to convert between Kafka Connect format and the "
            "serialized form that is written to Kafka. Overrides the worker's key.converter.",
        ),
        _key(
            VALUE_CONVERTER,
            ConfigType.CLASS,
            None,
            COMMON_GROUP,
            5,
            importance=Importance.LOW,
            width="SHORT",
            display_name="Value converter class",
            documentation="Converter class used to convert between Kafka Connect format and the "
            "serialized form that is written to Kafka. Overrides the worker's value.converter.",
        ),
        _key(
            HEADER_CONVERTER,
            ConfigType.CLASS,
            None,
            COMMON_GROUP,
            6,
            importance=Importance.LOW,
            width="SHORT",
            display_name="Header converter class",
            documentation="HeaderConverter class used to convert between Kafka Connect format "
            "and the serialized form that is written to Kafka. Overrides the worker's "
            "header.converter.",
        ),
        _key(
            TRANSFORMS,
            ConfigType.LIST,
            "",
            TRANSFORMS_GROUP,
            7,
            importance=Importance.LOW,
            width="LONG",
            display_name="Transforms",
            validator=unique_aliases,
            documentation="Aliases for the transformations to be applied to records.",
        ),
        _key(
            PREDICATES,
            ConfigType.LIST,
            "",
            PREDICATES_GROUP,
            8,
            importance=Importance.LOW,
            width="LONG",
            display_name="Predicates",
            validator=unique_aliases,
            documentation="Aliases for the predicates used by transformations.",
        ),
        _key(
            ERRORS_RETRY_TIMEOUT,
            ConfigType.LONG,
            0,
            ERROR_GROUP,
            1,
            importance=Importance.MEDIUM,
            width="MEDIUM",
            display_name="Retry Timeout for Errors",
            validator=in_range(-1),
            documentation="The maximum duration in milliseconds that a failed operation will be "
            "reattempted. The default is 0, which means no retries will be attempted. Use -1 "
            "for infinite retries.",
        ),
        _key(
            ERRORS_RETRY_DELAY_MAX_MS,
            ConfigType.LONG,
            60000,
            ERROR_GROUP,
            2,
            importance=Importance.MEDIUM,
            width="MEDIUM",
            display_name="Maximum Delay Between Retries for Errors",
            validator=in_range(0),
            documentation="The maximum duration in milliseconds between consecutive retry "
            "attempts.",
        ),
        _key(
            ERRORS_TOLERANCE,
            ConfigType.STRING,
            "none",
            ERROR_GROUP,
            3,
            importance=Importance.MEDIUM,
            width="SHORT",
            display_name="Error Tolerance",
            validator=one_of("none", "all", case_insensitive=True),
            documentation="Behavior for tolerating errors during connector operation. 'none' "
            "fails the task at the first error; 'all' skips problematic records.",
        ),
        _key(
            ERRORS_LOG_ENABLE,
            ConfigType.BOOLEAN,
            False,
            ERROR_GROUP,
            4,
            importance=Importance.MEDIUM,
            width="SHORT",
            display_name="Log Errors",
            documentation="If true, write each error and the details of the failed operation "
            "and problematic record to the Connect application log.",
        ),
        _key(
            ERRORS_LOG_INCLUDE_MESSAGES,
            ConfigType.BOOLEAN,
            False,
            ERROR_GROUP,
            5,
            importance=Importance.MEDIUM,
            width="SHORT",
            display_name="Log Error Details",
            documentation="Whether to include in the log the Connect record that resulted in a "
            "failure.",
        ),
    ]
    return ConfigDef(keys)


def sink_config_def() -> ConfigDef:
    """Kafka's ``SinkConnectorConfig.configDef()``."""
    return common_config_def().merged(
        ConfigDef(
            [
                _key(
                    TOPICS,
                    ConfigType.LIST,
                    "",
                    COMMON_GROUP,
                    4,
                    importance=Importance.HIGH,
                    width="LONG",
                    display_name="Topics",
                    documentation="List of topics to consume, separated by commas.",
                ),
                _key(
                    TOPICS_REGEX,
                    ConfigType.STRING,
                    "",
                    COMMON_GROUP,
                    4,
                    importance=Importance.HIGH,
                    width="LONG",
                    display_name="Topics regex",
                    validator=_regex_validator,
                    documentation="Regular expression giving topics to consume. Only one of "
                    "topics or topics.regex should be specified.",
                ),
                _key(
                    DLQ_TOPIC_NAME,
                    ConfigType.STRING,
                    "",
                    ERROR_GROUP,
                    6,
                    importance=Importance.MEDIUM,
                    width="MEDIUM",
                    display_name="Dead Letter Queue Topic Name",
                    documentation="The name of the topic to be used as the dead letter queue "
                    "(DLQ) for messages that result in an error when processed by this sink "
                    "connector, or its transformations or converters. Empty: no DLQ.",
                ),
                _key(
                    DLQ_TOPIC_REPLICATION_FACTOR,
                    ConfigType.SHORT,
                    3,
                    ERROR_GROUP,
                    7,
                    importance=Importance.MEDIUM,
                    width="MEDIUM",
                    display_name="Dead Letter Queue Topic Replication Factor",
                    validator=in_range(-1),
                    documentation="Replication factor used to create the dead letter queue "
                    "topic when it doesn't already exist (-1: the broker's default).",
                ),
                _key(
                    DLQ_CONTEXT_HEADERS_ENABLE,
                    ConfigType.BOOLEAN,
                    False,
                    ERROR_GROUP,
                    8,
                    importance=Importance.MEDIUM,
                    width="MEDIUM",
                    display_name="Enable Error Context Headers",
                    documentation="If true, add headers containing error context to the "
                    "messages written to the dead letter queue.",
                ),
            ]
        )
    )


def source_config_def() -> ConfigDef:
    """Kafka's ``SourceConnectorConfig.configDef()`` (less topic creation)."""
    return common_config_def().merged(
        ConfigDef(
            [
                _key(
                    EXACTLY_ONCE_SUPPORT,
                    ConfigType.STRING,
                    "requested",
                    EXACTLY_ONCE_GROUP,
                    1,
                    importance=Importance.MEDIUM,
                    width="SHORT",
                    display_name="Exactly once support",
                    validator=one_of("requested", "required", case_insensitive=True),
                    documentation="Permitted values are requested, required. If set to "
                    '"required", forces a preflight check for the connector to ensure that it '
                    "can provide exactly-once semantics with the given configuration.",
                ),
                _key(
                    TRANSACTION_BOUNDARY,
                    ConfigType.STRING,
                    "poll",
                    EXACTLY_ONCE_GROUP,
                    2,
                    importance=Importance.MEDIUM,
                    width="SHORT",
                    display_name="Transaction Boundary",
                    validator=one_of("poll", "interval", "connector", case_insensitive=True),
                    documentation="Permitted values are: poll, interval, connector. If set to "
                    "'poll', a new producer transaction will be started and committed for every "
                    "batch of records that each task from this connector provides to Connect.",
                ),
                _key(
                    TRANSACTION_BOUNDARY_INTERVAL_MS,
                    ConfigType.LONG,
                    None,
                    EXACTLY_ONCE_GROUP,
                    3,
                    importance=Importance.LOW,
                    width="SHORT",
                    display_name="Transaction boundary interval",
                    validator=lambda n, v: v is None or in_range(0)(n, v),
                    documentation="If 'transaction.boundary' is set to 'interval', determines the "
                    "interval for producer transaction commits by connector tasks. If unset, "
                    "defaults to the value of the worker-level 'offset.flush.interval.ms'.",
                ),
                _key(
                    OFFSETS_STORAGE_TOPIC,
                    ConfigType.STRING,
                    None,
                    OFFSETS_TOPIC_GROUP,
                    1,
                    importance=Importance.LOW,
                    width="LONG",
                    display_name="Offsets topic",
                    documentation="The name of a separate offsets topic to use for this "
                    "connector. If empty or not specified, the worker's global offsets topic "
                    "name will be used.",
                ),
            ]
        )
    )
