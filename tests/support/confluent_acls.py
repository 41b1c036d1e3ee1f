"""confluent-kafka-python's ACL sequence (its tests/common ``verify_admin_acls``, which its
``test_basic_operations`` ends with), reproduced in our words for the tests that run it against
Odradek: security/test_acl_apis.py on its own, compat/confluent_suite/test_basic_operations.py
at the end of the whole upstream test.

Three bindings are created (READ allowed on a literal topic, WRITE denied on a prefixed topic,
ALL allowed on a prefixed group), described back with an any-filter, the two PREFIXED ones
deleted by a prefixed filter, then the rest by a TOPIC and a GROUP filter in one request (one
binding, then none), and nothing is left. Upstream sleeps a second between the steps for ACLs to
spread; Odradek's DescribeAcls reads what CreateAcls and DeleteAcls wrote, so none is needed.
"""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

__all__ = ["any_filter", "verify_admin_acls"]


def any_filter(
    resource_type: ResourceType = ResourceType.ANY,
    pattern_type: ResourcePatternType = ResourcePatternType.ANY,
) -> AclBindingFilter:
    """Every binding of ``resource_type`` and ``pattern_type``, any principal, host, operation."""
    return AclBindingFilter(
        resource_type, None, pattern_type, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def verify_admin_acls(admin: AdminClient, topic: str, group: str, timeout_s: float) -> None:
    """The sequence of the module docstring; an AssertionError names the step that differs."""
    read_1 = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:test-user-1",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    deny_2 = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.PREFIXED,
        "User:test-user-2",
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    all_2 = AclBinding(
        ResourceType.GROUP,
        group,
        ResourcePatternType.PREFIXED,
        "User:test-user-2",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([read_1, deny_2, all_2]).values():
        future.result(timeout=timeout_s)

    everything = any_filter()
    described = admin.describe_acls(everything).result(timeout=timeout_s)
    assert sorted(described) == sorted([read_1, deny_2, all_2]), ("described", described)
    prefixed = any_filter(pattern_type=ResourcePatternType.PREFIXED)
    described = admin.describe_acls(prefixed).result(timeout=timeout_s)
    assert sorted(described) == sorted([deny_2, all_2]), ("described prefixed", described)

    deleted = admin.delete_acls([prefixed])[prefixed].result(timeout=timeout_s)
    assert sorted(deleted) == sorted([deny_2, all_2]), ("deleted prefixed", deleted)

    topics, groups = any_filter(ResourceType.TOPIC), any_filter(ResourceType.GROUP)
    futures = admin.delete_acls([topics, groups])
    deleted = futures[topics].result(timeout=timeout_s)
    assert deleted == [read_1], ("deleted by the TOPIC filter", deleted)
    deleted = futures[groups].result(timeout=timeout_s)
    assert deleted == [], ("deleted by the GROUP filter", deleted)
    left = admin.describe_acls(everything).result(timeout=timeout_s)
    assert left == [], ("left", left)
