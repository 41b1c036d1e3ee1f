"""Brokers and the controller reach ZooKeeper over mutual TLS with ``zookeeper.set.acl=true``:
the znodes they create are writable only by the cluster's own certificate, so a ZooKeeper
client without it cannot change the cluster's metadata behind its ACLs.

One local cluster for the module (ZooKeeper with a TLS port besides its plain one, a controller,
one broker), all certificates from one CA (trustme): ``zookeeper`` for the server, ``cluster``
shared by the broker and the controller (Kafka's rule: every broker one ZooKeeper identity),
``mallory`` for an outsider. The outsider tries over TLS with its own certificate and over the
plain port (no identity at all).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import serialization
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from odradek.config.zookeeper_tls import CNXN_SOCKET_NETTY
from odradek.local.cluster import ZK_CHROOT
from odradek.local.zookeeper import ZooKeeperTls, free_loopback_port

pytestmark = pytest.mark.integration

WAIT_S = 30.0
RECORDS = 50
TOPIC = "behind-acls"


def _keystore(cert: trustme.LeafCert, path: Path) -> Path:
    # ZooKeeper's PEM key store reads PKCS#8 keys: re-encode trustme's.
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pkcs8 + b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zk-pki")
    ca = trustme.CA(organization_name="Odradek tests", key_type=trustme.KeyType.RSA)
    files = {"ca": root / "ca.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    for name in ("zookeeper", "cluster", "mallory"):
        cert = ca.issue_cert("127.0.0.1", common_name=name, key_type=trustme.KeyType.RSA)
        files[name] = _keystore(cert, root / f"{name}.pem")
    return files


@pytest.fixture(scope="module")
def cluster(pki, local_cluster, tmp_path_factory):
    secure_port = free_loopback_port()
    zk_client = {
        "zookeeper.connect": f"127.0.0.1:{secure_port}{ZK_CHROOT}",
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": CNXN_SOCKET_NETTY,
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.keystore.location": str(pki["cluster"]),
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(pki["ca"]),
        "zookeeper.set.acl": "true",
    }
    with local_cluster(
        tmp_path_factory.mktemp("zk-tls-cluster"),
        brokers=1,
        broker_overrides=zk_client,
        controller_overrides=zk_client,
        zookeeper_tls=ZooKeeperTls(pki["zookeeper"], pki["ca"], secure_port=secure_port),
    ) as state:
        yield state, secure_port


def _kazoo(hosts: str, keystore: Path | None = None, ca: Path | None = None) -> KazooClient:
    tls = {}
    if keystore is not None:
        tls = {
            "use_ssl": True,
            "ca": str(ca),
            "certfile": str(keystore),
            "keyfile": str(keystore),
            "check_hostname": True,
        }
    client = KazooClient(hosts, timeout=10.0, **tls)
    client.start(timeout=10.0)
    return client


@pytest.fixture(scope="module")
def outsiders(cluster, pki) -> Iterator[dict[str, KazooClient]]:
    state, secure_port = cluster
    clients = {
        "mallory over TLS": _kazoo(
            f"127.0.0.1:{secure_port}{ZK_CHROOT}", pki["mallory"], pki["ca"]
        ),
        "anyone in plaintext": _kazoo(state.zookeeper_connect),
        # the cluster's own identity, to read what sensitive nodes hide from the others
        "owner": _kazoo(f"127.0.0.1:{secure_port}{ZK_CHROOT}", pki["cluster"], pki["ca"]),
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            client.stop()
            client.close()


@pytest.fixture(scope="module")
def topic(cluster, outsiders) -> str:
    state, _ = cluster
    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=WAIT_S)
    return TOPIC


def test_the_cluster_works_over_tls_with_secure_acls(cluster, topic):
    state, _ = cluster
    producer = Producer({"bootstrap.servers": state.bootstrap_servers, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, b"%d" % i)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": state.bootstrap_servers,
            "group.id": "zk-tls",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    values: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(int(message.value()))
    finally:
        consumer.close()
    assert values == set(range(RECORDS))


def test_znodes_belong_to_the_clusters_certificate(outsiders, topic):
    client = outsiders["owner"]
    for path in (f"/brokers/topics/{topic}", "/controller", "/brokers/ids/1"):
        acls, _ = client.get_acls(path)
        ids = {(acl.id.scheme, acl.id.id.split(",")[0], acl.perms) for acl in acls}
        assert ids == {("x509", "CN=cluster", 31), ("world", "anyone", 1)}, path
    acls, _ = client.get_acls("/config/users")
    assert {(acl.id.scheme, acl.id.id.split(",")[0]) for acl in acls} == {("x509", "CN=cluster")}


@pytest.mark.parametrize("who", ["mallory over TLS", "anyone in plaintext"])
def test_an_outsider_reads_but_cannot_write(outsiders, topic, who):
    client = outsiders[who]
    data, _ = client.get(f"/brokers/topics/{topic}")
    assert b"partitions" in data
    assert client.get("/controller")[0]
    for path in (f"/brokers/topics/{topic}", "/controller"):
        with pytest.raises(NoAuthError):
            client.set(path, b"{}")
        with pytest.raises(NoAuthError):
            client.delete(path, recursive=False)
    with pytest.raises(NoAuthError):
        client.create("/brokers/topics/planted", b"{}")
    with pytest.raises(NoAuthError):
        client.create("/admin/delete_topics/" + topic, b"")


@pytest.mark.parametrize("who", ["mallory over TLS", "anyone in plaintext"])
def test_an_outsider_cannot_read_credentials(outsiders, who):
    client = outsiders[who]
    with pytest.raises(NoAuthError):
        client.get("/config/users")
    with pytest.raises(NoAuthError):
        client.get_children("/config/users")
    with pytest.raises(NoAuthError):
        client.get_acls("/config/users")  # ZooKeeper 3.6+: READ or ADMIN needed
