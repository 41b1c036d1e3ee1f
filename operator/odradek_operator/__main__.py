"""``odradek-operator``: run the operator (kopf) for one namespace or the whole cluster.

Kubernetes credentials come from the pod's service account, or ``$KUBECONFIG`` outside a
cluster, as kopf and the ``kubernetes`` client both read them.
"""

from __future__ import annotations

import argparse
import logging
import sys
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
        liveness_endpoint=args.liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
