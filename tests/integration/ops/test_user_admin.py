"""The operator's ``UserAdmin`` adapter (reconcile/admin.py's ``OpsAdmin``) against real brokers
with the ACL authorizer on: SCRAM credentials set, described and deleted, a principal's ACLs
created, listed and deleted exactly (another principal's untouched), the user entity's quotas
set and removed; and a cluster without an authorizer answering ``AuthorizerDisabled``."""

from __future__ import annotations

import asyncio

import pytest

from odradek.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek_operator.reconcile.admin import AuthorizerDisabled, OpsAdmin
from support.waiting import wait_until

pytestmark = pytest.mark.integration

AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    # The admin connects on PLAINTEXT (User:ANONYMOUS), as do the brokers' own links here.
    "super.users": "User:ANONYMOUS",
}


def acl(principal: str, rtype, name: str, pattern, op, permission=AclPermissionType.ALLOW):
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, permission)
    )


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture(scope="module")
def secured_admin(local_cluster, tmp_path_factory):
    with local_cluster(
        tmp_path_factory.mktemp("users"), brokers=1, broker_overrides=AUTHORIZER
    ) as state:
        yield OpsAdmin(state.bootstrap_servers)


def test_scram_credentials(secured_admin):
    admin = secured_admin
    assert run(admin.scram_mechanisms("alice")) == {}
    run(admin.upsert_scram("alice", "SCRAM-SHA-512", 4096, "pw-1"))
    run(admin.upsert_scram("alice", "SCRAM-SHA-256", 8192, "pw-2"))
    assert run(admin.scram_mechanisms("alice")) == {"SCRAM-SHA-512": 4096, "SCRAM-SHA-256": 8192}
    run(admin.delete_scram("alice", "SCRAM-SHA-256"))
    run(admin.delete_scram("alice", "SCRAM-SHA-256"))  # already gone: nothing happens
    assert run(admin.scram_mechanisms("alice")) == {"SCRAM-SHA-512": 4096}


def test_a_principals_acls_exactly(secured_admin):
    admin = secured_admin
    mine = {
        acl("User:alice", ResourceType.TOPIC, "orders", PatternType.LITERAL, AclOperation.WRITE),
        acl("User:alice", ResourceType.GROUP, "app-", PatternType.PREFIXED, AclOperation.READ),
        acl(
            "User:alice",
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            PatternType.LITERAL,
            AclOperation.IDEMPOTENT_WRITE,
        ),
        acl(
            "User:alice",
            ResourceType.TRANSACTIONAL_ID,
            "tx",
            PatternType.LITERAL,
            AclOperation.ALL,
            AclPermissionType.DENY,
        ),
    }
    theirs = acl("User:bob", ResourceType.TOPIC, "orders", PatternType.LITERAL, AclOperation.READ)
    run(admin.create_acls([*mine, theirs]))
    wait_until(lambda: run(admin.acls_of("User:alice")) == mine, "alice's ACLs listed", 10)
    write = acl("User:alice", ResourceType.TOPIC, "orders", PatternType.LITERAL, AclOperation.WRITE)
    run(admin.delete_acls([write]))
    wait_until(lambda: run(admin.acls_of("User:alice")) == mine - {write}, "one deleted", 10)
    assert run(admin.acls_of("User:bob")) == {theirs}


def test_user_quotas(secured_admin):
    admin = secured_admin
    assert run(admin.user_quotas("alice")) == {}
    run(
        admin.alter_user_quotas("alice", {"producer_byte_rate": 1024, "request_percentage": 55}, [])
    )
    run(admin.alter_user_quotas("carol", {"consumer_byte_rate": 7}, []))
    assert run(admin.user_quotas("alice")) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": 55.0,
    }
    run(admin.alter_user_quotas("alice", {}, ["request_percentage"]))
    assert run(admin.user_quotas("alice")) == {"producer_byte_rate": 1024.0}
    assert run(admin.user_quotas("carol")) == {"consumer_byte_rate": 7.0}


def test_without_an_authorizer_acls_are_refused_as_such(local_cluster, tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("open"), brokers=1) as state:
        admin = OpsAdmin(state.bootstrap_servers)
        with pytest.raises(AuthorizerDisabled):
            run(admin.acls_of("User:alice"))
