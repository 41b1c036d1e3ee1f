"""storage_format writes the internal topics' keys and values byte for byte as Kafka Connect does,
and reads back what Kafka writes."""

from __future__ import annotations

import pytest

from odradek.connect import storage_format as sf
from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState


def test_offset_key_is_kafkas_compact_json():
    assert sf.offset_key("conn", {"filename": "/x"}) == b'["conn",{"filename":"/x"}]'
    assert sf.parse_offset_key(b'["conn",{"filename":"/x"}]') == ("conn", {"filename": "/x"})


def test_offset_key_is_one_key_per_partition_whatever_the_dict_order():
    a = sf.offset_key("c", {"b": 1, "a": 2})
    assert a == sf.offset_key("c", {"a": 2, "b": 1}) == b'["c",{"a":2,"b":1}]'
    assert sf.partition_key({"b": 1, "a": 2}) == sf.partition_key({"a": 2, "b": 1})
    assert sf.partition_key({"t": {"x": 1, "y": [1]}}) == sf.partition_key(
        {"t": {"y": [1], "x": 1}}
    )


@pytest.mark.parametrize("bad", [b"{}", b'["c"]', b"[1,{}]", b"nope", b'["c",[]]'])
def test_parse_offset_key_refuses_other_shapes(bad):
    with pytest.raises(sf.FormatError):
        sf.parse_offset_key(bad)


def test_offset_value_and_reset():
    assert sf.offset_value({"position": 42}) == b'{"position":42}'
    assert sf.offset_value(None) is None
    assert sf.parse_offset_value(b'{"position":42}') == {"position": 42}
    assert sf.parse_offset_value(None) is None


def test_config_keys_and_values():
    assert sf.connector_config_key("a") == b"connector-a"
    assert sf.task_config_key("a-b", 3) == b"task-a-b-3"
    assert sf.commit_key("a") == b"commit-a"
    assert sf.target_state_key("a") == b"target-state-a"
    assert sf.properties_value({"k": "v"}) == b'{"properties":{"k":"v"}}'
    assert sf.commit_value(2) == b'{"tasks":2}'
    assert sf.target_state_value(TargetState.STOPPED) == b'{"state":"PAUSED","state.v2":"STOPPED"}'
    assert sf.target_state_value(TargetState.STARTED) == b'{"state":"STARTED","state.v2":"STARTED"}'


def test_parse_config_records():
    p = sf.parse_config_record
    assert p(b"connector-a", b'{"properties":{"k":"v"}}') == sf.ConnectorConfigRecord(
        "a", {"k": "v"}
    )
    assert p(b"connector-a", None) == sf.ConnectorConfigRecord("a", None)
    assert p(b"task-a-b-3", b'{"properties":{}}') == sf.TaskConfigRecord(
        ConnectorTaskId("a-b", 3), {}
    )
    assert p(b"commit-a", b'{"tasks":2}') == sf.CommitRecord("a", 2)
    assert p(b"target-state-a", b'{"state":"PAUSED"}') == sf.TargetStateRecord(
        "a", TargetState.PAUSED
    )
    assert p(b"target-state-a", b'{"state":"PAUSED","state.v2":"STOPPED"}') == (
        sf.TargetStateRecord("a", TargetState.STOPPED)
    )
    assert p(b"tasks-fencing-a", b'{"task-count":4}') == sf.TaskCountRecord("a", 4)
    assert p(b"restart-connector-a", b'{"include-tasks":true,"only-failed":false}') == (
        sf.RestartRecord("a", True, False)
    )
    assert p(b"session-key", b'{"key":"x"}') is None


@pytest.mark.parametrize(
    "key,value",
    [
        (b"task-a", b'{"properties":{}}'),
        (b"commit-a", b'{"tasks":"2"}'),
        (b"target-state-a", b'{"state":"RUNNING"}'),
        (b"connector-a", b"[]"),
        (b"connector-a", b"\xff"),
    ],
)
def test_parse_config_record_refuses_malformed_values(key, value):
    with pytest.raises(sf.FormatError):
        sf.parse_config_record(key, value)


def test_status_round_trip():
    entry = StatusEntry(State.RUNNING, "host:8083", None, 7)
    v = sf.status_value(entry)
    assert v == b'{"state":"RUNNING","trace":null,"worker_id":"host:8083","generation":7}'
    assert sf.parse_status_value(v) == entry
    assert sf.status_connector_key("a") == b"status-connector-a"
    assert sf.status_task_key("a-b", 0) == b"status-task-a-b-0"
    assert sf.parse_status_key(b"status-task-a-b-0") == sf.TaskStatusKey(ConnectorTaskId("a-b", 0))
    assert sf.parse_status_key(b"status-connector-a") == sf.ConnectorStatusKey("a")
    assert sf.parse_status_key(b"status-topic-t1:connector-a") == sf.TopicStatusKey("t1", "a")
    assert sf.parse_status_key(b"other") is None
