"""``ClusterSpec.from_resource(body)``: an ``OdradekCluster`` (the API's JSON as a dict) read
once, as a frozen, validated value, with its ZooKeeper ensemble, controllers, brokers
(spec/brokers.py), listeners and ports (spec/listeners.py) and its two CAs.

- ``spec.networkPolicies`` (default true): the operator's NetworkPolicies
  (model/network_policies.py); ``spec.listeners[].networkPolicyPeers`` narrow who reaches a
  client listener (spec/network.py).
- Resources: every container gets default requests (spec/resources.py).
- Bounds, defaults and enums are the CRD's (readers.crd_*); the names of the objects derived from
  the cluster's name must stay DNS labels, hence its pattern and maximum length.

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek_operator import names
from odradek_operator.model.spec.brokers import BrokerSpec, _brokers
from odradek_operator.model.spec.listeners import (
    DEFAULT_LISTENERS,
    Authorization,
    Listener,
    Ports,
    _authorization,
    _listeners,
    _ports,
)
from odradek_operator.model.spec.readers import (
    SpecError,
    _bool,
    _int,
    _mapping,
    _only,
    _str,
    crd_default,
    crd_enum,
    crd_fact,
    crd_range,
)
from odradek_operator.model.spec.resources import DEFAULT_REQUESTS, Resources, Storage

__all__ = [
    "CaSpec",
    "ClusterSpec",
    "ControllersSpec",
    "ZooKeeperSpec",
]

_CLUSTER = names.CLUSTER_KIND
CLUSTER_NAME_MAX = crd_fact(_CLUSTER, "metadata.name", "maxLength")
_DNS_1035 = re.compile(crd_fact(_CLUSTER, "metadata.name", "pattern"))
_PULL_POLICIES = crd_enum(_CLUSTER, "spec.imagePullPolicy")
DEFAULT_IMAGE_PULL_POLICY: str = crd_default(_CLUSTER, "spec.imagePullPolicy")
ZOOKEEPER_REPLICAS = crd_enum(_CLUSTER, "spec.zookeeper.replicas")
DEFAULT_ZOOKEEPER_REPLICAS: int = crd_default(_CLUSTER, "spec.zookeeper.replicas")
DEFAULT_ZOOKEEPER_IMAGE: str = crd_default(_CLUSTER, "spec.zookeeper.image")
DEFAULT_ZOOKEEPER_SIZE: str = crd_default(_CLUSTER, "spec.zookeeper.storage.size")
CONTROLLER_REPLICAS = crd_range(_CLUSTER, "spec.controllers.replicas")
DEFAULT_CONTROLLER_REPLICAS: int = crd_default(_CLUSTER, "spec.controllers.replicas")
# spec.clusterCa and spec.clientsCa share one schema (crds.certificate_authority).
_CA_VALIDITY_DAYS = crd_range(_CLUSTER, "spec.clusterCa.validityDays")
_CA_RENEWAL_DAYS = crd_range(_CLUSTER, "spec.clusterCa.renewalDays")
DEFAULT_CA_VALIDITY_DAYS: int = crd_default(_CLUSTER, "spec.clusterCa.validityDays")  # Strimzi's
DEFAULT_CA_RENEWAL_DAYS: int = crd_default(_CLUSTER, "spec.clusterCa.renewalDays")
DEFAULT_CA_GENERATE: bool = crd_default(_CLUSTER, "spec.clusterCa.generateCertificateAuthority")
DEFAULT_NETWORK_POLICIES: bool = crd_default(_CLUSTER, "spec.networkPolicies")


@dataclass(frozen=True, slots=True)
class ZooKeeperSpec:
    replicas: int = DEFAULT_ZOOKEEPER_REPLICAS
    image: str = DEFAULT_ZOOKEEPER_IMAGE
    storage: Storage = Storage(DEFAULT_ZOOKEEPER_SIZE, None)
    resources: Resources = Resources.defaults("zookeeper")

    @classmethod
    def parse(cls, value: object) -> ZooKeeperSpec:
        where = "spec.zookeeper"
        section = _mapping(value, where)
        _only(section, where, ("replicas", "image", "storage", "resources"))
        replicas = _int(
            section, "replicas", where, DEFAULT_ZOOKEEPER_REPLICAS, 1, max(ZOOKEEPER_REPLICAS)
        )
        if replicas not in ZOOKEEPER_REPLICAS:
            raise SpecError(
                f"{where}.replicas",
                f"{replicas}: an ensemble has 1, 3 or 5 servers (an odd number keeps a majority)",
            )
        return cls(
            replicas=replicas,
            image=_str(section, "image", where, None) or DEFAULT_ZOOKEEPER_IMAGE,
            storage=Storage.parse(
                section.get("storage"), f"{where}.storage", DEFAULT_ZOOKEEPER_SIZE
            ),
            resources=Resources.parse(
                section.get("resources"), f"{where}.resources", DEFAULT_REQUESTS["zookeeper"]
            ),
        )


@dataclass(frozen=True, slots=True)
class ControllersSpec:
    replicas: int = DEFAULT_CONTROLLER_REPLICAS
    resources: Resources = Resources.defaults("controller")

    @classmethod
    def parse(cls, value: object) -> ControllersSpec:
        where = "spec.controllers"
        section = _mapping(value, where)
        _only(section, where, ("replicas", "resources"))
        return cls(
            replicas=_int(
                section, "replicas", where, DEFAULT_CONTROLLER_REPLICAS, *CONTROLLER_REPLICAS
            ),
            resources=Resources.parse(
                section.get("resources"), f"{where}.resources", DEFAULT_REQUESTS["controller"]
            ),
        )


@dataclass(frozen=True, slots=True)
class CaSpec:
    """``spec.clusterCa`` / ``spec.clientsCa`` (Strimzi's fields)."""

    generate: bool = DEFAULT_CA_GENERATE
    validity_days: int = DEFAULT_CA_VALIDITY_DAYS
    renewal_days: int = DEFAULT_CA_RENEWAL_DAYS

    @classmethod
    def parse(cls, value: object, where: str) -> CaSpec:
        section = _mapping(value, where)
        _only(section, where, ("generateCertificateAuthority", "validityDays", "renewalDays"))
        validity = _int(
            section, "validityDays", where, DEFAULT_CA_VALIDITY_DAYS, *_CA_VALIDITY_DAYS
        )
        renewal = _int(section, "renewalDays", where, DEFAULT_CA_RENEWAL_DAYS, *_CA_RENEWAL_DAYS)
        if renewal >= validity:
            raise SpecError(
                f"{where}.renewalDays",
                f"{renewal} must be less than validityDays ({validity}): certificates would be "
                "renewed as soon as they are made",
            )
        generate = _bool(section, "generateCertificateAuthority", where, DEFAULT_CA_GENERATE)
        return cls(generate, validity, renewal)


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """An ``OdradekCluster``: its identity (for owner references) and its validated spec."""

    name: str
    namespace: str
    uid: str
    image: str | None  # None: the operator's default image (env ODRADEK_IMAGE)
    image_pull_policy: str
    zookeeper: ZooKeeperSpec
    controllers: ControllersSpec
    brokers: BrokerSpec
    ports: Ports
    restart: str  # the cluster's odradek.io/restart annotation: changing it restarts every pod
    listeners: tuple[Listener, ...] = DEFAULT_LISTENERS
    authorization: Authorization | None = None  # set (type simple) whenever secured
    cluster_ca: CaSpec = CaSpec()
    clients_ca: CaSpec = CaSpec()
    network_policies: bool = DEFAULT_NETWORK_POLICIES  # spec.networkPolicies

    @property
    def secured(self) -> bool:
        """A listener has tls or authentication: every internal listener is then mutual TLS
        with the cluster CA, the ACL authorizer is on, and the operator keeps certificates."""
        return any(listener.secured for listener in self.listeners)

    @property
    def tls_authentication(self) -> bool:
        """Some listener authenticates clients by certificate (the clients CA is mounted)."""
        return any(listener.authentication == "tls" for listener in self.listeners)

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> ClusterSpec:
        metadata = _mapping(body.get("metadata"), "metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not _DNS_1035.fullmatch(name):
            raise SpecError(
                "metadata.name",
                f"{name!r}: a cluster's name must be a DNS label (lowercase letters, digits, "
                "'-', starting with a letter)",
            )
        if len(name) > CLUSTER_NAME_MAX:
            raise SpecError(
                "metadata.name",
                f"{name!r} is {len(name)} characters; at most {CLUSTER_NAME_MAX}, so the "
                "names derived from it stay valid DNS labels",
            )
        annotations = _mapping(metadata.get("annotations"), "metadata.annotations")
        spec = _mapping(body.get("spec"), "spec")
        _only(
            spec,
            "spec",
            (
                "image",
                "imagePullPolicy",
                "zookeeper",
                "controllers",
                "brokers",
                "listeners",
                "controlPlane",
                "authorization",
                "clusterCa",
                "clientsCa",
                "metrics",
                "networkPolicies",
            ),
        )
        pull_policy = spec.get("imagePullPolicy", DEFAULT_IMAGE_PULL_POLICY)
        if pull_policy not in _PULL_POLICIES:
            raise SpecError(
                "spec.imagePullPolicy", f"{pull_policy!r}: one of {', '.join(_PULL_POLICIES)}"
            )
        listeners = _listeners(spec.get("listeners"))
        ports = _ports(spec, listeners)
        secured = any(listener.secured for listener in listeners)
        return cls(
            name=name,
            namespace=str(metadata.get("namespace") or "default"),
            uid=str(metadata.get("uid") or ""),
            image=_str(spec, "image", "spec", None),
            image_pull_policy=pull_policy,
            zookeeper=ZooKeeperSpec.parse(spec.get("zookeeper")),
            controllers=ControllersSpec.parse(spec.get("controllers")),
            brokers=_brokers(spec.get("brokers"), ports),
            ports=ports,
            restart=str(annotations.get(names.RESTART_ANNOTATION, "")),
            listeners=listeners,
            authorization=_authorization(spec.get("authorization"), secured),
            cluster_ca=CaSpec.parse(spec.get("clusterCa"), "spec.clusterCa"),
            clients_ca=CaSpec.parse(spec.get("clientsCa"), "spec.clientsCa"),
            network_policies=_bool(spec, "networkPolicies", "spec", DEFAULT_NETWORK_POLICIES),
        )
