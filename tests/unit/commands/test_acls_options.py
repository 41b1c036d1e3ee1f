"""``odradek acls``: kafka-acls.sh's options become the bindings and filters kafka-acls.sh makes
(principals x hosts x operations, --producer/--consumer, pattern types), and what it refuses."""

from __future__ import annotations

import pytest
from confluent_kafka import admin as ck

from odradek.cli import build_parser
from odradek.commands import acls
from odradek.commands.common import CommandError


def parse(*argv: str):
    return build_parser().parse_args(["acls", *argv])


def test_add_makes_every_principal_host_operation_combination():
    made = acls.bindings(
        parse(
            "--add", "--allow-principal", "User:a", "--allow-principal", "User:b",
            "--allow-host", "10.0.0.1", "--operation", "Read", "--operation", "Describe",
            "--topic", "orders", "--resource-pattern-type", "prefixed",
        )
    )  # fmt: skip
    assert len(made) == 4
    assert {(b.principal, b.operation) for b in made} == {
        (p, o)
        for p in ("User:a", "User:b")
        for o in (ck.AclOperation.READ, ck.AclOperation.DESCRIBE)
    }
    assert {b.host for b in made} == {"10.0.0.1"}
    assert {b.resource_pattern_type for b in made} == {ck.ResourcePatternType.PREFIXED}
    assert {b.permission_type for b in made} == {ck.AclPermissionType.ALLOW}


def test_deny_defaults_to_every_host_and_all():
    [made] = acls.bindings(parse("--add", "--deny-principal", "User:x", "--cluster"))
    assert (made.restype, made.name, made.host) == (ck.ResourceType.BROKER, "kafka-cluster", "*")
    assert (made.operation, made.permission_type) == (
        ck.AclOperation.ALL,
        ck.AclPermissionType.DENY,
    )


def test_producer_and_consumer_conveniences():
    producer = acls.bindings(
        parse("--add", "--allow-principal", "User:p", "--producer", "--topic", "t",
              "--transactional-id", "tx", "--idempotent")
    )  # fmt: skip
    assert {(b.restype, b.operation) for b in producer} == {
        (ck.ResourceType.TOPIC, ck.AclOperation.WRITE),
        (ck.ResourceType.TOPIC, ck.AclOperation.DESCRIBE),
        (ck.ResourceType.TOPIC, ck.AclOperation.CREATE),
        (ck.ResourceType.TRANSACTIONAL_ID, ck.AclOperation.WRITE),
        (ck.ResourceType.TRANSACTIONAL_ID, ck.AclOperation.DESCRIBE),
        (ck.ResourceType.BROKER, ck.AclOperation.IDEMPOTENT_WRITE),
    }
    consumer = acls.bindings(
        parse("--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    )
    assert {(b.restype, b.operation) for b in consumer} == {
        (ck.ResourceType.TOPIC, ck.AclOperation.READ),
        (ck.ResourceType.TOPIC, ck.AclOperation.DESCRIBE),
        (ck.ResourceType.GROUP, ck.AclOperation.READ),
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--add", "--allow-principal", "alice", "--topic", "t"), "principalType:principalName"),
        (("--add", "--topic", "t"), "--allow-principal or --deny-principal"),
        (("--add", "--allow-principal", "User:a"), "needs a resource"),
        (
            ("--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"),
            "only supports",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"),
            "--operation",
        ),
        (
            (
                "--add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "match",
            ),
            "literal or prefixed",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"),
            "--consumer needs --group",
        ),
    ],
)
def test_refused_like_kafka_acls(argv, message):
    with pytest.raises(CommandError, match=message):
        acls.bindings(parse(*argv))


def test_remove_without_principals_removes_everything_of_the_resource():
    [only] = acls.removal_filters(parse("--remove", "--topic", "t"))
    assert (only.restype, only.name, only.principal) == (ck.ResourceType.TOPIC, "t", None)
    assert only.operation == ck.AclOperation.ANY


def test_list_without_resources_lists_everything():
    [only] = acls.list_filters(parse("--list", "--principal", "User:a"))
    assert (only.restype, only.resource_pattern_type, only.principal) == (
        ck.ResourceType.ANY,
        ck.ResourcePatternType.ANY,
        "User:a",
    )
