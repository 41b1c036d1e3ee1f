"""ACLs through real ZooKeeper: what one broker's authorizer writes (Kafka's znodes and change
notifications) a second picks up from the notifications; concurrent writers to one resource
both land (conditional writes, retried); ACLs written as Kafka's own tools write them are read."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.acl_authorizer import AclAuthorizer
from odradek.security.acl_filter import AclBindingFilter
from odradek.security.principal import KafkaPrincipal
from odradek.zk.acl_store import ZkAclStore
from odradek.zk.client import ZkClient
from support.waiting import wait_until_async

pytestmark = pytest.mark.integration

WAIT_S = 10.0
POLL_S = 0.05
ALICE = KafkaPrincipal.user("alice")
HOST = "127.0.0.1"


def read_binding(name: str, pattern_type=PatternType.LITERAL, principal="User:alice"):
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, pattern_type),
        AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW),
    )


async def started(zk: ZkClient) -> AclAuthorizer:
    authorizer = AclAuthorizer(ZkAclStore(zk))
    await authorizer.start()
    return authorizer


def test_a_second_authorizer_follows_the_first_through_notifications(hosts):
    async def scenario():
        zk1, zk2 = ZkClient(hosts), ZkClient(hosts)
        await zk1.astart()
        await zk2.astart()
        try:
            first = await started(zk1)
            await first.create_acls([read_binding("before-start")])
            second = await started(zk2)  # reads what exists at start
            assert second.authorize(
                ALICE, HOST, AclOperation.READ, ResourceType.TOPIC, "before-start"
            )

            results = await first.create_acls(
                [read_binding("orders"), read_binding("app-", PatternType.PREFIXED)]
            )
            assert all(r.message is None for r in results)
            await wait_until_async(
                lambda: (
                    second.authorize(ALICE, HOST, AclOperation.READ, ResourceType.TOPIC, "orders")
                    and second.authorize(
                        ALICE, HOST, AclOperation.READ, ResourceType.TOPIC, "app-1"
                    )
                ),
                "the second authorizer to see the new ACLs",
                WAIT_S,
                poll_s=POLL_S,
            )

            # Kafka's layout and bytes.
            data, _ = await zk1.aget("/kafka-acl/Topic/orders")
            assert json.loads(data) == {
                "version": 1,
                "acls": [
                    {
                        "principal": "User:alice",
                        "permissionType": "Allow",
                        "operation": "Read",
                        "host": "*",
                    }
                ],
            }
            assert await zk1.aexists("/kafka-acl-extended/prefixed/Topic/app-") is not None
            literal = await zk1.achildren("/kafka-acl-changes")
            extended = await zk1.achildren("/kafka-acl-extended-changes")
            assert len(literal) == 2 and len(extended) == 1
            data, _ = await zk1.aget(f"/kafka-acl-changes/{max(literal)}")
            assert data == b"TOPIC:orders"

            [deleted] = await second.delete_acls([AclBindingFilter.any()])
            assert len(deleted.deleted) == 3
            await wait_until_async(
                lambda: not first.acls(AclBindingFilter.any()),
                "the first to see the deletes",
                WAIT_S,
                poll_s=POLL_S,
            )
            assert await zk1.aexists("/kafka-acl/Topic/orders") is None
        finally:
            await zk1.aclose()
            await zk2.aclose()

    asyncio.run(scenario())


def test_concurrent_writers_to_one_resource_both_land(hosts):
    async def scenario():
        zk1, zk2 = ZkClient(hosts), ZkClient(hosts)
        await zk1.astart()
        await zk2.astart()
        try:
            first, second = await started(zk1), await started(zk2)
            bindings = [read_binding("shared", principal=f"User:u{i}") for i in range(6)]
            await asyncio.gather(
                *(
                    (first if i % 2 else second).create_acls([binding])
                    for i, binding in enumerate(bindings)
                )
            )
            data, _ = await zk1.aget("/kafka-acl/Topic/shared")
            assert len(json.loads(data)["acls"]) == len(bindings)
            for authorizer in (first, second):
                await wait_until_async(
                    lambda a=authorizer: set(a.acls(AclBindingFilter.any())) == set(bindings),
                    "both caches to hold every binding",
                    WAIT_S,
                    poll_s=POLL_S,
                )
        finally:
            await zk1.aclose()
            await zk2.aclose()

    asyncio.run(scenario())


def test_acls_written_as_kafkas_tools_write_them_are_followed(hosts):
    async def scenario():
        zk = ZkClient(hosts)
        await zk.astart()
        try:
            authorizer = await started(zk)
            acl = (
                b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow",'
                b'"operation":"Write","host":"*"}]}'
            )
            await zk.acreate("/kafka-acl-extended/prefixed/Group/app-", acl)
            await zk.acreate(
                "/kafka-acl-extended-changes/acl_changes_",
                b'{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}',
                sequence=True,
            )
            await wait_until_async(
                lambda: authorizer.authorize(
                    ALICE, HOST, AclOperation.DESCRIBE, ResourceType.GROUP, "app-42"
                ),
                "the prefixed ACL to apply",
                WAIT_S,
                poll_s=POLL_S,
            )
            assert authorizer.authorize_any(ALICE, HOST, AclOperation.WRITE, ResourceType.GROUP)
        finally:
            await zk.aclose()

    asyncio.run(scenario())
