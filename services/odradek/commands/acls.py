"""``odradek acls``: kafka-acls.sh for Odradek, through confluent-kafka's AdminClient.

kafka-acls.sh's main options, with its meaning:

- one of ``--add``, ``--remove``, ``--list``;
- resources: ``--topic T``, ``--group G``, ``--transactional-id I`` (each repeatable, ``*`` for
  every name), ``--cluster``; ``--resource-pattern-type literal|prefixed`` (default literal; also
  ``any`` and ``match`` to ``--list`` and ``--remove``);
- entries: ``--allow-principal P``/``--deny-principal P`` (``User:alice``, repeatable),
  ``--allow-host H``/``--deny-host H`` (default ``*``), ``--operation OP`` (repeatable, Kafka's
  names: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
  AlterConfigs, IdempotentWrite, All; default All), checked against what the resource type
  supports, as kafka-acls.sh checks;
- ``--producer`` (Write, Describe and Create on the topics, Write and Describe on the
  transactional ids, IdempotentWrite on the Cluster with ``--idempotent``) and ``--consumer``
  (Read and Describe on the topics, Read on the groups) instead of ``--operation``;
- ``--principal P`` narrows ``--list`` to one principal.

``--remove`` without a principal removes every ACL of the resources named, as kafka-acls.sh.
Exit code 0 when everything asked was done, 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable

from confluent_kafka import admin as ck

from odradek.commands.common import (
    REQUEST_TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    args_client_config,
    describe_kafka_error,
    run_command,
)
from odradek.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AclOperation,
    ResourceType,
    kafka_name,
    parse_kafka_name,
    parse_principal,
)

Op = AclOperation
# Odradek's (Kafka's) resource types -> librdkafka's (which calls the Cluster BROKER).
_CK_RESOURCE = {
    ResourceType.TOPIC: ck.ResourceType.TOPIC,
    ResourceType.GROUP: ck.ResourceType.GROUP,
    ResourceType.CLUSTER: ck.ResourceType.BROKER,
    ResourceType.TRANSACTIONAL_ID: ck.ResourceType.TRANSACTIONAL_ID,
}
_PATTERN_TYPES = ("literal", "prefixed", "any", "match")

Resource = tuple[ResourceType, str]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh)")
    add_bootstrap_argument(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add the ACLs described")
    action.add_argument("--remove", action="store_true", help="remove the ACLs described")
    action.add_argument("--list", action="store_true", help="list the ACLs of the resources")
    for flag, what in (
        ("--topic", "a topic"),
        ("--group", "a consumer group"),
        ("--transactional-id", "a transactional id"),
    ):
        parser.add_argument(flag, action="append", default=[], help=f"{what} (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the Cluster resource")
    parser.add_argument(
        "--resource-pattern-type", choices=_PATTERN_TYPES, default="literal", type=str.lower
    )
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host"):
        parser.add_argument(flag, action="append", default=[])
    parser.add_argument("--operation", action="append", default=[], help="(repeatable)")
    parser.add_argument("--principal", help="--list: only this principal's ACLs")
    parser.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    parser.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    parser.add_argument("--idempotent", action="store_true", help="with --producer")
    parser.set_defaults(handler=run_command("acls", run))


def run(args: argparse.Namespace) -> int:
    admin = ck.AdminClient(args_client_config(args))
    if args.add:
        return _add(admin, bindings(args))
    if args.remove:
        return _remove(admin, removal_filters(args))
    return _list(admin, list_filters(args))


# --- what the options mean (pure) --------------------------------------------------------


def resources(args: argparse.Namespace) -> list[Resource]:
    found: list[Resource] = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, i) for i in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        return [parse_kafka_name(AclOperation, op) for op in args.operation] or [Op.ALL]
    except ValueError as e:
        raise CommandError(f"--operation: {e}") from e


def _principals(values: Iterable[str], flag: str) -> list[str]:
    for value in values:
        try:
            parse_principal(value)
        except ValueError as e:
            raise CommandError(f"{flag}: {e}") from e
    return list(values)


def _operations_by_resource(args: argparse.Namespace) -> dict[Resource, list[AclOperation]]:
    found = resources(args)
    if args.producer or args.consumer:
        if args.operation:
            raise CommandError("--producer/--consumer replace --operation: give one or the other")
        chosen: dict[Resource, list[AclOperation]] = {}
        for resource in found:
            rtype = resource[0]
            ops = []
            if args.producer and rtype is ResourceType.TOPIC:
                ops += [Op.WRITE, Op.DESCRIBE, Op.CREATE]
            if args.producer and rtype is ResourceType.TRANSACTIONAL_ID:
                ops += [Op.WRITE, Op.DESCRIBE]
            if args.consumer and rtype is ResourceType.TOPIC:
                ops += [Op.READ, Op.DESCRIBE]
            if args.consumer and rtype is ResourceType.GROUP:
                ops += [Op.READ]
            if ops:
                chosen[resource] = ops
        if args.producer and args.idempotent:
            chosen[(ResourceType.CLUSTER, CLUSTER_NAME)] = [Op.IDEMPOTENT_WRITE]
        if args.consumer and not args.group:
            raise CommandError("--consumer needs --group")
        return chosen
    ops = _operations(args)
    for rtype, _ in found:
        unsupported = [o for o in ops if o is not Op.ALL and o not in SUPPORTED_OPERATIONS[rtype]]
        if unsupported:
            allowed = ", ".join(sorted(kafka_name(o) for o in SUPPORTED_OPERATIONS[rtype]))
            raise CommandError(
                f"ResourceType {kafka_name(rtype)} only supports operations {allowed}"
            )
    return {resource: ops for resource in found}


def _entries(args: argparse.Namespace, ops: list[AclOperation]):
    """(principal, host, operation, permission) for the allow and deny options."""
    allowed = _principals(args.allow_principal, "--allow-principal")
    denied = _principals(args.deny_principal, "--deny-principal")
    if args.deny_principal and (args.producer or args.consumer):
        raise CommandError("--producer/--consumer make ALLOW ACLs only: no --deny-principal")
    for principals, hosts, permission in (
        (allowed, args.allow_host or [WILDCARD_HOST], ck.AclPermissionType.ALLOW),
        (denied, args.deny_host or [WILDCARD_HOST], ck.AclPermissionType.DENY),
    ):
        for principal, host, op in itertools.product(principals, hosts, ops):
            yield principal, host, ck.AclOperation[op.name], permission


def _pattern(args: argparse.Namespace) -> ck.ResourcePatternType:
    return ck.ResourcePatternType[args.resource_pattern_type.upper()]


def bindings(args: argparse.Namespace) -> list[ck.AclBinding]:
    """``--add``'s bindings, as kafka-acls.sh makes them."""
    if args.resource_pattern_type not in ("literal", "prefixed"):
        raise CommandError("--add takes --resource-pattern-type literal or prefixed")
    if not resources(args):
        raise CommandError(
            "--add needs a resource: --topic, --group, --transactional-id, --cluster"
        )
    if not args.allow_principal and not args.deny_principal:
        raise CommandError("--add needs --allow-principal or --deny-principal")
    made = []
    for (rtype, name), ops in _operations_by_resource(args).items():
        for principal, host, op, permission in _entries(args, ops):
            pattern = (_CK_RESOURCE[rtype], name, _pattern(args))
            made.append(ck.AclBinding(*pattern, principal, host, op, permission))
    return made


