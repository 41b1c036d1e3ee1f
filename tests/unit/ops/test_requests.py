"""The requests odradek.ops sends are valid kio messages at every version it may pick: they
encode, and the protocol layer decodes them back to the same fields (null replicas = cancel)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from odradek.client.admin import (
    ALTER_PARTITION_REASSIGNMENTS,
    DESCRIBE_LOG_DIRS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    METADATA,
    build,
    parse_bootstrap,
)
from odradek.ops.reassign import reassignments_request
from odradek.ops.throttles import OP_DELETE, OP_SET, RESOURCE_BROKER, alter_configs_request
from odradek.protocol import schemas
from odradek.protocol.codec import decode_request, encode_request

EVERYTHING = {k: (min(schemas.known_versions(k)), max(schemas.known_versions(k))) for k in (
    METADATA, DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS, ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
)}  # fmt: skip


def round_trip(request):
    frame = encode_request(request, 7, "odradek-ops")
    return decode_request(frame, EVERYTHING).body


@pytest.mark.parametrize("version", [0])
def test_alter_partition_reassignments(version):
    request_type = schemas.request_schema(ALTER_PARTITION_REASSIGNMENTS, version)
    by_topic = {"t": [(0, (4, 5, 6)), (3, None)]}
    request = reassignments_request(request_type, by_topic, timedelta(seconds=30))
    decoded = round_trip(request)
    assert decoded == request
    partitions = decoded.topics[0].partitions
    assert [(p.partition_index, p.replicas) for p in partitions] == [(0, (4, 5, 6)), (3, None)]
    assert decoded.timeout == timedelta(seconds=30)


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs(version):
    request_type = schemas.request_schema(INCREMENTAL_ALTER_CONFIGS, version)
    configs = [("leader.replication.throttled.rate", OP_SET, "100"), ("x", OP_DELETE, None)]
    request = alter_configs_request(request_type, [(RESOURCE_BROKER, "4", configs)])
    assert round_trip(request) == request


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs_all(version):
    request = build(schemas.request_schema(DESCRIBE_LOG_DIRS, version), topics=None)
    assert round_trip(request).topics is None


@pytest.mark.parametrize("version", range(1, 13))
def test_metadata_all_topics_never_creates(version):
    request = build(
        schemas.request_schema(METADATA, version),
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    decoded = round_trip(request)
    assert decoded.topics is None
    assert getattr(decoded, "allow_auto_topic_creation", False) is False


def test_list_partition_reassignments_all():
    request_type = schemas.request_schema(LIST_PARTITION_REASSIGNMENTS, 0)
    request = build(request_type, timeout=timedelta(seconds=5), topics=None)
    assert round_trip(request).topics is None


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]
    for bad in ("a", "a:b", ":1", "a:0", "a:70000"):
        with pytest.raises(ValueError, match="not HOST:PORT"):
            parse_bootstrap(bad)
