"""CreateAcls, DescribeAcls and DeleteAcls handlers: SECURITY_DISABLED without an authorizer,
CLUSTER_AUTHORIZATION_FAILED without ALTER/DESCRIBE on the Cluster, INVALID_REQUEST for a bad
binding or filter, and results in the shape Kafka answers (kio's v1-v3 classes)."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.create_acls.v3 import request as create_v3
from kio.schema.delete_acls.v3 import request as delete_v3
from kio.schema.describe_acls.v1 import request as describe_v1
from kio.schema.describe_acls.v3 import request as describe_v3
from kio.static.primitive import i8

from odradek.broker.context import BrokerContext, RequestContext
from odradek.broker.handlers import create_acls, delete_acls, describe_acls
from odradek.errors import ErrorCode
from odradek.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.acl_authorizer import AclAuthorizer
from odradek.security.principal import KafkaPrincipal
from support.acl_memory_store import MemoryAclStore

ALICE = KafkaPrincipal.user("alice")


def ctx(authorizer=None, principal=ALICE) -> RequestContext:
    broker = BrokerContext(1, replica_manager=None, metadata=None, authorizer=authorizer)  # type: ignore[arg-type]
    return RequestContext(
        header=None,  # type: ignore[arg-type]
        broker=broker,
        listener=None,  # type: ignore[arg-type]
        served_versions={},
        client_host="/127.0.0.1",
        principal=principal,
    )


def creation(**changes):
    values = dict(
        resource_type=i8(ResourceType.TOPIC),
        resource_name="orders",
        resource_pattern_type=i8(PatternType.LITERAL),
        principal="User:bob",
        host="*",
        operation=i8(AclOperation.READ),
        permission_type=i8(AclPermissionType.ALLOW),
    )
    values.update(changes)
    return create_v3.AclCreation(**values)


def any_filter(cls=delete_v3.DeleteAclsFilter, **changes):
    values = dict(
        resource_type_filter=i8(ResourceType.ANY),
        resource_name_filter=None,
        pattern_type_filter=i8(PatternType.ANY),
        principal_filter=None,
        host_filter=None,
        operation=i8(AclOperation.ANY),
        permission_type=i8(AclPermissionType.ANY),
    )
    values.update(changes)
    return cls(**values)


def run(coro):
    return asyncio.run(coro)


def test_without_an_authorizer_every_api_answers_security_disabled():
    create = run(create_acls.handle(ctx(), create_v3.CreateAclsRequest(creations=(creation(),))))
    assert [r.error_code for r in create.results] == [ErrorCode.security_disabled]
    describe = run(describe_acls.handle(ctx(), any_filter(describe_v3.DescribeAclsRequest)))
    assert describe.error_code == ErrorCode.security_disabled
    delete = run(delete_acls.handle(ctx(), delete_v3.DeleteAclsRequest(filters=(any_filter(),))))
    assert [r.error_code for r in delete.filter_results] == [ErrorCode.security_disabled]


def test_without_cluster_permissions_every_api_answers_cluster_authorization_failed():
    auth = AclAuthorizer(MemoryAclStore())  # no ACLs, allow.everyone.if.no.acl.found false
    create = run(
        create_acls.handle(ctx(auth), create_v3.CreateAclsRequest(creations=(creation(),) * 2))
    )
    assert [r.error_code for r in create.results] == [ErrorCode.cluster_authorization_failed] * 2
    describe = run(describe_acls.handle(ctx(auth), any_filter(describe_v3.DescribeAclsRequest)))
    assert describe.error_code == ErrorCode.cluster_authorization_failed
    delete = run(
        delete_acls.handle(ctx(auth), delete_v3.DeleteAclsRequest(filters=(any_filter(),)))
    )
    assert delete.filter_results[0].error_code == ErrorCode.cluster_authorization_failed
    assert auth.store.acls == {}


def test_describe_on_the_cluster_allows_describe_but_not_create():
    auth = AclAuthorizer(MemoryAclStore())
    auth.apply(
        ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
        frozenset(
            {AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)}
        ),
    )
    describe = run(describe_acls.handle(ctx(auth), any_filter(describe_v3.DescribeAclsRequest)))
    assert describe.error_code == ErrorCode.none
    [resource] = describe.resources
    assert (resource.resource_type, resource.resource_name) == (ResourceType.CLUSTER, CLUSTER_NAME)
    create = run(
        create_acls.handle(ctx(auth), create_v3.CreateAclsRequest(creations=(creation(),)))
    )
    assert create.results[0].error_code == ErrorCode.cluster_authorization_failed


@pytest.fixture
def admin_auth():
    return AclAuthorizer(MemoryAclStore(), super_users=[KafkaPrincipal.user("alice")])


def test_create_answers_each_binding(admin_auth):
    request = create_v3.CreateAclsRequest(
        creations=(
            creation(),
            creation(principal="bob"),
            creation(resource_pattern_type=i8(PatternType.MATCH)),
            creation(operation=i8(99)),  # a code Kafka does not know: UNKNOWN
        )
    )
    response = run(create_acls.handle(ctx(admin_auth), request))
    assert [r.error_code for r in response.results] == [
        ErrorCode.none,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
    ]
    assert response.results[0].error_message is None
    describe = run(
        describe_acls.handle(ctx(admin_auth), any_filter(describe_v3.DescribeAclsRequest))
    )
    [resource] = describe.resources
    assert resource.resource_name == "orders" and resource.pattern_type == PatternType.LITERAL
    [acl] = resource.acls
    assert (acl.principal, acl.host, acl.operation) == ("User:bob", "*", AclOperation.READ)


def test_describe_v1_and_an_unknown_filter(admin_auth):
    v1 = describe_v1.DescribeAclsRequest(
        resource_type_filter=i8(ResourceType.TOPIC),
        resource_name_filter=None,
        pattern_type_filter=i8(PatternType.ANY),
        principal_filter=None,
        host_filter=None,
        operation=i8(AclOperation.ANY),
        permission_type=i8(AclPermissionType.ANY),
    )
    assert run(describe_acls.handle(ctx(admin_auth), v1)).error_code == ErrorCode.none
    bad = any_filter(describe_v3.DescribeAclsRequest, pattern_type_filter=i8(PatternType.UNKNOWN))
    response = run(describe_acls.handle(ctx(admin_auth), bad))
    assert response.error_code == ErrorCode.invalid_request


def test_delete_reports_what_each_filter_deleted(admin_auth):
    run(
        create_acls.handle(
            ctx(admin_auth),
            create_v3.CreateAclsRequest(
                creations=(creation(), creation(resource_type=i8(ResourceType.GROUP)))
            ),
        )
    )
    request = delete_v3.DeleteAclsRequest(
        filters=(
            any_filter(resource_type_filter=i8(ResourceType.GROUP)),
            any_filter(operation=i8(AclOperation.UNKNOWN)),
            any_filter(),
        )
    )
    groups, bad, rest = run(delete_acls.handle(ctx(admin_auth), request)).filter_results
    assert [m.resource_type for m in groups.matching_acls] == [ResourceType.GROUP]
    assert bad.error_code == ErrorCode.invalid_request and bad.matching_acls == ()
    [topic] = rest.matching_acls
    assert (topic.resource_name, topic.principal, topic.error_code) == (
        "orders",
        "User:bob",
        ErrorCode.none,
    )
    assert admin_auth.store.acls == {}
