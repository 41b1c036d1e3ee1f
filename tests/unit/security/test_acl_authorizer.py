"""The ACL authorizer's rules, as Kafka's AclAuthorizer: literal, wildcard and prefixed patterns,
DENY over ALLOW, implied operations, super users, allow.everyone.if.no.acl.found, KIP-679's
authorize_any, and CreateAcls/DeleteAcls/DescribeAcls semantics over an in-memory store."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from odradek.errors import ErrorCode
from odradek.large_messages import full_collections_deferred
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
from odradek.security.acl_authorizer import DENIAL_LOGS_PER_S_MAX, AclAuthorizer
from odradek.security.acl_filter import (
    AccessControlEntryFilter,
    AclBindingFilter,
    ResourcePatternFilter,
)
from odradek.security.principal import KafkaPrincipal
from odradek.zk.acl_store import ACL_ENTRY_BYTES_MIN, ACL_NODE_BYTES_MAX, AclNodeTooLargeError
from support.acl_memory_store import MemoryAclStore

Op = AclOperation
Perm = AclPermissionType
T = ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE = KafkaPrincipal.user("alice")
BOB = KafkaPrincipal.user("bob")
HOST = "10.0.0.1"


def ace(principal="User:alice", op=Op.READ, perm=Perm.ALLOW, host="*"):
    return AccessControlEntry(principal, host, op, perm)


def authorizer(acls=(), **options) -> AclAuthorizer:
    """``acls``: (resource type, name, pattern type, entry) rows."""
    auth = AclAuthorizer(MemoryAclStore(), **options)
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for rtype, name, ptype, entry in acls:
        grouped.setdefault(ResourcePattern(rtype, name, ptype), set()).add(entry)
    auth.load({p: frozenset(e) for p, e in grouped.items()})
    return auth


# (acls, principal, host, operation, resource type, name, allowed)
CASES = [
    ("no acls: denied", [], ALICE, HOST, Op.READ, T.TOPIC, "t", False),
    ("literal allow", [(T.TOPIC, "t", LIT, ace())], ALICE, HOST, Op.READ, T.TOPIC, "t", True),
    ("other topic", [(T.TOPIC, "t", LIT, ace())], ALICE, HOST, Op.READ, T.TOPIC, "u", False),
    ("other principal", [(T.TOPIC, "t", LIT, ace())], BOB, HOST, Op.READ, T.TOPIC, "t", False),
    ("other operation", [(T.TOPIC, "t", LIT, ace())], ALICE, HOST, Op.WRITE, T.TOPIC, "t", False),
    ("wildcard name", [(T.TOPIC, "*", LIT, ace())], ALICE, HOST, Op.READ, T.TOPIC, "any", True),
    (
        "wildcard principal",
        [(T.TOPIC, "t", LIT, ace("User:*"))],
        BOB,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "host matches",
        [(T.TOPIC, "t", LIT, ace(host=HOST))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "host differs",
        [(T.TOPIC, "t", LIT, ace(host="10.0.0.2"))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        False,
    ),
    ("prefixed", [(T.TOPIC, "app-", PRE, ace())], ALICE, HOST, Op.READ, T.TOPIC, "app-1", True),
    (
        "prefix is whole name",
        [(T.TOPIC, "app", PRE, ace())],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "app",
        True,
    ),
    (
        "prefix not matching",
        [(T.TOPIC, "app-", PRE, ace())],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "ap",
        False,
    ),
    (
        "literal is not a prefix",
        [(T.TOPIC, "app", LIT, ace())],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "app-1",
        False,
    ),
    ("other type", [(T.GROUP, "t", LIT, ace())], ALICE, HOST, Op.READ, T.TOPIC, "t", False),
    (
        "ALL allows read",
        [(T.TOPIC, "t", LIT, ace(op=Op.ALL))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "DENY beats ALLOW",
        [(T.TOPIC, "t", LIT, ace()), (T.TOPIC, "t", LIT, ace(perm=Perm.DENY))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        False,
    ),
    (
        "prefixed DENY beats literal ALLOW",
        [(T.TOPIC, "t", LIT, ace()), (T.TOPIC, "t", PRE, ace(perm=Perm.DENY))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        False,
    ),
    (
        "wildcard-principal DENY",
        [(T.TOPIC, "t", LIT, ace()), (T.TOPIC, "*", LIT, ace("User:*", Op.ALL, Perm.DENY))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        False,
    ),
    (
        "DENY of another op",
        [(T.TOPIC, "t", LIT, ace()), (T.TOPIC, "t", LIT, ace(op=Op.WRITE, perm=Perm.DENY))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "READ implies DESCRIBE",
        [(T.TOPIC, "t", LIT, ace())],
        ALICE,
        HOST,
        Op.DESCRIBE,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "WRITE implies DESCRIBE",
        [(T.TOPIC, "t", LIT, ace(op=Op.WRITE))],
        ALICE,
        HOST,
        Op.DESCRIBE,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
        [(T.TOPIC, "t", LIT, ace(op=Op.ALTER_CONFIGS))],
        ALICE,
        HOST,
        Op.DESCRIBE_CONFIGS,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "DESCRIBE implies nothing",
        [(T.TOPIC, "t", LIT, ace(op=Op.DESCRIBE))],
        ALICE,
        HOST,
        Op.READ,
        T.TOPIC,
        "t",
        False,
    ),
    (
        "DENY READ does not deny DESCRIBE",
        [(T.TOPIC, "t", LIT, ace(op=Op.DESCRIBE)), (T.TOPIC, "t", LIT, ace(perm=Perm.DENY))],
        ALICE,
        HOST,
        Op.DESCRIBE,
        T.TOPIC,
        "t",
        True,
    ),
    (
        "cluster",
        [(T.CLUSTER, CLUSTER_NAME, LIT, ace(op=Op.CLUSTER_ACTION))],
        ALICE,
        HOST,
        Op.CLUSTER_ACTION,
        T.CLUSTER,
        CLUSTER_NAME,
        True,
    ),
]


@pytest.mark.parametrize(
    ("acls", "principal", "host", "operation", "rtype", "name", "allowed"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_authorize(acls, principal, host, operation, rtype, name, allowed):
    assert authorizer(acls).authorize(principal, host, operation, rtype, name) is allowed


def test_super_users_are_allowed_everything_even_against_a_deny():
    auth = authorizer(
        [(T.TOPIC, "t", LIT, ace(op=Op.ALL, perm=Perm.DENY))],
        super_users=[ALICE],
    )
    assert auth.authorize(ALICE, HOST, Op.DELETE, T.TOPIC, "t")
    assert auth.authorize_any(ALICE, HOST, Op.WRITE, T.TOPIC)
    assert not auth.authorize(BOB, HOST, Op.DELETE, T.TOPIC, "t")


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls():
    auth = authorizer(
        [(T.TOPIC, "guarded", LIT, ace("User:bob"))], allow_everyone_if_no_acl_found=True
    )
    assert auth.authorize(ALICE, HOST, Op.WRITE, T.TOPIC, "open")
    assert not auth.authorize(ALICE, HOST, Op.READ, T.TOPIC, "guarded")
    assert auth.authorize(BOB, HOST, Op.READ, T.TOPIC, "guarded")


# KIP-679 / AclAuthorizer.authorizeByResourceType
ANY_CASES = [
    ("nothing", [], False),
    ("a literal allow", [(T.TOPIC, "t", LIT, ace(op=Op.WRITE))], True),
    ("a prefixed allow", [(T.TOPIC, "p", PRE, ace(op=Op.WRITE))], True),
    ("ALL", [(T.TOPIC, "t", LIT, ace(op=Op.ALL))], True),
    ("implied ops do not count", [(T.TOPIC, "t", LIT, ace(op=Op.READ))], False),
    ("another type", [(T.GROUP, "t", LIT, ace(op=Op.WRITE))], False),
    (
        "literal deny of the same name",
        [
            (T.TOPIC, "t", LIT, ace(op=Op.WRITE)),
            (T.TOPIC, "t", LIT, ace(op=Op.WRITE, perm=Perm.DENY)),
        ],
        False,
    ),
    (
        "literal deny of another name",
        [
            (T.TOPIC, "t", LIT, ace(op=Op.WRITE)),
            (T.TOPIC, "u", LIT, ace(op=Op.WRITE, perm=Perm.DENY)),
        ],
        True,
    ),
    (
        "prefixed deny covering the allow",
        [
            (T.TOPIC, "app-1", LIT, ace(op=Op.WRITE)),
            (T.TOPIC, "app", PRE, ace(op=Op.WRITE, perm=Perm.DENY)),
        ],
        False,
    ),
    (
        "prefixed deny covering a prefixed allow",
        [
            (T.TOPIC, "app-", PRE, ace(op=Op.WRITE)),
            (T.TOPIC, "app", PRE, ace(op=Op.WRITE, perm=Perm.DENY)),
        ],
        False,
    ),
    (
        "prefixed deny narrower than a prefixed allow",
        [
            (T.TOPIC, "app", PRE, ace(op=Op.WRITE)),
            (T.TOPIC, "app-", PRE, ace(op=Op.WRITE, perm=Perm.DENY)),
        ],
        True,
    ),
    (
        "deny of * beats everything",
        [
            (T.TOPIC, "t", LIT, ace(op=Op.WRITE)),
            (T.TOPIC, "*", LIT, ace("User:*", Op.WRITE, Perm.DENY)),
        ],
        False,
    ),
    (
        "allow of * survives literal denies",
        [
            (T.TOPIC, "*", LIT, ace(op=Op.WRITE)),
            (T.TOPIC, "t", LIT, ace(op=Op.WRITE, perm=Perm.DENY)),
        ],
        True,
    ),
    ("another principal's allow", [(T.TOPIC, "t", LIT, ace("User:bob", Op.WRITE))], False),
    ("a wildcard principal's allow", [(T.TOPIC, "t", LIT, ace("User:*", Op.WRITE))], True),
    ("another host", [(T.TOPIC, "t", LIT, ace(op=Op.WRITE, host="10.9.9.9"))], False),
]


@pytest.mark.parametrize(
    ("acls", "allowed"), [pytest.param(*case[1:], id=case[0]) for case in ANY_CASES]
)
def test_authorize_any(acls, allowed):
    assert authorizer(acls).authorize_any(ALICE, HOST, Op.WRITE, T.TOPIC) is allowed


def test_authorize_any_with_allow_everyone():
    deny_all = [(T.TOPIC, "*", LIT, ace(op=Op.WRITE, perm=Perm.DENY))]
    assert authorizer([], allow_everyone_if_no_acl_found=True).authorize_any(
        ALICE, HOST, Op.WRITE, T.TOPIC
    )
    assert not authorizer(deny_all, allow_everyone_if_no_acl_found=True).authorize_any(
        ALICE, HOST, Op.WRITE, T.TOPIC
    )


def test_authorize_any_refuses_filter_values():
    with pytest.raises(ValueError):
        authorizer().authorize_any(ALICE, HOST, Op.ANY, T.TOPIC)
    with pytest.raises(ValueError):
        authorizer().authorize_any(ALICE, HOST, Op.READ, T.ANY)


def test_an_update_replaces_the_cache_and_the_index():
    auth = authorizer([(T.TOPIC, "t", LIT, ace(op=Op.WRITE))])
    pattern = ResourcePattern(T.TOPIC, "t")
    auth.apply(pattern, frozenset())
    assert not auth.authorize(ALICE, HOST, Op.WRITE, T.TOPIC, "t")
    assert not auth.authorize_any(ALICE, HOST, Op.WRITE, T.TOPIC)
    auth.apply(pattern, frozenset({ace(op=Op.WRITE)}))
    assert auth.authorize_any(ALICE, HOST, Op.WRITE, T.TOPIC)


def test_denials_are_logged_in_kafka_words_and_bounded(caplog):
    auth = authorizer(clock=lambda: 100.0)
    with caplog.at_level(logging.INFO, logger="odradek.security.acl_authorizer"):
        for _ in range(DENIAL_LOGS_PER_S_MAX * 3):
            auth.authorize(ALICE, HOST, Op.READ, T.TOPIC, "orders")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == DENIAL_LOGS_PER_S_MAX
    assert lines[0] == (
        "Principal = User:alice is Denied Operation = Read from host = 10.0.0.1 "
        "on resource = Topic:LITERAL:orders"
    )


# --- CreateAcls / DescribeAcls / DeleteAcls over the store --------------------------------


def binding(rtype=T.TOPIC, name="t", ptype=LIT, **entry) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype), ace(**entry))


def bfilter(rtype=T.ANY, name=None, ptype=PatternType.ANY, principal=None, op=Op.ANY):
    return AclBindingFilter(
        ResourcePatternFilter(rtype, name, ptype),
        AccessControlEntryFilter(principal, None, op, Perm.ANY),
    )


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (binding(rtype=T.ANY), "ResourceType ANY"),
        (binding(ptype=PatternType.MATCH), "PatternType MATCH"),
        (binding(ptype=PatternType.ANY), "PatternType ANY"),
        (binding(op=Op.ANY), "AclOperation ANY"),
        (binding(op=Op.UNKNOWN), "AclOperation UNKNOWN"),
        (binding(perm=Perm.ANY), "AclPermissionType ANY"),
        (binding(principal="alice"), "principalType:principalName"),
        (binding(name=""), "empty resource name"),
        (binding(name="a/b"), "invalid resource name"),
        (binding(rtype=T.CLUSTER, name="c"), "kafka-cluster"),
    ],
)
def test_create_refuses_what_kafka_refuses(bad, why):
    auth = authorizer()
    [result] = asyncio.run(auth.create_acls([bad]))
    assert result.error_code == ErrorCode.invalid_request
    assert why in result.message
    assert auth.acls(bfilter()) == []


def test_create_describe_delete_as_confluent_kafkas_admin_test():
    auth = authorizer()
    b1 = binding(name="topic", principal="User:test-user-1")
    b2 = binding(name="topic", ptype=PRE, principal="User:test-user-2", op=Op.WRITE, perm=Perm.DENY)
    b3 = binding(T.GROUP, "group", PRE, principal="User:test-user-2", op=Op.ALL)
    results = asyncio.run(auth.create_acls([b1, b2, b3]))
    assert [r.error_code for r in results] == [ErrorCode.none] * 3
    assert set(auth.acls(bfilter())) == {b1, b2, b3}
    assert set(auth.acls(bfilter(ptype=PRE))) == {b2, b3}

    [prefixed] = asyncio.run(auth.delete_acls([bfilter(ptype=PRE)]))
    assert {b for b, _ in prefixed.deleted} == {b2, b3}
    topics, groups = asyncio.run(auth.delete_acls([bfilter(T.TOPIC), bfilter(T.GROUP)]))
    assert [b for b, _ in topics.deleted] == [b1]
    assert groups.deleted == []
    assert auth.acls(bfilter()) == []
    assert auth.store.acls == {}


def test_match_filters_select_the_patterns_that_apply_to_a_name():
    auth = authorizer()
    wild, lit, pre, other = (
        binding(name="*"),
        binding(name="app-1"),
        binding(name="app-", ptype=PRE),
        binding(name="app-2"),
    )
    asyncio.run(auth.create_acls([wild, lit, pre, other]))
    match = bfilter(T.TOPIC, "app-1", PatternType.MATCH)
    assert set(auth.acls(match)) == {wild, lit, pre}
    assert set(auth.acls(bfilter(T.TOPIC, "app-1", PatternType.ANY))) == {lit}
    assert set(auth.acls(bfilter(T.TOPIC, "app-", PRE))) == {pre}


def test_a_binding_two_filters_match_is_reported_under_the_first():
    auth = authorizer()
    b = binding()
    asyncio.run(auth.create_acls([b]))
    first, second = asyncio.run(auth.delete_acls([bfilter(), bfilter(T.TOPIC)]))
    assert [x for x, _ in first.deleted] == [b]
    assert second.deleted == []


def test_an_exact_filter_reaches_a_stored_pattern_this_broker_has_not_cached():
    """As Kafka: a filter naming one pattern exactly deletes its stored ACLs even before the
    change notification reached this broker; names with no ACLs anywhere cost nothing."""
    auth = authorizer()
    b = binding(name="elsewhere")
    auth.store.acls[b.pattern] = frozenset({b.entry})  # written by another broker
    names = [bfilter(T.TOPIC, f"none-{n}", LIT) for n in range(1_000)]
    *nothing, found, broad = asyncio.run(
        auth.delete_acls([*names, bfilter(T.TOPIC, "elsewhere", LIT), bfilter()])
    )
    assert all(r.deleted == [] for r in nothing)
    assert [x for x, _ in found.deleted] == [b] and broad.deleted == []
    assert auth.store.acls == {}


def test_exact_and_broad_filters_report_under_the_first_that_matches():
    auth = authorizer()
    b = binding(name="orders")
    asyncio.run(auth.create_acls([b]))
    broad, exact = asyncio.run(
        auth.delete_acls([bfilter(T.TOPIC), bfilter(T.TOPIC, "orders", LIT)])
    )
    assert [x for x, _ in broad.deleted] == [b] and exact.deleted == []


def test_delete_refuses_unknown_filters():
    auth = authorizer()
    [result] = asyncio.run(auth.delete_acls([bfilter(op=Op.UNKNOWN)]))
    assert result.error.error_code == ErrorCode.invalid_request


def test_entry_filters_match_principal_and_operation():
    auth = authorizer()
    alice_read, bob_read, alice_write = (
        binding(),
        binding(principal="User:bob"),
        binding(op=Op.WRITE),
    )
    asyncio.run(auth.create_acls([alice_read, bob_read, alice_write]))
    assert set(auth.acls(bfilter(principal="User:alice"))) == {alice_read, alice_write}
    assert set(auth.acls(bfilter(op=Op.WRITE))) == {alice_write}


def test_config_builds_the_authorizer_or_refuses_other_classes(tmp_path):
    from odradek.config.broker import BrokerConfig
    from odradek.errors import InvalidConfigError
    from odradek.security.acl_authorizer import from_config

    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:1", "log.dirs": str(tmp_path)}
    assert from_config(BrokerConfig.from_properties(base), None) is None
    for class_name in (
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
    ):
        config = BrokerConfig.from_properties(
            {**base, "authorizer.class.name": class_name, "super.users": "User:admin;User:CN=b0"}
        )
        auth = from_config(config, None)
        assert auth.super_users == {KafkaPrincipal.user("admin"), KafkaPrincipal.user("CN=b0")}
        assert auth.allow_everyone_if_no_acl_found is False
    with pytest.raises(InvalidConfigError, match="kafka.security.authorizer.AclAuthorizer"):
        BrokerConfig.from_properties(
            {
                **base,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            }
        )
    with pytest.raises(InvalidConfigError, match="super.users"):
        BrokerConfig.from_properties({**base, "super.users": "admin"})


class _ZkSizedStore(MemoryAclStore):
    """Refuses a node that ZooKeeper could not hold, as ``zk.acl_store`` does before writing."""

    async def update(self, pattern, change):
        after = frozenset(change(self.acls.get(pattern, frozenset())))
        if len(after) * ACL_ENTRY_BYTES_MIN > ACL_NODE_BYTES_MAX:
            raise AclNodeTooLargeError(f"{len(after)} ACLs on {pattern} would not fit")
        return await super().update(pattern, lambda _: after)


async def _longest_loop_hold_s(work) -> float:
    """The most CPU time the loop spent between two turns of a ticker while ``work`` ran: the
    longest stretch of ``work`` without a yield, other processes' load left out (thread time).
    Full collections are deferred, as a broker defers them while a large request is in flight
    (``large_messages``): one over this test's objects takes longer than any slice."""
    longest = 0.0
    done = asyncio.Event()

    async def ticker():
        nonlocal longest
        last = time.thread_time()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.thread_time()
            longest, last = max(longest, now - last), now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        with full_collections_deferred():
            await work
    finally:
        done.set()
        await ticking
    return longest


