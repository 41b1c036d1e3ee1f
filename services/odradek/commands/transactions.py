"""``odradek transactions list|describe|abort|find-hanging``: kafka-transactions.sh for Odradek.

A shell over ``odradek.ops.transactions`` (the wire protocol through Odradek's own client):

- ``list [--state S ...] [--producer-id P ...] [--duration-filter MS]``: every transactional id
  of the cluster with its coordinator, producer id and state;
- ``describe --transactional-id X``: the transaction's coordinator, producer id and epoch,
  state, timeout, start time, duration and partitions;
- ``abort --topic T --partition P --start-offset N``: aborts the open transaction that starts
  at offset N of that partition (a hanging one: its coordinator will never end it); or, with
  ``--producer-id --producer-epoch --coordinator-epoch`` instead of ``--start-offset``, that
  producer's transaction in the partition;
- ``find-hanging --broker-id B [--max-transaction-timeout MIN]``: the open transactions of the
  broker's partitions older than the maximum transaction timeout that no coordinator is
  completing.

Exit code 0 when everything asked was done, 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import argparse
import time

from odradek.commands.common import (
    CommandError,
    add_bootstrap_argument,
    bootstrap_servers,
    client_security,
    run_command,
)
from odradek.commands.groups import run, table
from odradek.common.partitions import TopicPartition
from odradek.ops import transactions as txn_ops

MINUTE_MS = 60_000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transactions", help="list, describe and abort transactions; find hanging ones"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="every transactional id of the cluster")
    listing.add_argument(
        "--state", action="append", default=[], help="only transactions in this state (repeatable)"
    )
    listing.add_argument(
        "--producer-id",
        action="append",
        default=[],
        type=non_negative,
        help="only this producer's (repeatable)",
    )
    listing.add_argument(
        "--duration-filter",
        type=non_negative,
        metavar="MS",
        help="only transactions running longer than this many milliseconds",
    )
    add_bootstrap_argument(listing)
    listing.set_defaults(handler=run_command("transactions list", run_list))

    describe = actions.add_parser("describe", help="the state of one transactional id")
    describe.add_argument("--transactional-id", required=True)
    add_bootstrap_argument(describe)
    describe.set_defaults(handler=run_command("transactions describe", run_describe))

    abort = actions.add_parser("abort", help="abort an open (hanging) transaction in one partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", required=True, type=non_negative)
    abort.add_argument(
        "--start-offset", type=non_negative, help="the first offset of the transaction to abort"
    )
    abort.add_argument("--producer-id", type=non_negative)
    abort.add_argument("--producer-epoch", type=non_negative)
    abort.add_argument("--coordinator-epoch", type=non_negative)
    add_bootstrap_argument(abort)
    abort.set_defaults(handler=run_command("transactions abort", run_abort))

    hanging = actions.add_parser(
        "find-hanging", help="open transactions of a broker's partitions no coordinator ends"
    )
    hanging.add_argument("--broker-id", required=True, type=non_negative)
    hanging.add_argument(
        "--max-transaction-timeout",
        type=positive,
        default=txn_ops.MAX_TRANSACTION_TIMEOUT_MS // MINUTE_MS,
        metavar="MINUTES",
        help="the cluster's transaction.max.timeout.ms, in minutes (default: %(default)s)",
    )
    add_bootstrap_argument(hanging)
    hanging.set_defaults(handler=run_command("transactions find-hanging", run_find_hanging))


def non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return number


def positive(value: str) -> int:
    number = non_negative(value)
    if number == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


# -- list and describe ------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    listed = run(
        txn_ops.list_transactions(
            bootstrap_servers(args),
            states=args.state,
            security=client_security(args),
            producer_ids=args.producer_id,
            duration_ms=args.duration_filter,
        )
    )
    table(
        [(t.transactional_id, t.coordinator, t.producer_id, t.state) for t in listed],
        ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
    )
    return 0


def run_describe(args: argparse.Namespace) -> int:
    d = run(
        txn_ops.describe_transaction(
            bootstrap_servers(args),
            args.transactional_id,
            security=client_security(args),
        )
    )
    started = d.start_time_ms >= 0
    now_ms = int(time.time() * 1000)
    table(
        [
            (
                d.coordinator,
                d.transactional_id,
                d.producer_id,
                d.producer_epoch,
                d.state,
                d.timeout_ms,
                d.start_time_ms if started else None,
                now_ms - d.start_time_ms if started else None,
                ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions) or None,
            )
        ],
        (
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ),
    )
    return 0


# -- abort ------------------------------------------------------------------------------------


def run_abort(args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is not None:
        if any(v is not None for v in producer):
            raise CommandError(
                "--start-offset finds the producer itself: do not also give "
                "--producer-id, --producer-epoch or --coordinator-epoch"
            )
        result = run(
            txn_ops.abort_transaction(
                bootstrap_servers(args),
                tp,
                args.start_offset,
                security=client_security(args),
            )
        )
    elif all(v is not None for v in producer):
        result = run(
            txn_ops.abort_producer(
                bootstrap_servers(args),
                tp,
                security=client_security(args),
                producer_id=args.producer_id,
                producer_epoch=args.producer_epoch,
                coordinator_epoch=args.coordinator_epoch,
            )
        )
    else:
        raise CommandError(
            "name the transaction: --start-offset N, or all of --producer-id, "
            "--producer-epoch and --coordinator-epoch"
        )
    print(
        f"Aborted the transaction of producer {result.producer_id} (epoch "
        f"{result.producer_epoch}, coordinator epoch {result.coordinator_epoch}) in "
        f"{tp.topic}-{tp.partition} at its leader, broker {result.leader}"
    )
    return 0


# -- find-hanging -----------------------------------------------------------------------------


def run_find_hanging(args: argparse.Namespace) -> int:
    hanging = run(
        txn_ops.find_hanging(
            bootstrap_servers(args),
            args.broker_id,
            security=client_security(args),
            max_transaction_timeout_ms=args.max_transaction_timeout * MINUTE_MS,
        )
    )
    now_ms = int(time.time() * 1000)
    table(
        [
            (
                t.tp.topic,
                t.tp.partition,
                t.producer_id,
                t.producer_epoch,
                t.coordinator_epoch,
                t.start_offset,
                t.last_timestamp_ms,
                (now_ms - t.last_timestamp_ms) // MINUTE_MS,
            )
            for t in hanging
        ],
        (
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ),
    )
    return 0
