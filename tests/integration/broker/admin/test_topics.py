"""CreateTopics, DeleteTopics and CreatePartitions from real clients: Kafka's znodes, or nothing.

kafka-python's ``KafkaAdminClient`` and confluent-kafka's ``AdminClient`` talk to a real broker
server whose ZooKeeper is real; after each call the test reads the znodes' JSON back. Refused
requests get their Kafka error code and leave ZooKeeper exactly as it was.
"""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta

import pytest
from kio.schema.delete_topics.v2.request import DeleteTopicsRequest as DeleteTopicsRequestV2

from .conftest import NO_WAIT, kafka_admin_client

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


@pytest.fixture
def broker(make_broker, zk):
    zk.fake_broker(2)
    zk.fake_broker(3)
    return make_broker(1, **{"num.partitions": "4", "default.replication.factor": "2"})


@pytest.fixture
def kafka_admin(broker):
    admin = kafka_admin_client(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield admin
    admin.close()


@pytest.fixture
def confluent_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def assignment_of(zk, topic):
    value = zk.json(f"/brokers/topics/{topic}")
    assert value["version"] == 3
    assert value["adding_replicas"] == {} and value["removing_replicas"] == {}
    assert len(value["topic_id"]) == 22
    return {int(p): replicas for p, replicas in value["partitions"].items()}


def errors_of(response, key="topics"):
    return {t["name"]: t["error_code"] for t in response[key]}


def test_kafka_python_creates_a_topic_with_configs(kafka_admin, zk):
    response = kafka_admin.create_topics(
        {
            "orders": {
                "num_partitions": 6,
                "replication_factor": 3,
                "configs": {"retention.ms": "86400000", "cleanup.policy": "compact,delete"},
            }
        }
    )
    [topic] = response["topics"]
    assert (topic["name"], topic["error_code"], topic["error_message"]) == ("orders", 0, None)
    assert (topic["num_partitions"], topic["replication_factor"]) == (6, 3)
    assert topic["configs"]["retention.ms"]["value"] == "86400000"
    assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

    assignment = assignment_of(zk, "orders")
    assert sorted(assignment) == list(range(6))
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # spread evenly
    assert zk.json("/config/topics/orders") == {
        "version": 1,
        "config": {"cleanup.policy": "compact,delete", "retention.ms": "86400000"},
    }
    assert uuid.UUID(str(topic["topic_id"])).int != 0


def test_minus_one_takes_the_brokers_defaults_and_an_empty_config_is_written(kafka_admin, zk):
    response = kafka_admin.create_topics(["plain"])
    assert errors_of(response) == {"plain": 0}
    assignment = assignment_of(zk, "plain")
    assert sorted(assignment) == [0, 1, 2, 3]  # num.partitions=4
    assert {len(r) for r in assignment.values()} == {2}  # default.replication.factor=2
    assert zk.json("/config/topics/plain") == {"version": 1, "config": {}}


def test_kafka_python_manual_assignment(kafka_admin, zk):
    kafka_admin.create_topics({"placed": {"assignments": {0: [2, 3], 1: [3, 1], 2: [1, 2]}}})
    assert assignment_of(zk, "placed") == {0: [2, 3], 1: [3, 1], 2: [1, 2]}


def test_refused_creations_write_nothing(kafka_admin, zk):
    kafka_admin.create_topics(["taken"])
    before = zk.snapshot()
    response = kafka_admin.create_topics(
        {
            "bad/name": {"num_partitions": 1, "replication_factor": 1},
            "x" * 250: {"num_partitions": 1, "replication_factor": 1},
            "bad-config": {"num_partitions": 1, "configs": {"retention.ms": "forever"}},
            "unknown-config": {"num_partitions": 1, "configs": {"retention.msec": "1"}},
            "too-many-replicas": {"num_partitions": 1, "replication_factor": 4},
            "no-partitions": {"num_partitions": 0, "replication_factor": 1},
            "taken": {"num_partitions": 1, "replication_factor": 1},
            "unknown-broker": {"assignments": {0: [1, 9]}},
            "uneven": {"assignments": {0: [1, 2], 1: [3]}},
        },
        raise_errors=False,
    )
    by_name = {t["name"]: t for t in response["topics"]}
    assert {name: t["error_code"] for name, t in by_name.items()} == {
        "bad/name": 17,  # INVALID_TOPIC_EXCEPTION
        "x" * 250: 17,
        "bad-config": 40,  # INVALID_CONFIG
        "unknown-config": 40,
        "too-many-replicas": 38,  # INVALID_REPLICATION_FACTOR
        "no-partitions": 37,  # INVALID_PARTITIONS
        "taken": 36,  # TOPIC_ALREADY_EXISTS
        "unknown-broker": 39,  # INVALID_REPLICA_ASSIGNMENT
        "uneven": 39,
    }
    assert by_name["bad-config"]["error_message"] == (
        "Invalid value forever for configuration retention.ms: Not a number of type LONG"
    )
    assert by_name["too-many-replicas"]["error_message"] == (
        "Replication factor: 4 larger than available brokers: 3."
    )
    assert by_name["taken"]["error_message"] == "Topic 'taken' already exists."
    assert all(t["num_partitions"] == -1 and not t.get("configs") for t in by_name.values())
    assert zk.snapshot() == before


def test_confluent_creates_with_config_and_validate_only(confluent_admin, zk):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    before = zk.snapshot()
    futures = confluent_admin.create_topics(
        [NewTopic("events", 3, 2, config={"segment.bytes": "1048576"})],
        validate_only=True,
        request_timeout=TIMEOUT_S,
    )
    assert futures["events"].result(TIMEOUT_S) is None
    assert zk.snapshot() == before

    futures = confluent_admin.create_topics(
        [NewTopic("events", 3, 2, config={"segment.bytes": "1048576"})],
        operation_timeout=NO_WAIT,
        request_timeout=TIMEOUT_S,
    )
    futures["events"].result(TIMEOUT_S)
    assert {len(r) for r in assignment_of(zk, "events").values()} == {2}
    assert zk.json("/config/topics/events")["config"] == {"segment.bytes": "1048576"}

    futures = confluent_admin.create_topics(
        [NewTopic("events", 3, 2), NewTopic("bad", 1, 1, config={"segment.bytes": "1"})],
        operation_timeout=NO_WAIT,
        request_timeout=TIMEOUT_S,
    )
    with pytest.raises(KafkaException) as exists:
        futures["events"].result(TIMEOUT_S)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as invalid:
        futures["bad"].result(TIMEOUT_S)
    assert invalid.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Value must be at least 14" in invalid.value.args[0].str()


def test_racks_spread_replicas(make_broker, zk):
    zk.fake_broker(2, rack="b")
    zk.fake_broker(3, rack="b")
    zk.fake_broker(4, rack="a")
    broker = make_broker(1, **{"broker.rack": "a"})

    admin = kafka_admin_client(bootstrap_servers=broker.bootstrap)
    try:
        broker.zk.delete("/brokers/ids/1")  # registered without a rack by the fixture
        admin.create_topics({"racked": {"num_partitions": 8, "replication_factor": 2}})
    finally:
        admin.close()
    racks = {2: "b", 3: "b", 4: "a"}
    for replicas in assignment_of(zk, "racked").values():
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_delete_topics_marks_them_for_the_controller(kafka_admin, confluent_admin, zk):
    kafka_admin.create_topics(["doomed", "also-doomed"])
    response = kafka_admin.delete_topics(["doomed", "missing", "bad/name"], raise_errors=False)
    assert errors_of(response) == {"doomed": 0, "missing": 3, "bad/name": 3}
    assert zk.kids("/admin/delete_topics") == ["doomed"]
    assert zk.get("/admin/delete_topics/doomed")[0] == b""
    # Asking again while the controller has not acted is not an error.
    assert errors_of(kafka_admin.delete_topics(["doomed"])) == {"doomed": 0}

    futures = confluent_admin.delete_topics(["also-doomed"], request_timeout=TIMEOUT_S)
    futures["also-doomed"].result(TIMEOUT_S)
    assert zk.kids("/admin/delete_topics") == ["also-doomed", "doomed"]
    assert "doomed" in zk.kids("/brokers/topics")  # the controller deletes, not the broker


def test_delete_a_topic_by_id(kafka_admin, zk):
    response = kafka_admin.create_topics(["by-id"])
    topic_id = uuid.UUID(str(response["topics"][0]["topic_id"]))
    stored = zk.json("/brokers/topics/by-id")["topic_id"]
    assert topic_id.bytes == uuid.UUID(bytes=_b64(stored)).bytes
    response = kafka_admin.delete_topics([topic_id, uuid.uuid4()], raise_errors=False)
    codes = {str(t["topic_id"]): (t["name"], t["error_code"]) for t in response["topics"]}
    assert codes[str(topic_id)] == ("by-id", 0)
    assert sorted(code for _, code in codes.values()) == [0, 100]  # UNKNOWN_TOPIC_ID
    assert zk.kids("/admin/delete_topics") == ["by-id"]


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def test_topic_deletion_disabled(make_broker, zk, raw_client):

    broker = make_broker(1, **{"delete.topic.enable": "false"})
    admin = kafka_admin_client(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics(["kept"])
        response = admin.delete_topics(["kept"], raise_errors=False)
    finally:
        admin.close()
    assert errors_of(response) == {"kept": 73}  # TOPIC_DELETION_DISABLED
    assert zk.kids("/admin/delete_topics") == []

    # Before v3 clients do not know TOPIC_DELETION_DISABLED: Kafka answers INVALID_REQUEST.
    old = raw_client(broker.bootstrap).send(
        DeleteTopicsRequestV2(topic_names=("kept",), timeout=timedelta(seconds=5))
    )
    assert [(r.name, r.error_code.value) for r in old.responses] == [("kept", 42)]


def test_kafka_python_adds_partitions(kafka_admin, zk):
    kafka_admin.create_topics({"growing": {"num_partitions": 3, "replication_factor": 2}})
    before = zk.json("/brokers/topics/growing")
    kafka_admin.create_partitions({"growing": 5})
    after = zk.json("/brokers/topics/growing")
    assert after["topic_id"] == before["topic_id"]
    assert sorted(after["partitions"]) == ["0", "1", "2", "3", "4"]
    assert {k: after["partitions"][k] for k in before["partitions"]} == before["partitions"]
    assert {len(r) for r in after["partitions"].values()} == {2}

    kafka_admin.create_partitions({"growing": {"count": 7, "assignments": [[3, 1], [1, 2]]}})
    assert zk.json("/brokers/topics/growing")["partitions"]["5"] == [3, 1]
    assert zk.json("/brokers/topics/growing")["partitions"]["6"] == [1, 2]


def test_refused_partition_changes_write_nothing(kafka_admin, zk):
    kafka_admin.create_topics({"fixed": {"num_partitions": 3, "replication_factor": 1}})
    kafka_admin.create_topics(["queued"])
    kafka_admin.delete_topics(["queued"])
    before = zk.json("/brokers/topics/fixed")
    response = kafka_admin.create_partitions(
        {
            "fixed": 2,
            "missing": 4,
            "queued": 9,
        },
        raise_errors=False,
    )
    results = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert results["fixed"] == (
        37,
        "Topic currently has 3 partitions, which is higher than the requested 2.",
    )
    assert results["missing"][0] == 3
    assert results["queued"] == (17, "The topic is queued for deletion.")
    response = kafka_admin.create_partitions(
        {"fixed": {"count": 4, "assignments": [[9]]}}, raise_errors=False
    )
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (39, "Unknown broker(s) in replica assignment: 9.")
    ]
    assert zk.json("/brokers/topics/fixed") == before


def test_confluent_adds_partitions_with_validate_only(confluent_admin, zk):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewPartitions, NewTopic

    created = confluent_admin.create_topics([NewTopic("wide", 2, 1)], operation_timeout=NO_WAIT)
    created["wide"].result(TIMEOUT_S)
    futures = confluent_admin.create_partitions(
        [NewPartitions("wide", 4)],
        validate_only=True,
        request_timeout=TIMEOUT_S,
    )
    futures["wide"].result(TIMEOUT_S)
    assert len(zk.json("/brokers/topics/wide")["partitions"]) == 2
    futures = confluent_admin.create_partitions([NewPartitions("wide", 4)])
    futures["wide"].result(TIMEOUT_S)
    assert len(zk.json("/brokers/topics/wide")["partitions"]) == 4
    futures = confluent_admin.create_partitions([NewPartitions("wide", 4)])
    with pytest.raises(KafkaException) as same:
        futures["wide"].result(TIMEOUT_S)
    assert same.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_two_brokers_creating_the_same_topic_only_one_wins(make_broker, zk):
    from concurrent.futures import ThreadPoolExecutor

    first, second = make_broker(1), make_broker(2)
    admins = [kafka_admin_client(bootstrap_servers=b.bootstrap) for b in (first, second)]
    try:
        names = [f"race-{i}" for i in range(10)]
        with ThreadPoolExecutor(2) as pool:
            responses = list(
                pool.map(lambda admin: admin.create_topics(names, raise_errors=False), admins)
            )
    finally:
        for admin in admins:
            admin.close()
    for name in names:
        codes = sorted(errors_of(r)[name] for r in responses)
        assert codes == [0, 36], name
    assert zk.kids("/brokers/topics") == sorted(names)


def test_min_insync_replicas_above_the_replication_factor(make_broker, zk):
    """Issue 21 items 7 and 14: an explicit value above the RF is INVALID_CONFIG naming both
    numbers (CreateTopics, AlterConfigs, IncrementalAlterConfigs) and writes nothing; a larger
    broker default is stored as the topic's own value, its RF, and DescribeConfigs shows it."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewTopic,
        ResourceType,
    )

    zk.fake_broker(2)
    zk.fake_broker(3)
    broker = make_broker(1, **{"min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def refusal(future):
        with pytest.raises(KafkaException) as refused:
            future.result(TIMEOUT_S)
        return refused.value.args[0].code(), refused.value.args[0].str()

    before = zk.snapshot()
    futures = admin.create_topics(
        [NewTopic("five-of-three", 1, 3, config={"min.insync.replicas": "5"})],
        operation_timeout=NO_WAIT,
        request_timeout=TIMEOUT_S,
    )
    code, message = refusal(futures["five-of-three"])
    assert code == KafkaError.INVALID_CONFIG
    assert "min.insync.replicas 5" in message and "replication factor 3" in message, message
    assert zk.snapshot() == before

    created = admin.create_topics(
        [NewTopic("single", 2, 1), NewTopic("triple", 1, 3)],
        operation_timeout=NO_WAIT,
        request_timeout=TIMEOUT_S,
    )
    for future in created.values():
        future.result(TIMEOUT_S)
    assert zk.json("/config/topics/single")["config"] == {"min.insync.replicas": "1"}
    assert zk.json("/config/topics/triple")["config"] == {}  # the default 2 fits

    def min_isr(topic):
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entries = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
        entry = entries["min.insync.replicas"]
        return entry.value, entry.source

    assert min_isr("single") == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    single = ConfigResource(ResourceType.TOPIC, "single", set_config={"min.insync.replicas": "2"})
    code, message = refusal(admin.alter_configs([single])[single])
    assert code == KafkaError.INVALID_CONFIG
    assert "min.insync.replicas 2" in message and "replication factor 1" in message, message
    incremental = ConfigResource(
        ResourceType.TOPIC,
        "single",
        incremental_configs=[
            ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    code, _ = refusal(admin.incremental_alter_configs([incremental])[incremental])
    assert code == KafkaError.INVALID_CONFIG
    assert zk.json("/config/topics/single")["config"] == {"min.insync.replicas": "1"}

    # Deleting the fitted value leaves the larger default, which is fitted again.
    deleted = ConfigResource(
        ResourceType.TOPIC,
        "single",
        incremental_configs=[
            ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    admin.incremental_alter_configs([deleted])[deleted].result(TIMEOUT_S)
    assert zk.json("/config/topics/single")["config"] == {"min.insync.replicas": "1"}