def test_one_topics_55555_principals_are_refused_in_time_slices():
    """What 1 MB of CreateAcls holds (issue 23): too many for one ZooKeeper node, so each is
    INVALID_REQUEST; hashing the entries and answering each must not hold the loop (it held it
    ~40 ms of CPU, 546 ms on a loaded CI machine)."""
    auth = AclAuthorizer(_ZkSizedStore())
    bindings = [binding(name="t", principal=f"User:u{n}") for n in range(55_555)]
    results = []

    async def create():
        results.extend(await auth.create_acls(bindings))

    longest_s = asyncio.run(_longest_loop_hold_s(create()))
    assert {r.error_code for r in results} == {ErrorCode.invalid_request}
    assert len(results) == len(bindings)
    assert "would not fit" in results[0].message
    assert longest_s < 0.015, f"the loop was held {longest_s * 1000:.0f} ms of CPU"


def test_90909_filters_of_topics_without_acls_are_answered_in_time_slices():
    """1 MB of DeleteAcls naming distinct literal topics (issue 23): each filter's result was
    made before the first yield, ~100 ms of CPU on the loop."""
    auth = authorizer([(T.TOPIC, "kept", LIT, ace())])
    filters = [bfilter(T.TOPIC, f"t{n}", LIT) for n in range(90_909)]
    results = []

    async def delete():
        results.extend(await auth.delete_acls(filters))

    longest_s = asyncio.run(_longest_loop_hold_s(delete()))
    assert len(results) == len(filters)
    assert all(r.error.error_code == ErrorCode.none and not r.deleted for r in results)
    assert len(auth.acls(bfilter())) == 1
    assert longest_s < 0.015, f"the loop was held {longest_s * 1000:.0f} ms of CPU"
