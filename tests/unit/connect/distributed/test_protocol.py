"""The distributed workers' group protocol: member metadata and assignments round-trip through
their JSON encoding, and bytes that are not ours are refused with ``ProtocolError``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect.distributed.protocol import (
    PROTOCOL_NAME,
    PROTOCOL_TYPE,
    Assignment,
    MemberMetadata,
    ProtocolError,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from odradek.connect.herder import ConnectorTaskId

names = st.text(min_size=1, max_size=20)
tasks = st.lists(st.builds(ConnectorTaskId, names, st.integers(0, 1000)), max_size=10)


@given(st.builds(MemberMetadata, names, st.integers(-1, 2**62), st.lists(names), tasks))
def test_metadata_round_trips(metadata):
    assert decode_metadata(encode_metadata(metadata)) == metadata


@given(
    st.builds(
        Assignment,
        names,
        names,
        st.integers(-1, 2**62),
        st.lists(names),
        tasks,
        st.lists(names),
        tasks,
        st.integers(0, 2**31),
        st.integers(0, 1),
    )
)
def test_assignment_round_trips(assignment):
    assert decode_assignment(encode_assignment(assignment)) == assignment


def test_names_are_ours_under_kafkas_protocol_type():
    assert PROTOCOL_TYPE == "connect"
    assert PROTOCOL_NAME not in {"default", "compatible", "sessioned"}  # Java's names


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x01\x00\x00",  # Kafka's binary ConnectProtocol starts with a version short
        b"[]",
        b'{"version": 0, "url": "u", "config_offset": 1}',
        b'{"version": 1, "config_offset": 1}',
        b'{"version": 1, "url": "u", "config_offset": "1"}',
        b'{"version": 1, "url": "u", "config_offset": 1, "tasks": [["a"]]}',
        b'{"version": 1, "url": "u", "config_offset": 1, "tasks": [["a", -1]]}',
        b'{"version": 1, "url": "u", "config_offset": 1, "connectors": [1]}',
        b"\xff\xfe",
    ],
)
def test_bad_metadata_is_refused(data):
    with pytest.raises(ProtocolError):
        decode_metadata(data)


def test_bad_assignment_is_refused():
    good = json.loads(encode_assignment(Assignment("l", "u", 3)))
    for key, value in [("delay_ms", -1), ("leader", None), ("revoked_tasks", "x")]:
        with pytest.raises(ProtocolError):
            decode_assignment(json.dumps({**good, key: value}).encode())
    assert decode_assignment(json.dumps({**good, "future_field": 1}).encode()).config_offset == 3
