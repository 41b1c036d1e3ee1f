"""A sink connector's KIP-875 offsets over a fake AdminClient: Kafka's shapes both ways, bad
entries refused naming the field, an unknown group read as no offsets and reset as done, a group
with members a 409."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from odradek.connect.herder import BadRequestError, ConflictError, HerderError
from odradek.connect.sink_offsets import SinkOffsets, parse_sink_offsets, sink_group_id


def done(value=None, error: int | None = None) -> Future:
    future: Future = Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(error)))
    return future


class FakeAdmin:
    def __init__(self) -> None:
        self.committed: dict[str, list[TopicPartition]] = {}
        self.error: int | None = None

    def list_consumer_group_offsets(self, requests):
        group = requests[0].group_id
        found = ConsumerGroupTopicPartitions(group, self.committed.get(group, []))
        return {group: done(found, self.error)}

    def alter_consumer_group_offsets(self, requests):
        request = requests[0]
        if self.error is None:
            self.committed[request.group_id] = list(request.topic_partitions)
        return {request.group_id: done(None, self.error)}

    def delete_consumer_groups(self, groups):
        if self.error is None:
            self.committed.pop(groups[0], None)
        return {groups[0]: done(None, self.error)}


def make() -> tuple[SinkOffsets, FakeAdmin]:
    admin = FakeAdmin()
    return SinkOffsets({}, admin_factory=lambda config: admin), admin


def test_group_id_is_connect_name_unless_overridden() -> None:
    assert sink_group_id("s", {}) == "connect-s"
    assert sink_group_id("s", {"consumer.override.group.id": "g"}) == "g"


def test_alter_then_get_in_kip875_shape_and_reset() -> None:
    offsets, admin = make()
    offsets.alter("connect-s", [("t", 1, 7), ("t", 0, 3)])
    admin.committed["connect-s"].append(TopicPartition("t", 2, -1001))  # no commit: left out
    assert offsets.get("connect-s") == [
        {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 3}},
        {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 7}},
    ]
    offsets.reset("connect-s")
    assert offsets.get("connect-s") == []


def test_unknown_group_reads_empty_and_resets_fine_members_are_409() -> None:
    offsets, admin = make()
    admin.error = KafkaError.GROUP_ID_NOT_FOUND
    assert offsets.get("connect-s") == []
    offsets.reset("connect-s")
    admin.error = KafkaError.NON_EMPTY_GROUP
    with pytest.raises(ConflictError, match="still has members"):
        offsets.reset("connect-s")
    admin.error = KafkaError.UNKNOWN_MEMBER_ID
    with pytest.raises(ConflictError):
        offsets.alter("connect-s", [("t", 0, 1)])
    admin.error = KafkaError.COORDINATOR_NOT_AVAILABLE
    with pytest.raises(HerderError, match="could not read"):
        offsets.get("connect-s")


def test_null_partition_offsets_are_refused_with_the_way_out() -> None:
    offsets, _ = make()
    with pytest.raises(BadRequestError, match="DELETE /connectors"):
        offsets.alter("connect-s", [("t", 0, None)])


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"partition": {"kafka_partition": 0}, "offset": None}, "kafka_topic"),
        (
            {"partition": {"kafka_topic": "t", "kafka_partition": -1}, "offset": None},
            "kafka_partition",
        ),
        (
            {"partition": {"kafka_topic": "t", "kafka_partition": True}, "offset": None},
            "kafka_partition",
        ),
        (
            {
                "partition": {"kafka_topic": "t", "kafka_partition": 0},
                "offset": {"kafka_offset": "1"},
            },
            "kafka_offset",
        ),
        ({"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {}}, "kafka_offset"),
    ],
)
def test_bad_sink_entries_name_the_field(entry, field) -> None:
    with pytest.raises(BadRequestError, match=rf"offsets\[0\]\.\w+\.{field}"):
        parse_sink_offsets([entry])
