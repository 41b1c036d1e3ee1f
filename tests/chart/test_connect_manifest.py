"""manifests/connect.yaml on the docs' secured cluster (manifests/cluster-minimal.yaml): the
OdradekConnect's workers authenticate as the file's OdradekUser on the cluster's scram listener,
and that user's ACLs cover what a worker touches (its group, its config/offset/status topics,
the source connector's topic, which the file declares), as docs/kubernetes.md lists them."""

from __future__ import annotations

import yaml

from odradek.security.acl import AclOperation, ResourceType
from odradek_operator import names
from odradek_operator.model import connect
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.users import UserSpec
from support.chart import MANIFESTS, documents

NAMESPACE = "odradek"


def resources(name: str) -> dict[tuple[str, str], dict]:
    out = {}
    for doc in documents((MANIFESTS / name).read_text()):
        doc = {**doc, "metadata": {**doc["metadata"], "namespace": NAMESPACE, "uid": "u"}}
        out[doc["kind"], doc["metadata"]["name"]] = doc
    return out


def allowed(user: UserSpec, kind: ResourceType, name: str, operation: AclOperation) -> bool:
    for binding in user.acls:
        pattern = binding.pattern
        if pattern.resource_type != kind or binding.entry.operation not in (
            operation,
            AclOperation.ALL,
        ):
            continue
        if pattern.pattern_type.name == "LITERAL" and pattern.name in (name, "*"):
            return True
        if pattern.pattern_type.name == "PREFIXED" and name.startswith(pattern.name):
            return True
    return False


def test_the_connect_manifest_works_on_the_secured_cluster() -> None:
    objs = resources("connect.yaml")
    spec = connect.ConnectSpec.from_resource(objs["OdradekConnect", "sync"])
    cluster_body = yaml.safe_load((MANIFESTS / "cluster-minimal.yaml").read_text())
    cluster = ClusterSpec.from_resource(
        {**cluster_body, "metadata": {**cluster_body["metadata"], "namespace": NAMESPACE}}
    )
    assert spec.cluster_ref == cluster.name
    security = spec.security.for_cluster(cluster)
    assert security.protocol == "SASL_SSL"
    (trusted,) = security.trusted_sources()
    assert trusted.secret == names.cluster_ca_cert_secret(cluster.name)
    # The user it names is in the file, of this cluster, with the authentication it uses.
    user = UserSpec.from_resource(objs["OdradekUser", spec.security.username])
    assert user.cluster == cluster.name and user.authentication == spec.security.authentication
    assert spec.security.password is not None
    assert spec.security.password.secret == user.name  # the Secret the operator writes for it
    props = connect.worker_properties(spec, "b:9092", security)
    group = props["group.id"]
    assert allowed(user, ResourceType.GROUP, group, AclOperation.READ)
    for key in ("config.storage.topic", "offset.storage.topic", "status.storage.topic"):
        for operation in ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"):
            assert allowed(user, ResourceType.TOPIC, props[key], AclOperation[operation]), (
                key,
                operation,
            )
    connector = connect.ConnectorSpec.from_resource(objs["OdradekConnector", "lines-source"])
    topic = connector.config["topic"]
    assert allowed(user, ResourceType.TOPIC, topic, AclOperation.WRITE)
    assert objs["OdradekTopic", topic]["spec"]["cluster"] == cluster.name
