"""``odradek leaders elect``: kafka-leader-election.sh for Odradek.

One ElectLeaders call through confluent-kafka's ``AdminClient.elect_leaders`` (librdkafka sends
it to the broker Metadata names as controller, which forwards it to the controller). Which
partitions, exactly one of: ``--all-topic-partitions``; ``--topic T [--partition P]`` (every
partition of T, or one); ``--path-to-json-file F`` with Kafka's format
``{"partitions": [{"topic": "t", "partition": 0}, ...]}`` (a partition listed twice is refused,
as Kafka's tool refuses it).

The output is Kafka's tool's: the partitions elected, those whose leader was already the one
asked for ("Valid replica already elected"), and one line per partition that could not be
elected with the error's name and the controller's message. Exit code 0 when every partition
ended with the leader asked for (elected now, or already), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.commands.common import (
    REQUEST_TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    args_client_config,
    describe_kafka_error,
    run_command,
    topic_partitions,
)

ELECTION_TYPES = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}
REQUEST_TIMEOUT_MS = int(REQUEST_TIMEOUT_S * 1000)
RESULT_TIMEOUT_S = 2 * REQUEST_TIMEOUT_S  # librdkafka's own timeout answers first


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("leaders", help="move partition leadership")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    elect = actions.add_parser(
        "elect",
        help="elect preferred (or, unclean, any live) leaders, as kafka-leader-election.sh",
    )
    elect.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=sorted(ELECTION_TYPES),
        help="preferred: the first replica of each assignment, if live and in the ISR; "
        "unclean: any live replica of a partition without a live leader (records only the "
        "ISR had may be lost)",
    )
    which = elect.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    which.add_argument("--topic", help="every partition of this topic (or --partition's)")
    which.add_argument(
        "--path-to-json-file",
        type=Path,
        metavar="FILE",
        help='{"partitions": [{"topic": "t", "partition": 0}, ...]}',
    )
    elect.add_argument("--partition", type=int, help="with --topic: only this partition")
    add_bootstrap_argument(elect)
    elect.set_defaults(handler=run_command("leaders elect", run_elect))


def run_elect(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition needs --topic")
    election_type = ELECTION_TYPES[args.election_type]
    # confluent-kafka 2.16's elect_leaders refuses its own timeout keywords (its argument
    # parsing is wrong), so its request and operation timeouts come from socket.timeout.ms.
    admin = AdminClient(args_client_config(args, **{"socket.timeout.ms": REQUEST_TIMEOUT_MS}))
    partitions = _partitions(args, admin)
    future = admin.elect_leaders(election_type, partitions)
    try:
        results = future.result(RESULT_TIMEOUT_S)
    except KafkaException as e:
        raise CommandError(
            f"leader election ({election_type.name}) failed: {describe_kafka_error(e)}"
        ) from e
    except TimeoutError as e:  # concurrent.futures' since 3.11
        raise CommandError(
            f"leader election ({election_type.name}): no answer in {RESULT_TIMEOUT_S:.0f} s"
        ) from e
    return report(election_type.name, results)


def report(election_type: str, results: dict[TopicPartition, object]) -> int:
    """Kafka's tool's lines for ``elect_leaders``' results; the exit code."""
    elected, already, failed = [], [], []
    for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
        error = results[tp]
        code = _code(error)
        if code is None:
            elected.append(tp)
        elif code == KafkaError.ELECTION_NOT_NEEDED:
            already.append(tp)
        else:
            failed.append((tp, error))
    if elected:
        print(
            f"Successfully completed leader election ({election_type}) for partitions "
            f"{_names(elected)}"
        )
    if already:
        print(f"Valid replica already elected for partitions {_names(already)}")
    for tp, error in failed:
        print(
            f"Error completing leader election ({election_type}) for partition: "
            f"{tp.topic}-{tp.partition}: {describe_kafka_error(error)}"
        )
    if not results:
        print(f"No partition needed a leader election ({election_type}).")
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0


def _code(error: object) -> int | None:
    if error is None:
        return None
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    if isinstance(error, KafkaError):
        return None if error.code() == KafkaError.NO_ERROR else error.code()
    return KafkaError._FAIL


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions)


def _partitions(args: argparse.Namespace, admin: AdminClient) -> list[TopicPartition] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is not None:
            return [TopicPartition(args.topic, args.partition)]
        return [TopicPartition(args.topic, p) for p in topic_partitions(admin, args.topic)]
    return read_json_partitions(args.path_to_json_file)


def read_json_partitions(path: Path) -> list[TopicPartition]:
    """Kafka's leader election JSON file; a ``CommandError`` naming what is wrong with it."""
    try:
        document = json.loads(path.read_text())
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise CommandError(f"{path} is not JSON: {e}") from e
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise CommandError(
            f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ...}}]}}'
        )
    partitions, seen = [], set()
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
            raise CommandError(f"{path}: each partition needs a topic and a partition, got {entry}")
        if (topic, partition) in seen:
            raise CommandError(f"{path}: duplicate partition {topic}-{partition} in the JSON")
        seen.add((topic, partition))
        partitions.append(TopicPartition(topic, partition))
    if not partitions:
        raise CommandError(f"{path}: no partitions listed")
    return partitions