def _any_entry_filter(rtype: ResourceType, name: str | None, pattern) -> ck.AclBindingFilter:
    ck_type = ck.ResourceType.ANY if rtype is ResourceType.ANY else _CK_RESOURCE[rtype]
    return ck.AclBindingFilter(
        ck_type, name, pattern, None, None, ck.AclOperation.ANY, ck.AclPermissionType.ANY
    )


def removal_filters(args: argparse.Namespace) -> list[ck.AclBindingFilter]:
    if not resources(args):
        raise CommandError(
            "--remove needs a resource: --topic, --group, --transactional-id, --cluster"
        )
    if not args.allow_principal and not args.deny_principal:
        return [_any_entry_filter(t, n, _pattern(args)) for t, n in resources(args)]
    return [
        ck.AclBindingFilter(_CK_RESOURCE[rtype], name, _pattern(args), *entry)
        for (rtype, name), ops in _operations_by_resource(args).items()
        for entry in _entries(args, ops)
    ]


def list_filters(args: argparse.Namespace) -> list[ck.AclBindingFilter]:
    principal = _principals([args.principal], "--principal")[0] if args.principal else None
    pattern = _pattern(args) if resources(args) else ck.ResourcePatternType.ANY
    chosen = resources(args) or [(ResourceType.ANY, None)]
    return [
        ck.AclBindingFilter(
            ck.ResourceType.ANY if rtype is ResourceType.ANY else _CK_RESOURCE[rtype],
            name,
            pattern,
            principal,
            None,
            ck.AclOperation.ANY,
            ck.AclPermissionType.ANY,
        )
        for rtype, name in chosen
    ]


# --- talking to the cluster ----------------------------------------------------------------


def _add(admin: ck.AdminClient, made: list[ck.AclBinding]) -> int:
    for binding, future in admin.create_acls(made, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            future.result(timeout=REQUEST_TIMEOUT_S)
        except Exception as e:
            raise CommandError(f"cannot add {_show(binding)}: {describe_kafka_error(e)}") from e
        print(f"Added {_show(binding)}")
    return 0


def _remove(admin: ck.AdminClient, filters: list[ck.AclBindingFilter]) -> int:
    for _, future in admin.delete_acls(filters, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            for binding in future.result(timeout=REQUEST_TIMEOUT_S):
                print(f"Removed {_show(binding)}")
        except Exception as e:
            raise CommandError(f"cannot remove ACLs: {describe_kafka_error(e)}") from e
    return 0


def _list(admin: ck.AdminClient, filters: list[ck.AclBindingFilter]) -> int:
    grouped: dict[tuple[str, str, str], list[ck.AclBinding]] = {}
    for binding_filter in filters:
        future = admin.describe_acls(binding_filter, request_timeout=REQUEST_TIMEOUT_S)
        try:
            found = future.result(timeout=REQUEST_TIMEOUT_S)
        except Exception as e:
            raise CommandError(f"cannot list ACLs: {describe_kafka_error(e)}") from e
        for binding in found:
            key = (binding.restype.name, binding.name, binding.resource_pattern_type.name)
            grouped.setdefault(key, []).append(binding)
    for (rtype, name, pattern), found in sorted(grouped.items()):
        rtype = "CLUSTER" if rtype == "BROKER" else rtype
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={name}, "
            f"patternType={pattern})`:"
        )
        for binding in sorted(found):
            print(f"\t{_entry(binding)}")
        print()
    return 0


def _entry(binding: ck.AclBinding) -> str:
    return (
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={binding.operation.name}, permissionType={binding.permission_type.name})"
    )


def _show(binding: ck.AclBinding) -> str:
    rtype = "CLUSTER" if binding.restype.name == "BROKER" else binding.restype.name
    return f"{_entry(binding)} on {rtype}:{binding.resource_pattern_type.name}:{binding.name}"
