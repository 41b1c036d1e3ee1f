"""The certificate pass keeps the brokers' and controllers' one ZooKeeper identity: a client
certificate of the cluster CA in its own Secret, what ZooKeeper's ACLs name; both components'
pod hashes cover it, so a new one rolls brokers and controllers, not ZooKeeper."""

from __future__ import annotations

import asyncio
import datetime

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from odradek_operator import names
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.pki import signed_by
from odradek_operator.pki.secrets import decode
from odradek_operator.reconcile.certificates import pod_hash, reconcile_certificates
from support.operator_doubles import FakeKube

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
C = names.Component
BODY = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo", "namespace": "ns", "uid": "u1"},
    "spec": {
        "listeners": [{"name": "tls", "port": 9092, "tls": True}],
        "zookeeper": {"replicas": 1},
        "controllers": {"replicas": 1},
        "brokers": {"replicas": 3},
    },
}


def run(kube: FakeKube, now: datetime.datetime = NOW):
    return asyncio.run(reconcile_certificates(kube, ClusterSpec.from_resource(BODY), now))


def secret(kube: FakeKube, name: str) -> dict:
    found = kube.find("Secret", name)
    assert found is not None, name
    return found


def test_the_zookeeper_client_identity_is_made_with_the_other_certificates():
    kube = FakeKube()
    kube.put(BODY)
    certificates = run(kube)
    zk_secret = secret(kube, "demo-zookeeper-client-certs")
    data = decode(zk_secret)
    assert sorted(data) == ["ca.crt", names.ZOOKEEPER_CLIENT_PEM]
    pem = data[names.ZOOKEEPER_CLIENT_PEM]
    assert pem.startswith("-----BEGIN PRIVATE KEY-----")  # key then certificate, as the others
    cert = x509.load_pem_x509_certificate(pem[pem.index("-----BEGIN CERTIFICATE") :].encode())
    assert cert.subject.rfc4514_string() == "CN=demo-zookeeper-client,O=odradek.io"
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cluster_ca = decode(secret(kube, "demo-cluster-ca-cert"))["ca.crt"]
    assert signed_by(pem, cluster_ca) and data["ca.crt"] == cluster_ca
    assert zk_secret["metadata"]["ownerReferences"][0]["uid"] == "u1"
    zk_hash = zk_secret["metadata"]["annotations"][names.CERTIFICATES_HASH_ANNOTATION]
    own = {
        c: secret(kube, names.certs_secret("demo", c))["metadata"]["annotations"][
            names.CERTIFICATES_HASH_ANNOTATION
        ]
        for c in C
    }
    assert certificates.hashes[C.ZOOKEEPER] == own[C.ZOOKEEPER]  # ZooKeeper does not mount it
    for c in (C.BROKER, C.CONTROLLER):
        assert certificates.hashes[c] == pod_hash(c, own[c], zk_hash) != own[c]
    entry = {e["certificate"]: e for e in certificates.status}["zookeeper-client"]
    assert entry["secret"] == "demo-zookeeper-client-certs" and entry["notAfter"]


def test_a_new_identity_rolls_brokers_and_controllers_but_not_zookeeper():
    kube = FakeKube()
    kube.put(BODY)
    first = run(kube)
    assert run(kube).hashes == first.hashes  # nothing due: nothing changes
    # the identity alone is made again (its Secret was lost)
    del kube.objects[("Secret", "ns", "demo-zookeeper-client-certs")]
    again = run(kube)
    assert again.hashes[C.ZOOKEEPER] == first.hashes[C.ZOOKEEPER]
    for c in (C.BROKER, C.CONTROLLER):
        assert again.hashes[c] != first.hashes[c], c
