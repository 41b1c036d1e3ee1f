"""``odradek users set-scram|list|delete``: users' SCRAM credentials (KIP-554's APIs).

A shell over confluent-kafka's admin client, which sends AlterUserScramCredentials and
DescribeUserScramCredentials; the broker stores the credentials in ZooKeeper as Kafka does:

- ``set-scram --user U --mechanism SCRAM-SHA-256|SCRAM-SHA-512 [--iterations N]
  [--password P]``: creates or replaces the user's credential for that mechanism (the client
  salts and hashes the password: it never reaches the broker). Without ``--password`` it is
  read from the terminal (a password on a command line is seen by every local user);
- ``list [--user U ...]``: users and the mechanisms (with iterations) they have;
- ``delete --user U --mechanism M``: removes one credential.

Exit code 0 when done, 1 with one line on stderr otherwise (the broker's error message).
"""

from __future__ import annotations

import argparse
import getpass

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.commands.common import (
    REQUEST_TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    args_client_config,
    describe_kafka_error,
    run_command,
)
from odradek.commands.groups import table

MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
DEFAULT_ITERATIONS = 4096  # Kafka's kafka-configs.sh default


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("users", help="set, list and delete SCRAM credentials")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    set_scram = actions.add_parser("set-scram", help="create or replace a SCRAM credential")
    set_scram.add_argument("--user", required=True)
    set_scram.add_argument("--mechanism", required=True, choices=sorted(MECHANISMS))
    set_scram.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help="4096 to 16384 (default: %(default)s)",
    )
    set_scram.add_argument("--password", help="default: read from the terminal")
    add_bootstrap_argument(set_scram)
    set_scram.set_defaults(handler=run_command("users set-scram", run_set_scram))

    listing = actions.add_parser("list", help="users and their SCRAM mechanisms")
    listing.add_argument("--user", action="append", default=[], help="only this user (repeatable)")
    add_bootstrap_argument(listing)
    listing.set_defaults(handler=run_command("users list", run_list))

    delete = actions.add_parser("delete", help="remove a user's SCRAM credential")
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", required=True, choices=sorted(MECHANISMS))
    add_bootstrap_argument(delete)
    delete.set_defaults(handler=run_command("users delete", run_delete))


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args_client_config(args))


def _alter(args: argparse.Namespace, alteration, doing: str) -> None:
    admin = _admin(args)  # kept until the answer: a destroyed client fails its futures
    future = admin.alter_user_scram_credentials([alteration], request_timeout=REQUEST_TIMEOUT_S)[
        args.user
    ]
    try:
        future.result(REQUEST_TIMEOUT_S)
    except KafkaException as e:
        raise CommandError(
            f"cannot {doing} for user {args.user!r}: {describe_kafka_error(e)}"
        ) from e


def run_set_scram(args: argparse.Namespace) -> int:
    password = args.password
    if password is None:
        try:
            password = getpass.getpass(f"Password for {args.user}: ")
        except EOFError:
            raise CommandError(
                "no password: give --password, or run it where it can ask (a terminal)"
            ) from None
    if not password:
        raise CommandError("the password is empty")
    info = ScramCredentialInfo(MECHANISMS[args.mechanism], args.iterations)
    upsertion = UserScramCredentialUpsertion(args.user, info, password.encode())
    _alter(args, upsertion, f"set the {args.mechanism} credential")
    print(f"Set the {args.mechanism} credential of user {args.user}.")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    deletion = UserScramCredentialDeletion(args.user, MECHANISMS[args.mechanism])
    _alter(args, deletion, f"delete the {args.mechanism} credential")
    print(f"Deleted the {args.mechanism} credential of user {args.user}.")
    return 0


def run_list(args: argparse.Namespace) -> int:
    admin = _admin(args)
    if args.user:
        futures = admin.describe_user_scram_credentials(
            args.user, request_timeout=REQUEST_TIMEOUT_S
        )
        described = {}
        for user, future in futures.items():
            try:
                described[user] = future.result(REQUEST_TIMEOUT_S)
            except KafkaException as e:
                raise CommandError(
                    f"cannot describe user {user!r}: {describe_kafka_error(e)}"
                ) from e
    else:
        described = admin.describe_user_scram_credentials(request_timeout=REQUEST_TIMEOUT_S).result(
            REQUEST_TIMEOUT_S
        )
    rows = [
        (user, info.mechanism.name.replace("_", "-"), info.iterations)
        for user, description in sorted(described.items())
        for info in description.scram_credential_infos
    ]
    table(rows, ("User", "Mechanism", "Iterations"))
    return 0
