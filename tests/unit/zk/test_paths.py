"""Proves every znode format round-trips, reads Kafka's own JSON, and rejects bad data by path."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.common.limits import INT32_MAX, INT64_MAX
from odradek.common.partitions import TopicPartition
from odradek.zk.codec import random_topic_id
from odradek.zk.errors import ZkDataError
from odradek.zk.paths import (
    CONFIG_CHANGE_PREFIX,
    CONTROLLER_EPOCH_PATH,
    PERSISTENT_PATHS,
    BrokerInfo,
    ClusterId,
    ConfigChangeNotification,
    ControllerEpoch,
    ControllerInfo,
    Endpoint,
    EntityConfig,
    IsrChangeNotification,
    PartitionReassignment,
    PartitionState,
    ProducerIdBlock,
    SupportedFeature,
    TopicAssignment,
    broker_id_from_name,
    broker_path,
    config_change_path_prefix,
    delete_topic_path,
    entity_config_path,
    isr_change_path_prefix,
    partition_state_path,
    sequence_number,
    topic_config_path,
    topic_path,
)

FORMATS = (
    BrokerInfo,
    ClusterId,
    ConfigChangeNotification,
    ControllerEpoch,
    ControllerInfo,
    EntityConfig,
    IsrChangeNotification,
    PartitionReassignment,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
)

# --- strategies ------------------------------------------------------------------------------

ids = st.integers(0, INT32_MAX)
epochs = st.integers(0, INT32_MAX)
timestamps = st.integers(0, 2**62)
topics = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True).filter(
    lambda t: t not in {".", ".."}
)
hosts = st.sampled_from(
    ["127.0.0.1", "localhost", "::1", "fe80::1%eth0", "kafka-1.example.com", ""]
)
endpoints = st.builds(
    Endpoint,
    listener_name=st.from_regex(r"[A-Z][A-Z0-9_]{0,15}", fullmatch=True),
    host=hosts,
    port=st.integers(0, 65535),
    security_protocol=st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
)
features = st.builds(
    SupportedFeature,
    name=st.from_regex(r"[a-z][a-z.]{0,20}", fullmatch=True),
    min_version=st.integers(0, 100),
    max_version=st.integers(0, 100),
)
broker_infos = st.builds(
    BrokerInfo,
    endpoints=st.lists(endpoints, max_size=4, unique_by=lambda e: e.listener_name).map(tuple),
    rack=st.none() | st.text(max_size=20),
    jmx_port=st.integers(-1, 65535),
    timestamp_ms=timestamps,
    features=st.lists(features, max_size=3, unique_by=lambda f: f.name).map(tuple),
)
replica_maps = st.dictionaries(st.integers(0, 1000), st.lists(ids, max_size=5), max_size=8)
# Bytes whose id would start with '-' are redrawn by random_topic_id: never offer those.
topic_ids = st.none() | st.binary(min_size=16, max_size=16).filter(lambda raw: raw[0] < 0xF8).map(
    lambda raw: random_topic_id(lambda _n: raw)
)
assignments = st.builds(
    TopicAssignment,
    partitions=replica_maps,
    topic_id=topic_ids,
    adding_replicas=replica_maps,
    removing_replicas=replica_maps,
)
partition_states = st.builds(
    PartitionState,
    leader=st.integers(-1, INT32_MAX),
    leader_epoch=epochs,
    isr=st.lists(ids, max_size=5).map(tuple),
    controller_epoch=epochs,
    leader_recovery_state=st.sampled_from([0, 1]),
)
topic_partitions = st.builds(TopicPartition, topics, st.integers(0, 10_000))
producer_blocks = st.tuples(ids, st.integers(0, INT64_MAX), st.integers(0, INT64_MAX)).map(
    lambda t: ProducerIdBlock(t[0], min(t[1], t[2]), max(t[1], t[2]))
)
values = st.one_of(
    broker_infos,
    assignments,
    partition_states,
    st.builds(ClusterId, st.text(max_size=30)),
    st.builds(ControllerInfo, ids, timestamps),
    st.builds(ControllerEpoch, epochs),
    st.builds(EntityConfig, st.dictionaries(st.text(max_size=20), st.text(max_size=20))),
    st.builds(ConfigChangeNotification, st.text(min_size=1, max_size=40)),
    st.builds(PartitionReassignment, st.dictionaries(topic_partitions, st.lists(ids, max_size=4))),
    st.builds(IsrChangeNotification, st.lists(topic_partitions, max_size=6)),
    producer_blocks,
)


# --- round trips -----------------------------------------------------------------------------


@given(values)
def test_every_format_round_trips(value) -> None:
    assert type(value).decode(value.encode(), "/test") == value


@given(st.binary(max_size=200), st.sampled_from(FORMATS))
def test_arbitrary_bytes_decode_or_raise_zk_data_error(data: bytes, fmt: type) -> None:
    try:
        fmt.decode(data, "/fuzz")
    except ZkDataError as exc:
        assert exc.path == "/fuzz"


@given(broker_infos)
def test_broker_info_json_has_kafkas_v5_fields(info: BrokerInfo) -> None:
    value = json.loads(info.encode())
    assert value["version"] == 5
    assert value["endpoints"] == [e.connection_string() for e in info.endpoints]
    assert set(value["listener_security_protocol_map"]) == {e.listener_name for e in info.endpoints}
    assert ("rack" in value) == (info.rack is not None)
    assert value["timestamp"] == str(info.timestamp_ms)


# --- Kafka's own bytes -----------------------------------------------------------------------
# Samples as Kafka brokers wrote them (zkCli output quoted in Kafka's docs, its ZkData.scala
# comments and operators' write-ups), byte for byte.


def test_decodes_broker_registrations_of_every_version() -> None:
    v4 = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"localhost","version":4,"timestamp":"1603608218902"}'
    )
    assert BrokerInfo.decode(v4, "/brokers/ids/0") == BrokerInfo(
        (Endpoint("PLAINTEXT", "localhost", 9092),), timestamp_ms=1603608218902
    )
    v5 = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
        b'"PLAINTEXT_HOST":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka:9092",'
        b'"PLAINTEXT_HOST://localhost:29092"],"jmx_port":-1,"port":9092,"host":"kafka",'
        b'"version":5,"timestamp":"1736198272985"}'
    )
    assert BrokerInfo.decode(v5).endpoints == (
        Endpoint("PLAINTEXT", "kafka", 9092),
        Endpoint("PLAINTEXT_HOST", "localhost", 29092),
    )
    v5_features = (
        b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,'
        b'"timestamp":"2233345666","endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],'
        b'"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"SSL"},'
        b'"rack":"dc1","features":{"feature":{"min_version":1,"first_active_version":2,'
        b'"max_version":3}}}'
    )
    decoded = BrokerInfo.decode(v5_features)
    assert decoded.rack == "dc1" and decoded.jmx_port == 9999
    assert decoded.features == (SupportedFeature("feature", 1, 3),)
    assert decoded.endpoints[1] == Endpoint("REPLICATION", "host1", 9093, "SSL")
    v3 = (
        b'{"jmx_port":-1,"timestamp":"1490926370304","endpoints":["PLAINTEXT://s202:9092"],'
        b'"host":"s202","version":3,"port":9092}'
    )
    assert BrokerInfo.decode(v3).endpoints == (Endpoint("PLAINTEXT", "s202", 9092),)
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert BrokerInfo.decode(v1).endpoints == (Endpoint("PLAINTEXT", "localhost", 9092),)


def test_encodes_brokers_like_kafka_including_ipv6() -> None:
    info = BrokerInfo(
        (Endpoint("INTERNAL", "::1", 9093, "SSL"), Endpoint("PLAINTEXT", "127.0.0.1", 9092)),
        timestamp_ms=1,
    )
    value = json.loads(info.encode())
    assert value["endpoints"] == ["INTERNAL://[::1]:9093", "PLAINTEXT://127.0.0.1:9092"]
    assert (value["host"], value["port"]) == ("127.0.0.1", 9092)  # the first PLAINTEXT one
    assert BrokerInfo.decode(info.encode()) == info
    no_plaintext = json.loads(BrokerInfo((Endpoint("SSL", "h", 1, "SSL"),)).encode())
    assert (no_plaintext["host"], no_plaintext["port"]) == (None, -1)


def test_decodes_topic_assignments() -> None:
    v2 = (
        b'{"version":2,"partitions":{"2":[3,2],"1":[2,1],"0":[1,3],"3":[1,2]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    decoded = TopicAssignment.decode(v2, "/brokers/topics/topic-create")
    assert dict(decoded.partitions) == {0: (1, 3), 1: (2, 1), 2: (3, 2), 3: (1, 2)}
    assert decoded.topic_id is None
    v3 = (
        b'{"partitions":{"0":[2,3,1],"1":[3,1,2],"2":[1,2,3]},"topic_id":"cMr3GpVESX2L3byPGf93lQ",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert TopicAssignment.decode(v3).topic_id == "cMr3GpVESX2L3byPGf93lQ"
    assert TopicAssignment.decode(b'{"version":1,"partitions":{"0":[0]}}').partitions == {0: (0,)}
    moving = TopicAssignment.decode(
        b'{"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},'
        b'"removing_replicas":{"0":[1]}}'
    )
    assert (moving.adding_replicas, moving.removing_replicas) == ({0: (3,)}, {0: (1,)})


def test_encodes_topic_assignments_as_version_2_or_3() -> None:
    assert TopicAssignment({0: [1, 3], 1: [2, 1]}).encode() == (
        b'{"version":2,"partitions":{"0":[1,3],"1":[2,1]},"adding_replicas":{},'
        b'"removing_replicas":{}}'
    )
    with_id = json.loads(TopicAssignment({0: [1]}, topic_id="5Yu9oFhVRI6IUtNYNxoJ8w").encode())
    assert with_id["version"] == 3 and with_id["topic_id"] == "5Yu9oFhVRI6IUtNYNxoJ8w"


def test_partition_state_reads_and_writes_kafkas_bytes() -> None:
    sample = b'{"controller_epoch":6,"leader":0,"version":1,"leader_epoch":4,"isr":[0]}'
    state = PartitionState.decode(sample, partition_state_path("t", 0))
    assert state == PartitionState(leader=0, leader_epoch=4, isr=(0,), controller_epoch=6)
    assert state.encode() == sample
    recovering = PartitionState(1, 2, (1,), 3, leader_recovery_state=1)
    assert json.loads(recovering.encode())["leader_recovery_state"] == 1
    no_leader = b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":3,"isr":[]}'
    assert PartitionState.decode(no_leader).leader == -1


def test_controller_znodes() -> None:
    sample = b'{"version":1,"brokerid":0,"timestamp":"1603608219071"}'
    assert ControllerInfo.decode(sample) == ControllerInfo(0, 1603608219071)
    assert ControllerInfo(0, 1603608219071).encode() == sample
    kraft_migration = (
        b'{"version":2,"brokerid":102,"timestamp":"1707278204217","kraftControllerEpoch":-1}'
    )
    assert ControllerInfo.decode(kraft_migration).controller_id == 102
    assert ControllerInfo.decode(sample).endpoint is None  # Kafka's, or an older controller's


def test_the_controller_znode_publishes_the_controllers_listener() -> None:
    info = ControllerInfo(1000, 1603608219071, "127.0.0.1", 9093)
    encoded = info.encode()
    assert json.loads(encoded) == {
        "version": 1,
        "brokerid": 1000,
        "timestamp": "1603608219071",
        "host": "127.0.0.1",
        "port": 9093,
    }
    assert ControllerInfo.decode(encoded) == info and info.endpoint == ("127.0.0.1", 9093)
    with pytest.raises(ZkDataError, match="port"):
        ControllerInfo.decode(b'{"version":1,"brokerid":0,"host":"h"}')
    with pytest.raises(ZkDataError, match="port"):
        ControllerInfo.decode(b'{"version":1,"brokerid":0,"host":"h","port":70000}')
    assert ControllerEpoch.decode(b"1") == ControllerEpoch(1)
    assert ControllerEpoch(42).encode() == b"42"


def test_small_formats_read_kafkas_bytes() -> None:
    assert ClusterId.decode(b'{"version":"1","id":"6R1tZgwmT7KVZ0RRHmo0xA"}').id == (
        "6R1tZgwmT7KVZ0RRHmo0xA"
    )
    assert ClusterId("abc").encode() == b'{"version":"1","id":"abc"}'
    config = EntityConfig.decode(b'{"version":1,"config":{"flush.messages":"12345"}}')
    assert config.config == {"flush.messages": "12345"}
    assert ConfigChangeNotification.decode(b'{"version":2,"entity_path":"topics/t1"}') == (
        ConfigChangeNotification.for_entity("topics", "t1")
    )
    v1_change = b'{"version":1,"entity_type":"topics","entity_name":"t1"}'
    assert ConfigChangeNotification.decode(v1_change).entity_path == "topics/t1"
    isr = IsrChangeNotification.decode(
        b'{"version":1,"partitions":[{"topic":"my-topic","partition":0}]}'
    )
    assert isr.partitions == (TopicPartition("my-topic", 0),)
    reassignment = PartitionReassignment.decode(
        b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}]}'
    )
    assert reassignment.partitions == {TopicPartition("foo", 1): (1, 2, 3)}
    block = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    assert ProducerIdBlock.decode(block) == ProducerIdBlock(0, 0, 999)
    assert ProducerIdBlock(0, 0, 999).encode() == block


# --- malformed data --------------------------------------------------------------------------

MALFORMED = [
    (BrokerInfo, b""),
    (BrokerInfo, b"\xff\xfe"),
    (BrokerInfo, b"[1,2]"),
    (BrokerInfo, b'{"version":6,"endpoints":[],"jmx_port":-1}'),
    (BrokerInfo, b'{"version":5,"endpoints":["PLAINTEXT:/h:1"],"jmx_port":-1}'),
    (BrokerInfo, b'{"version":5,"endpoints":["PLAINTEXT://h:99999"],"jmx_port":-1}'),
    (BrokerInfo, b'{"version":5,"endpoints":["CLIENT://h:1"],"jmx_port":-1}'),
    (
        BrokerInfo,
        b'{"version":5,"endpoints":["A://h:1"],"listener_security_protocol_map":{"A":"TLS"}}',
    ),
    (BrokerInfo, b'{"version":5,"endpoints":["PLAINTEXT://h:1","PLAINTEXT://h:2"]}'),
    (BrokerInfo, b'{"version":5,"endpoints":"PLAINTEXT://h:1"}'),
    (BrokerInfo, b'{"version":5,"endpoints":[],"jmx_port":true}'),
    (BrokerInfo, b'{"version":5,"endpoints":[],"timestamp":1603608218902}'),
    (TopicAssignment, b'{"version":2}'),
    (TopicAssignment, b'{"version":2,"partitions":{"x":[1]}}'),
    (TopicAssignment, b'{"version":2,"partitions":{"0":[-1]}}'),
    (TopicAssignment, b'{"version":2,"partitions":{"0":"1,2"}}'),
    (TopicAssignment, b'{"version":3,"partitions":{},"topic_id":"not-a-uuid"}'),
    (TopicAssignment, b'{"version":4,"partitions":{}}'),
    (PartitionState, b'{"controller_epoch":6,"leader":0,"version":1,"isr":[0]}'),
    (PartitionState, b'{"controller_epoch":"6","leader":0,"leader_epoch":1,"isr":[0]}'),
    (PartitionState, b'{"controller_epoch":6,"leader":0,"leader_epoch":1,"isr":[0.5]}'),
    (PartitionState, b'{"controller_epoch":6,"leader":-2,"leader_epoch":1,"isr":[]}'),
    (PartitionState, b'{"controller_epoch":6,"leader":0,"leader_epoch":2147483648,"isr":[]}'),
    (ControllerInfo, b'{"version":1,"timestamp":"1"}'),
    (ControllerInfo, b'{"version":1,"brokerid":"1","timestamp":"1"}'),
    (ControllerInfo, b'{"version":1,"brokerid":1,"timestamp":"soon"}'),
    (ControllerEpoch, b""),
    (ControllerEpoch, b"-1"),
    (ControllerEpoch, b"1.5"),
    (ControllerEpoch, b" 1"),
    (ControllerEpoch, b"2147483648"),
    (ControllerEpoch, "\u0661".encode()),  # an Arabic-Indic one: int() would take it
    (ClusterId, b'{"version":"2","id":"x"}'),
    (ClusterId, b'{"version":"1"}'),
    (EntityConfig, b'{"version":1,"config":{"retention.ms":86400000}}'),
    (ConfigChangeNotification, b'{"version":2}'),
    (IsrChangeNotification, b'{"version":1,"partitions":[{"topic":"a/b","partition":0}]}'),
    (IsrChangeNotification, b'{"version":1,"partitions":[0]}'),
    (PartitionReassignment, b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'),
    (ProducerIdBlock, b'{"version":1,"broker":0,"block_start":"10","block_end":"9"}'),
    (ProducerIdBlock, b'{"version":1,"broker":0,"block_start":0,"block_end":"9"}'),
]


@pytest.mark.parametrize(("fmt", "data"), MALFORMED)
def test_malformed_data_raises_zk_data_error_naming_the_path(fmt: type, data: bytes) -> None:
    with pytest.raises(ZkDataError) as raised:
        fmt.decode(data, "/some/znode")
    assert raised.value.path == "/some/znode"
    assert str(raised.value).startswith("/some/znode: ")


def test_decode_defaults_to_the_formats_own_path() -> None:
    with pytest.raises(ZkDataError) as raised:
        ControllerEpoch.decode(b"x")
    assert raised.value.path == CONTROLLER_EPOCH_PATH


# --- paths -----------------------------------------------------------------------------------


def test_path_builders_follow_kafkas_layout() -> None:
    assert broker_path(3) == "/brokers/ids/3"
    assert topic_path("orders") == "/brokers/topics/orders"
    assert partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert topic_config_path("orders") == "/config/topics/orders"
    assert entity_config_path("brokers", "<default>") == "/config/brokers/<default>"
    assert delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert config_change_path_prefix() == "/config/changes/config_change_"
    assert isr_change_path_prefix() == "/isr_change_notification/isr_change_"
    assert "/brokers/ids" in PERSISTENT_PATHS and "/config/topics" in PERSISTENT_PATHS


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a b", "x" * 250, "ü"])
def test_illegal_topic_names_never_become_paths(topic: str) -> None:
    with pytest.raises(ValueError):
        topic_path(topic)


@pytest.mark.parametrize("broker_id", [-1, 2**31, True, "1"])
def test_illegal_ids_never_become_paths(broker_id) -> None:
    with pytest.raises(ValueError):
        broker_path(broker_id)


def test_sequence_numbers_and_broker_ids_parse_strictly() -> None:
    assert sequence_number("config_change_0000000007", CONFIG_CHANGE_PREFIX) == 7
    assert sequence_number("/config/changes/config_change_0000000012", CONFIG_CHANGE_PREFIX) == 12
    assert broker_id_from_name("12") == 12
    for name in ("config_change_7", "isr_change_0000000001", "config_change_00000000x1"):
        with pytest.raises(ZkDataError):
            sequence_number(name, CONFIG_CHANGE_PREFIX)
    for name in ("012", "-1", "x", ""):
        with pytest.raises(ZkDataError):
            broker_id_from_name(name)


def test_random_topic_ids_look_like_kafkas() -> None:
    topic_id = random_topic_id()
    assert len(topic_id) == 22 and not topic_id.startswith("-")
    assert TopicAssignment({0: [1]}, topic_id=topic_id).topic_id == topic_id
    draws = iter([b"\xf8" + bytes(15), b"\x01" * 16])  # the first would start with '-'
    assert random_topic_id(lambda _n: next(draws)) == random_topic_id(lambda _n: b"\x01" * 16)
