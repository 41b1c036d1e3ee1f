"""``odradek topics create|list|describe|alter|delete``: kafka-topics.sh for Odradek.

Each action is one or two AdminClient calls (confluent-kafka): CreateTopics, Metadata,
DescribeConfigs, CreatePartitions, IncrementalAlterConfigs, DeleteTopics. The broker's error
message is shown as it came, with a non-zero exit code.

A topic is created (or deleted) by the controller after the broker has written it to ZooKeeper,
so ``create`` waits, a bounded time, until every partition has a leader, and ``delete`` until the
topic is gone from the metadata: the next command sees the result.
"""

from __future__ import annotations

import argparse
import base64
import time
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from odradek.commands.common import (
    REQUEST_TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    args_client_config,
    describe_kafka_error,
    error_code,
    list_topic_names,
    run_command,
)

SETTLE_TIMEOUT_S = 15.0  # how long create and delete wait for the controller
SETTLE_POLL_S = 0.1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe, alter, delete topics")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument(
        "--partitions", type=int, default=-1, help="default: the broker's num.partitions"
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="default: the broker's default.replication.factor",
    )
    _add_config_argument(create)
    create.add_argument("--if-not-exists", action="store_true", help="succeed if it exists")
    create.set_defaults(handler=run_command("topics create", run_create))

    listing = actions.add_parser("list", help="list topic names")
    listing.set_defaults(handler=run_command("topics list", run_list))

    describe = actions.add_parser(
        "describe", help="partitions, leaders, replicas, ISR and non-default configs"
    )
    describe.add_argument("names", nargs="*", metavar="NAME", help="default: every topic")
    describe.set_defaults(handler=run_command("topics describe", run_describe))

    alter = actions.add_parser("alter", help="add partitions, set or delete configs")
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, help="the new, higher partition count")
    _add_config_argument(alter)
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="return a config to its default (repeatable)",
    )
    alter.set_defaults(handler=run_command("topics alter", run_alter))

    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("name")
    delete.add_argument("--if-exists", action="store_true", help="succeed if it does not exist")
    delete.set_defaults(handler=run_command("topics delete", run_delete))

    for action in (create, listing, describe, alter, delete):
        add_bootstrap_argument(action)


def _add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="a topic config such as retention.ms=86400000 (repeatable)",
    )


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args_client_config(args))


# -- actions ---------------------------------------------------------------------------------


def run_create(args: argparse.Namespace) -> int:
    admin = _admin(args)
    topic = NewTopic(
        args.name,
        num_partitions=args.partitions,
        replication_factor=args.replication_factor,
        config=dict(args.config),
    )
    future = admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S)[args.name]
    try:
        future.result(REQUEST_TIMEOUT_S)
    except KafkaException as e:
        if args.if_not_exists and error_code(e) == KafkaError.TOPIC_ALREADY_EXISTS:
            print(f"Topic {args.name} already exists.")
            return 0
        raise _topic_error("create topic", args.name, e) from e
    if not _wait_until(lambda: _has_leaders(admin, args.name)):
        print(f"Created topic {args.name}; its partitions have no leader yet.")
    else:
        print(f"Created topic {args.name}.")
    return 0


def run_list(args: argparse.Namespace) -> int:
    for name in list_topic_names(_admin(args)):
        print(name)
    return 0


def run_describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    names = args.names or list_topic_names(admin)
    if not names:
        return 0
    descriptions = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    configs = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, name) for name in names],
        request_timeout=REQUEST_TIMEOUT_S,
    )
    configs_by_name = {resource.name: future for resource, future in configs.items()}
    missing = []
    for name in names:
        try:
            description = descriptions[name].result(REQUEST_TIMEOUT_S)
            config = configs_by_name[name].result(REQUEST_TIMEOUT_S)
        except KafkaException as e:
            if error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                if args.names:  # else deleted since it was listed: nothing to say
                    missing.append(name)
                continue
            raise _topic_error("describe topic", name, e) from e
        for line in format_description(description, config):
            print(line)
    if missing:
        raise CommandError(f"topic {', '.join(repr(n) for n in missing)} does not exist")
    return 0


