"""``odradek-operator``: run the operator (kopf) for one namespace or the whole cluster.

Kubernetes credentials come from the pod's service account, or ``$KUBECONFIG`` outside a
cluster, as kopf and the ``kubernetes`` client both read them.

Peering (``--peering``): kopf is not a leader election. Every replica writes its priority into
the KopfPeering object; a replica pauses while a live peer has a higher priority, and every
replica pauses while a live peer has the same one (kopf 1.45: "Pausing all operators, including
self"). So replicas with kopf's default priority (0 for all) would all stand still. Each replica
takes minus its start time in microseconds instead: the oldest replica is the active one, and a
replica restarted later never displaces the one that took over. A replica that exits cleanly
removes itself from the object, and the next one resumes at once; one killed outright is waited
for until its entry expires (kopf's peering lifetime, 60 s).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek-operator",
        description="Reconcile OdradekCluster and OdradekTopic resources (odradek.io/v1alpha1).",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument("--all-namespaces", action="store_true", help="watch every namespace")
    parser.add_argument(
        "--peering",
        metavar="NAME",
        default=None,
        help="elect one active operator among replicas through this KopfPeering object",
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=None,
        help="this replica's peering priority (default: minus its start time in microseconds,"
        " so the oldest replica is active)",
    )
    parser.add_argument(
        "--liveness",
        metavar="URL",
        default=None,
        help="serve kopf's liveness probe, e.g. http://0.0.0.0:8080/healthz",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the operator's Prometheus metrics on this port (/metrics); off by default",
    )
    parser.add_argument(
        "--metrics-address", default="0.0.0.0", help="address for --metrics-port (0.0.0.0)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    return parser


def start_priority() -> int:
    """Distinct per replica, highest for the oldest (see the module's docstring)."""
    return -(time.time_ns() // 1000)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    import kopf

    from odradek_operator import (
        handlers,  # noqa: F401  (registers the handlers)
        metrics,
    )

    if args.metrics_port is not None:
        metrics.serve(args.metrics_port, args.metrics_address)
    # kopf.run (1.45): clusterwide=True, or namespaces=[...]; neither: the current namespace of
    # the kubeconfig is not assumed, so default to the whole cluster like `kopf run -A`.
    kopf.run(
        clusterwide=args.all_namespaces or not args.namespace,
        namespaces=args.namespace,
        standalone=args.peering is None,
        peering_name=args.peering,
        priority=args.priority if args.priority is not None else start_priority(),
        liveness_endpoint=args.liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
