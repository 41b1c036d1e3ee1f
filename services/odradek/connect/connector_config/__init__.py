"""The configuration every connector shares (Kafka's ConnectorConfig, SourceConnectorConfig and
SinkConnectorConfig), the transform chain and converters it names, and the validate endpoint's
answer (Kafka's ConfigInfos).

Keys and defaults are Kafka's: ``name``, ``connector.class``, ``tasks.max`` (1),
``key.converter`` / ``value.converter`` / ``header.converter`` (none: the worker's apply),
``transforms``, ``predicates``, ``errors.retry.timeout`` (0), ``errors.retry.delay.max.ms``
(60000), ``errors.tolerance`` (none), ``errors.log.enable`` (false),
``errors.log.include.messages`` (false); sinks add ``topics`` / ``topics.regex`` (exactly one),
``errors.deadletterqueue.topic.name`` (none), ``...replication.factor`` (3),
``...context.headers.enable`` (false); sources add ``exactly.once.support`` (requested),
``transaction.boundary`` (poll), ``transaction.boundary.interval.ms``, ``offsets.storage.topic``.
Per-alias keys are added for each transform (``transforms.<a>.type``, ``.predicate``,
``.negate`` and the transform's own keys under ``transforms.<a>.``), predicate
(``predicates.<a>.type`` and its keys) and converter (``value.converter.<key>``), as Kafka's
``ConnectorConfig.enrich`` and the herder's converter validation do. Client overrides
``producer.override.*``, ``consumer.override.*``, ``admin.override.*`` pass through here; the
worker's ``connector.client.config.override.policy`` judges them (``worker_security``), and its
refusals join the report as ``extra_errors``. Any other key that neither these nor the connector
define is refused, naming it (a connector class may list extra prefixes it accepts in
``ALLOWED_PREFIXES``).

``ConnectorConfig.parse(plugins, props)`` raises ``ConfigException`` naming the first bad key;
``validate_connector_config(plugins, props)`` reports every key, for
``PUT /connector-plugins/{plugin}/config/validate`` and for config writes.

Pure: no I/O; plugin modules are imported through ``plugins``. Safe from any thread.
"""

from odradek.connect.connector_config.keys import (
    CLIENT_OVERRIDE_PREFIXES,
    CONNECTOR_CLASS,
    DLQ_CONTEXT_HEADERS_ENABLE,
    DLQ_TOPIC_NAME,
    DLQ_TOPIC_REPLICATION_FACTOR,
    ERRORS_LOG_ENABLE,
    ERRORS_LOG_INCLUDE_MESSAGES,
    ERRORS_RETRY_DELAY_MAX_MS,
    ERRORS_RETRY_TIMEOUT,
    ERRORS_TOLERANCE,
    EXACTLY_ONCE_SUPPORT,
    HEADER_CONVERTER,
    KEY_CONVERTER,
    NAME,
    OFFSETS_STORAGE_TOPIC,
    PREDICATES,
    TASKS_MAX,
    TOPICS,
    TOPICS_REGEX,
    TRANSACTION_BOUNDARY,
    TRANSACTION_BOUNDARY_INTERVAL_MS,
    TRANSFORMS,
    VALUE_CONVERTER,
    common_config_def,
    sink_config_def,
    source_config_def,
)
from odradek.connect.connector_config.parsed import ConnectorConfig, build_converter
from odradek.connect.connector_config.validate import validate_connector_config

__all__ = [
    "CLIENT_OVERRIDE_PREFIXES",
    "CONNECTOR_CLASS",
    "DLQ_CONTEXT_HEADERS_ENABLE",
    "DLQ_TOPIC_NAME",
    "DLQ_TOPIC_REPLICATION_FACTOR",
    "ERRORS_LOG_ENABLE",
    "ERRORS_LOG_INCLUDE_MESSAGES",
    "ERRORS_RETRY_DELAY_MAX_MS",
    "ERRORS_RETRY_TIMEOUT",
    "ERRORS_TOLERANCE",
    "EXACTLY_ONCE_SUPPORT",
    "HEADER_CONVERTER",
    "KEY_CONVERTER",
    "NAME",
    "OFFSETS_STORAGE_TOPIC",
    "PREDICATES",
    "TASKS_MAX",
    "TOPICS",
    "TOPICS_REGEX",
    "TRANSACTION_BOUNDARY",
    "TRANSACTION_BOUNDARY_INTERVAL_MS",
    "TRANSFORMS",
    "VALUE_CONVERTER",
    "ConnectorConfig",
    "build_converter",
    "common_config_def",
    "sink_config_def",
    "source_config_def",
    "validate_connector_config",
]