def run_alter(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise CommandError("nothing to alter: give --partitions, --config or --delete-config")
    admin = _admin(args)
    if args.partitions is not None:
        future = admin.create_partitions(
            [NewPartitions(args.name, args.partitions)], request_timeout=REQUEST_TIMEOUT_S
        )[args.name]
        try:
            future.result(REQUEST_TIMEOUT_S)
        except KafkaException as e:
            raise _topic_error("add partitions to", args.name, e) from e
        if _wait_until(lambda: _has_leaders(admin, args.name, args.partitions)):
            print(f"Topic {args.name} now has {args.partitions} partitions.")
        else:
            print(f"Topic {args.name} now has {args.partitions} partitions, not all led yet.")
    if args.config or args.delete_config:
        entries = [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in args.config
        ] + [
            ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
            for key in args.delete_config
        ]
        resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=entries)
        for future in admin.incremental_alter_configs(
            [resource], request_timeout=REQUEST_TIMEOUT_S
        ).values():
            try:
                future.result(REQUEST_TIMEOUT_S)
            except KafkaException as e:
                raise _topic_error("alter the configs of", args.name, e) from e
        changes = [f"{k}={v}" for k, v in args.config] + [f"-{k}" for k in args.delete_config]
        print(f"Altered the configs of topic {args.name}: {', '.join(changes)}.")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    admin = _admin(args)
    future = admin.delete_topics([args.name], request_timeout=REQUEST_TIMEOUT_S)[args.name]
    try:
        future.result(REQUEST_TIMEOUT_S)
    except KafkaException as e:
        if args.if_exists and error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
            print(f"Topic {args.name} does not exist.")
            return 0
        raise _topic_error("delete topic", args.name, e) from e
    if not _wait_until(lambda: not _exists(admin, args.name)):
        print(f"Topic {args.name} is marked for deletion.")
    else:
        print(f"Deleted topic {args.name}.")
    return 0


def _topic_error(doing: str, name: str, error: KafkaException) -> CommandError:
    if error_code(error) == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return CommandError(f"topic {name!r} does not exist")
    return CommandError(f"cannot {doing} {name}: {describe_kafka_error(error)}")


# -- formatting and waiting ------------------------------------------------------------------


def format_description(description, config: dict) -> list[str]:
    """kafka-topics.sh --describe's layout: a topic line, then one line per partition."""
    partitions = sorted(description.partitions, key=lambda p: p.id)
    replication_factor = max((len(p.replicas) for p in partitions), default=0)
    overrides = ",".join(
        f"{key}={'<sensitive>' if entry.is_sensitive else entry.value}"
        for key, entry in sorted(config.items())
        if not entry.is_default
    )
    lines = [
        f"Topic: {description.name}\tTopicId: {_kafka_uuid(description.topic_id)}\t"
        f"PartitionCount: {len(partitions)}\tReplicationFactor: {replication_factor}\t"
        f"Configs: {overrides}"
    ]
    for p in partitions:
        leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else "none"
        lines.append(
            f"\tTopic: {description.name}\tPartition: {p.id}\tLeader: {leader}\t"
            f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
        )
    return lines


def _ids(nodes: Iterable) -> str:
    return ",".join(str(n.id) for n in nodes)


def _kafka_uuid(topic_id) -> str:
    """Kafka prints topic ids in URL-safe base64; librdkafka's ``str()`` uses the standard one."""
    if topic_id is None:
        return "none"
    raw = topic_id.get_most_significant_bits().to_bytes(8, "big", signed=True)
    raw += topic_id.get_least_significant_bits().to_bytes(8, "big", signed=True)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _has_leaders(admin: AdminClient, name: str, partitions: int | None = None) -> bool:
    """Whether the metadata shows the topic with every partition led (and as many as given)."""
    topic = admin.list_topics(topic=name, timeout=REQUEST_TIMEOUT_S).topics.get(name)
    if topic is None or topic.error is not None or not topic.partitions:
        return False
    if partitions is not None and len(topic.partitions) < partitions:
        return False
    return all(p.leader >= 0 for p in topic.partitions.values())


def _exists(admin: AdminClient, name: str) -> bool:
    topic = admin.list_topics(topic=name, timeout=REQUEST_TIMEOUT_S).topics.get(name)
    return topic is not None and topic.error is None


def _wait_until(condition, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(SETTLE_POLL_S)
