"""confluent-kafka-python's own ``test_list_offsets`` against Odradek: ListOffsets for the
earliest, the latest, the max-timestamp and a by-timestamp offset, under each isolation level.

Upstream: confluentinc/confluent-kafka-python, tests/integration/admin/test_list_offsets.py,
function ``test_list_offsets``. Read at v2.15.0; the module is ours, not a copy. A 1-partition,
1-replica topic gets three records with timestamps base+100, base+400 and base+200 (base =
1000000000 ms); then, with no options, READ_UNCOMMITTED, ``request_timeout=30`` and
READ_COMMITTED with ``request_timeout=30``, AdminClient.list_offsets answers 0 for earliest,
3 for latest, 1 for max_timestamp (the record with the largest timestamp, KIP-734) and 1 for
the first offset at or after base+150; the topic is deleted at the end.

One local cluster of ZooKeeper, a controller and one broker, as upstream's, shared with the
suite's other unchanged steps (conftest.py).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import IsolationLevel, SerializingProducer, TopicPartition
from confluent_kafka.admin import AdminClient, ListOffsetsResultInfo, NewTopic, OffsetSpec

pytestmark = pytest.mark.integration

WAIT_S = 30.0
BASE_TIMESTAMP_MS = 1000000000


@pytest.fixture(scope="module")
def bootstrap(one_broker_cluster) -> str:
    return one_broker_cluster.bootstrap_servers


def _offset(admin: AdminClient, partition: TopicPartition, spec: OffsetSpec, kwargs: dict) -> int:
    futures = admin.list_offsets({partition: spec}, **kwargs)
    assert list(futures) == [partition]
    result = futures[partition].result(timeout=WAIT_S)
    assert isinstance(result, ListOffsetsResultInfo)
    return result.offset


def test_list_offsets(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"test-topic-verify-list-offsets-{uuid.uuid1()}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=WAIT_S)

    producer = SerializingProducer({"bootstrap.servers": bootstrap})
    for value, later_ms in (("Message-1", 100), ("Message-2", 400), ("Message-3", 200)):
        producer.produce(topic, value, timestamp=BASE_TIMESTAMP_MS + later_ms)
    assert producer.flush(WAIT_S) == 0

    partition = TopicPartition(topic, 0)
    for kwargs in (
        {},
        {"isolation_level": IsolationLevel.READ_UNCOMMITTED},
        {"request_timeout": 30},
        {"isolation_level": IsolationLevel.READ_COMMITTED, "request_timeout": 30},
    ):
        assert _offset(admin, partition, OffsetSpec.earliest(), kwargs) == 0, kwargs
        assert _offset(admin, partition, OffsetSpec.latest(), kwargs) == 3, kwargs
        assert _offset(admin, partition, OffsetSpec.max_timestamp(), kwargs) == 1, kwargs
        at_150 = OffsetSpec.for_timestamp(BASE_TIMESTAMP_MS + 150)
        assert _offset(admin, partition, at_150, kwargs) == 1, kwargs

    for future in admin.delete_topics([topic]).values():
        future.result(timeout=WAIT_S)
