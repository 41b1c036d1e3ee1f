"""The ACL authorizer's cost per question (issue 22): ``AclAuthorizer.authorize`` as a produce or
fetch asks it, once per topic of each request, with no ZooKeeper (the cache is filled directly).

Cases: an ALLOW on a PREFIXED pattern that the topic name matches, a LITERAL ALLOW on another
topic beside it, and ``--acls`` more unrelated LITERAL and PREFIXED ACLs; the topic name has
``--name-length`` characters. Prints microseconds per ``authorize`` (best of ``--repeat``).

Usage: ``.venv/bin/python bench/acl_bench.py [--acls 1000] [--name-length 30] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "services"))

from odradek.security.acl import (  # noqa: E402
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.acl_authorizer import AclAuthorizer  # noqa: E402
from odradek.security.principal import KafkaPrincipal  # noqa: E402

CALLS = 20_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=1000, help="unrelated ACLs (default 1000)")
    parser.add_argument("--name-length", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    alice = KafkaPrincipal.user("alice")
    allow = frozenset(
        {AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)}
    )
    other = frozenset(
        {AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW)}
    )
    authorizer = AclAuthorizer(store=None)  # type: ignore[arg-type]  (no ZooKeeper: apply)
    authorizer.apply(ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED), allow)
    authorizer.apply(ResourcePattern(ResourceType.TOPIC, "payments"), allow)
    for n in range(args.acls):
        pattern_type = PatternType.PREFIXED if n % 2 else PatternType.LITERAL
        authorizer.apply(ResourcePattern(ResourceType.TOPIC, f"team{n}-", pattern_type), other)
    name = ("orders-" + "x" * args.name_length)[: max(args.name_length, len("orders-"))]

    def ask() -> bool:
        return authorizer.authorize(
            alice, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, name
        )

    assert ask()
    best = min(timeit.repeat(ask, number=CALLS, repeat=args.repeat)) / CALLS
    print(
        f"authorize: {best * 1e6:.2f} us per call ({args.acls} other ACLs, "
        f"a {len(name)}-character topic name, best of {args.repeat})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
