"""ACL znodes in Kafka's layout and bytes: /kafka-acl and /kafka-acl-extended/prefixed paths,
the AclEntry JSON (Kafka's names and casing), and both change notification formats."""

from __future__ import annotations

import pytest

from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.zk.errors import ZkDataError
from odradek.zk.paths import (
    ACL_PATHS,
    ResourceAcls,
    acl_change_path_prefix,
    acl_resource_path,
    decode_acl_change,
    encode_acl_change,
)


def test_paths_are_kafkas():
    assert (
        acl_resource_path(ResourcePattern(ResourceType.TOPIC, "orders"))
        == "/kafka-acl/Topic/orders"
    )
    assert (
        acl_resource_path(
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, "app-", PatternType.PREFIXED)
        )
        == "/kafka-acl-extended/prefixed/TransactionalId/app-"
    )
    assert acl_change_path_prefix(PatternType.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert (
        acl_change_path_prefix(PatternType.PREFIXED) == "/kafka-acl-extended-changes/acl_changes_"
    )
    assert "/kafka-acl/Cluster" in ACL_PATHS and "/kafka-acl-extended/prefixed/Group" in ACL_PATHS


@pytest.mark.parametrize("name", ["", "a/b", ".."])
def test_a_name_cannot_leave_its_directory(name):
    with pytest.raises(ValueError):
        acl_resource_path(ResourcePattern(ResourceType.TOPIC, name))


def test_acl_json_is_kafkas_and_reads_back():
    acls = ResourceAcls(
        frozenset(
            {
                AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
                AccessControlEntry(
                    "User:bob", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY
                ),
            }
        )
    )
    assert acls.encode() == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"},{"principal":"User:bob","permissionType":"Deny",'
        b'"operation":"IdempotentWrite","host":"10.0.0.1"}]}'
    )
    assert ResourceAcls.decode(acls.encode()) == acls


def test_acl_json_written_by_kafka_with_spaces_and_other_order():
    data = (
        b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny",'
        b'"operation": "DescribeConfigs","principal": "User:alice"}]}'
    )
    [entry] = ResourceAcls.decode(data).entries
    assert entry == AccessControlEntry(
        "User:alice", "host1", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY
    )


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":2,"acls":[]}',
        b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Any","host":"*"}]}',
    ],
)
def test_bad_acl_json_is_refused_naming_the_path(data):
    with pytest.raises(ZkDataError):
        ResourceAcls.decode(data, "/kafka-acl/Topic/t")


def test_change_notifications_as_kafka_writes_them():
    literal = ResourcePattern(ResourceType.TOPIC, "orders:eu")
    prefixed = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
    assert encode_acl_change(literal) == b"TOPIC:orders:eu"
    assert encode_acl_change(prefixed) == (
        b'{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}'
    )
    assert decode_acl_change(b"TOPIC:orders:eu", PatternType.LITERAL, "p") == literal
    assert decode_acl_change(b"Topic:orders:eu", PatternType.LITERAL, "p") == literal  # Kafka 2.x
    assert decode_acl_change(encode_acl_change(prefixed), PatternType.PREFIXED, "p") == prefixed
    with pytest.raises(ZkDataError):
        decode_acl_change(b"orders", PatternType.LITERAL, "p")
