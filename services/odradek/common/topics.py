"""Kafka's rules for topic names, the internal topics, and a partition's directory name.

The name rule is Kafka's ``org.apache.kafka.common.internals.Topic``: 1 to 249 characters of
ASCII letters, digits, ``.``, ``_`` and ``-``, and neither ``.`` nor ``..``. The broker's
CreateTopics validation, ZooKeeper's path builders, the checkpoint parser, the log directory
guard and the operator's CRD pattern all take it from here.

A partition's log directory is ``<topic>-<partition>`` (Kafka's ``UnifiedLog.logDirName``); since
a topic may itself contain ``-``, the partition is what follows the last one.
"""

from __future__ import annotations

import re

from odradek.common.partitions import TopicPartition

__all__ = [
    "TOPIC_NAME_LENGTH_MAX",
    "TOPIC_NAME_CHARS",
    "TOPIC_NAME_PATTERN",
    "LEGAL_TOPIC_CHARACTERS",
    "OFFSETS_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "CLUSTER_METADATA_TOPIC",
    "INTERNAL_TOPICS",
    "is_legal_topic",
    "log_directory_name",
    "parse_log_directory_name",
]

TOPIC_NAME_LENGTH_MAX = 249
TOPIC_NAME_CHARS = "[a-zA-Z0-9._-]"  # a regular-expression character class
# Also valid in JSON Schema (the operator's CRD takes it).
TOPIC_NAME_PATTERN = rf"^{TOPIC_NAME_CHARS}{{1,{TOPIC_NAME_LENGTH_MAX}}}$"
_LEGAL_TOPIC = re.compile(TOPIC_NAME_PATTERN)
# Only legal characters, of any length: for validators that report length and characters apart.
LEGAL_TOPIC_CHARACTERS = re.compile(f"{TOPIC_NAME_CHARS}+")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # KRaft's; no Odradek broker has it, clients skip it
# The topics the brokers own: clients never create, delete or pattern-match them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def is_legal_topic(name: object) -> bool:
    """True for a name Kafka's rule accepts (see the module docstring)."""
    if not isinstance(name, str) or name in (".", ".."):
        return False
    return _LEGAL_TOPIC.fullmatch(name) is not None


def log_directory_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``; raises ``ValueError`` for a name Kafka's rule refuses or a
    negative partition, which would name a directory elsewhere (``../x``) or one that loading
    does not recognise (callers validate first: this is the last guard before ``mkdir``)."""
    if not is_legal_topic(topic) or partition < 0:
        raise ValueError(f"no log directory for topic {topic!r} partition {partition}")
    return f"{topic}-{partition}"


def parse_log_directory_name(name: str) -> TopicPartition | None:
    """``orders-3`` -> ("orders", 3); None for names that are not partition directories."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))
