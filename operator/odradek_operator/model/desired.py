"""Every object an ``OdradekCluster`` should have, built from its body alone.

``desired_objects(body, operator_image_default=...)`` returns plain dicts (the API's JSON, ready
for create or merge-patch) in the order to apply them: what pods refer to (ServiceAccount,
ConfigMaps, Services) before the StatefulSets that start them, ZooKeeper before the controllers
and brokers that need it. A StatefulSet's pods may then start before a later object exists only
if applying stops midway; the next pass finishes it. Each component's NetworkPolicy
(model/network_policies.py) comes before its StatefulSet, so its pods never run unprotected.

Raises ``spec.SpecError`` when the spec cannot be honoured. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek_operator import names
from odradek_operator.model import (
    brokers,
    controllers,
    network_policies,
    policy,
    services,
    zookeeper,
)
from odradek_operator.model.spec.cluster import ClusterSpec

Component = names.Component


def image(cluster: ClusterSpec, operator_image_default: str) -> str:
    """The Odradek image: ``spec.image``, else the operator's ``ODRADEK_IMAGE``."""
    return cluster.image or operator_image_default


def desired_objects(
    cluster_body: Mapping[str, Any],
    *,
    operator_image_default: str,
    operator_namespace: str | None = None,
) -> list[dict[str, Any]]:
    return build(
        ClusterSpec.from_resource(cluster_body),
        operator_image_default,
        operator_namespace=operator_namespace,
    )


def build(
    cluster: ClusterSpec,
    operator_image_default: str,
    certificates: Mapping[Component, str] | None = None,
    operator_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """``desired_objects`` for a spec already read. ``certificates``: the hash of each
    component's certificates Secret (secured clusters; reconcile/certificates.py makes the
    Secrets first), put in its pods' config hash. ``operator_namespace``: where the operator's
    pods run (the NetworkPolicies let them in), None if not known."""
    odradek_image = image(cluster, operator_image_default)
    certificates = certificates or {}
    policies = network_policies.network_policies(cluster, operator_namespace)

    def guarded(component: Component) -> list[dict[str, Any]]:
        return [policies[component]] if component in policies else []

    return [
        policy.service_account(cluster),
        zookeeper.config_map(cluster),
        services.headless_service(cluster, Component.ZOOKEEPER),
        services.zookeeper_client_service(cluster),
        policy.pod_disruption_budget(cluster, Component.ZOOKEEPER),
        *guarded(Component.ZOOKEEPER),
        zookeeper.statefulset(cluster, certificates.get(Component.ZOOKEEPER)),
        controllers.config_map(cluster),
        services.headless_service(cluster, Component.CONTROLLER),
        *guarded(Component.CONTROLLER),
        controllers.statefulset(cluster, odradek_image, certificates.get(Component.CONTROLLER)),
        brokers.config_map(cluster),
        services.headless_service(cluster, Component.BROKER),
        services.bootstrap_service(cluster),
        policy.pod_disruption_budget(cluster, Component.BROKER),
        *guarded(Component.BROKER),
        brokers.statefulset(cluster, odradek_image, certificates.get(Component.BROKER)),
    ]
