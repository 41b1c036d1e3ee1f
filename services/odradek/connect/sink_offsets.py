"""A sink connector's offsets (KIP-875): the committed offsets of its consumer group.

A sink connector's tasks consume in the group ``connect-<name>`` (Kafka's
``SinkUtils.consumerGroupId``; ``consumer.override.group.id`` in the connector's config names
another), so reading, altering and resetting its offsets are consumer group admin calls, made here
with confluent-kafka's ``AdminClient``:

- ``get``: ListConsumerGroupOffsets -> ``[{"partition": {"kafka_topic": t, "kafka_partition": p},
  "offset": {"kafka_offset": o}}]`` (KIP-875's shape), partitions without a commit left out;
- ``alter``: AlterConsumerGroupOffsets (OffsetCommit by the admin); the group must be empty, which
  it is when the connector is STOPPED;
- ``reset``: DeleteGroups, as Kafka resets a sink connector's offsets (an unknown group is
  already reset).

Every call blocks (at most ``SINK_OFFSETS_TIMEOUT_S``): herders run them through
``asyncio.to_thread``. Errors are ``HerderError``s a REST client can read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from odradek.connect.herder import BadRequestError, ConflictError, HerderError

__all__ = ["SINK_OFFSETS_TIMEOUT_S", "SinkOffsets", "sink_group_id", "parse_sink_offsets"]

SINK_OFFSETS_TIMEOUT_S = 30.0
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: no committed offset


def sink_group_id(name: str, config: Mapping[str, str]) -> str:
    return config.get("consumer.override.group.id") or f"connect-{name}"


def parse_sink_offsets(offsets: Sequence[Mapping[str, Any]]) -> list[tuple[str, int, int | None]]:
    """KIP-875 sink entries -> ``(topic, partition, offset | None)``; a 400 names a bad field."""
    parsed = []
    for i, entry in enumerate(offsets):
        partition = entry["partition"]
        topic = partition.get("kafka_topic")
        number = partition.get("kafka_partition")
        if not isinstance(topic, str) or not topic:
            raise BadRequestError(
                f"offsets[{i}].partition.kafka_topic must be a topic name (a sink connector's "
                'partitions are {"kafka_topic": ..., "kafka_partition": ...})'
            )
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise BadRequestError(
                f"offsets[{i}].partition.kafka_partition must be a non-negative integer"
            )
        offset = entry["offset"]
        if offset is None:
            parsed.append((topic, number, None))
            continue
        value = offset.get("kafka_offset")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadRequestError(
                f"offsets[{i}].offset.kafka_offset must be a non-negative integer"
            )
        parsed.append((topic, number, value))
    return parsed


class SinkOffsets:
    """The consumer group admin calls behind a sink connector's offsets endpoints."""

    def __init__(self, admin_config: Mapping[str, Any], admin_factory: Callable | None = None):
        self._admin_config = dict(admin_config)
        self._admin_factory = admin_factory
        self._admin: Any = None

    def _client(self) -> Any:
        if self._admin is None:
            if self._admin_factory is not None:
                self._admin = self._admin_factory(self._admin_config)
            else:
                from confluent_kafka.admin import AdminClient

                self._admin = AdminClient(self._admin_config)
        return self._admin

    def get(self, group: str) -> list[dict[str, Any]]:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

        request = [ConsumerGroupTopicPartitions(group)]
        try:
            result = self._client().list_consumer_group_offsets(request)[group]
            found = result.result(SINK_OFFSETS_TIMEOUT_S)
        except KafkaException as exc:
            if "GROUP_ID_NOT_FOUND" in str(exc):
                return []
            raise HerderError(f"could not read the offsets of group {group}: {exc}") from exc
        return [
            {
                "partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                "offset": {"kafka_offset": tp.offset},
            }
            for tp in sorted(found.topic_partitions or [], key=lambda t: (t.topic, t.partition))
            if tp.offset != NO_OFFSET and tp.offset >= 0
        ]

    def alter(self, group: str, offsets: Sequence[tuple[str, int, int | None]]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

        if any(o is None for _, _, o in offsets):
            # confluent-kafka has no OffsetDelete: resetting single partitions is not offered.
            raise BadRequestError(
                "a null offset for a sink connector's partition is not supported; reset all its "
                "offsets with DELETE /connectors/{name}/offsets, or give a kafka_offset"
            )
        parts = [TopicPartition(t, p, o) for t, p, o in offsets]
        try:
            future = self._client().alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, parts)]
            )[group]
            future.result(SINK_OFFSETS_TIMEOUT_S)
        except KafkaException as exc:
            if "NON_EMPTY_GROUP" in str(exc) or "UNKNOWN_MEMBER" in str(exc):
                raise ConflictError(
                    f"the consumer group {group} still has members; stop the connector first"
                ) from exc
            raise HerderError(f"could not alter the offsets of group {group}: {exc}") from exc

    def reset(self, group: str) -> None:
        from confluent_kafka import KafkaException

        try:
            self._client().delete_consumer_groups([group])[group].result(SINK_OFFSETS_TIMEOUT_S)
        except KafkaException as exc:
            text = str(exc)
            if "GROUP_ID_NOT_FOUND" in text:
                return
            if "NON_EMPTY_GROUP" in text:
                raise ConflictError(
                    f"the consumer group {group} still has members; stop the connector first"
                ) from exc
            raise HerderError(f"could not reset the offsets of group {group}: {exc}") from exc
