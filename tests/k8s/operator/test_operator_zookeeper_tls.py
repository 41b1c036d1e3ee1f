"""A secured cluster's ZooKeeper takes only the cluster's principals: the operator (kopf,
in-process) makes the cluster and its certificates, the kubelet stand-in runs its pods as real
processes (three ZooKeeper servers, a controller, a broker). The ensemble forms over TLS, each
server presenting its own pod's certificate, and a peer gets in only with a certificate naming
the pod it connects from (not a broker's, not the ZooKeeper client identity, though all three
are the cluster CA's); a plaintext client, and TLS clients with
certificates from the clients CA or another CA, are refused; the brokers' znodes carry ACLs
that only the cluster's ZooKeeper identity may use (another cluster-CA certificate reads but
cannot write); the cluster serves produce and consume."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import re
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.handlers.threading import KazooTimeoutError

from odradek_operator import names
from odradek_operator.pki import CertificateAuthority, issue_leaf, make_ca
from odradek_operator.pki.secrets import decode
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import OperatorThread, operator_session, ready, wait_for
from support.waiting import wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(300)]

NAMESPACE = "zk-tls"
ZOOKEEPERS = 3
READY_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 5.0
PEER_VERDICT_S = 2.0  # a refused peer certificate ends the connection well within this
RECORDS = 20
TOPIC = "behind-acls"
NOW = datetime.datetime.now(datetime.UTC)
ZK = names.Component.ZOOKEEPER
CLIENT_ID = "CN=demo-zookeeper-client,O=odradek.io"  # as ZooKeeper's x509 provider names it
CLIENT_PORT = 9092
USER = "zk-tls-test"  # a clients-CA certificate, a super user: the test's Kafka client
CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo"},
    "spec": {
        "image": "odradek:test",
        "listeners": [
            {"name": "tls", "port": CLIENT_PORT, "tls": True, "authentication": {"type": "tls"}}
        ],
        "authorization": {"type": "simple", "superUsers": [f"User:{USER}"]},
        "zookeeper": {"replicas": ZOOKEEPERS},
        "controllers": {"replicas": 1},
        "brokers": {
            "replicas": 1,
            "config": {
                "min.insync.replicas": 1,
                "default.replication.factor": 1,
                "offsets.topic.replication.factor": 1,
                "transaction.state.log.replication.factor": 1,
                "transaction.state.log.min.isr": 1,
            },
        },
    },
}


@dataclasses.dataclass
class Secured:
    kubelet: KubeletStandIn
    files: dict[str, Path]  # PEM files for the test's own clients

    def pod_ip(self, pod: str) -> str:
        return self.kubelet.pod_ip(f"{NAMESPACE}/{pod}")

    def log(self, pod: str) -> str:
        return self.kubelet.log(f"{NAMESPACE}/{pod}")

    @property
    def zookeeper_host(self) -> str:
        return names.service_host(names.zookeeper_client_service("demo"), NAMESPACE)

    def bootstrap(self) -> str:
        return f"{names.pod_host('demo', names.Component.BROKER, 0, NAMESPACE)}:{CLIENT_PORT}"

    def kafka(self) -> dict[str, object]:
        """kafka-python's settings for the tls listener as the test's user (kafka-python
        resolves through the stand-in's DNS in this process; librdkafka would not)."""
        return {
            "bootstrap_servers": self.bootstrap(),
            "security_protocol": "SSL",
            "ssl_cafile": str(self.files["ca"]),
            "ssl_certfile": str(self.files[USER]),
            "ssl_keyfile": str(self.files[USER]),
        }


def secret_data(store, name: str) -> dict[str, str]:
    found = store.try_get("secrets", NAMESPACE, name)
    assert found is not None, f"Secret {name} not made"
    return decode(found)


def write(path: Path, pem: str) -> Path:
    path.write_text(pem)
    return path


def cluster_ready(store) -> bool:
    return ready(store.try_get("odradekclusters", NAMESPACE, "demo"))


@pytest.fixture(scope="module")
def secured(kube_api, kubeconfig, tmp_path_factory) -> Iterator[Secured]:
    """The operator (kopf, in-process) makes the secured cluster, its certificates included."""
    store = kube_api.store
    with (
        operator_session(
            kube_api,
            kubeconfig,
            tmp_path_factory.mktemp("kubelet"),
            namespaces=[NAMESPACE],
            purge_namespace=NAMESPACE,
        ) as session,
        OperatorThread(session.ctx, NAMESPACE),
    ):
        store.create("odradekclusters", NAMESPACE, copy.deepcopy(CLUSTER))
        try:
            wait_for(
                lambda: cluster_ready(store), READY_TIMEOUT_S, "the secured cluster Ready", 0.5
            )
        except AssertionError:
            cluster = store.try_get("odradekclusters", NAMESPACE, "demo")
            logs = {
                p: session.kubelet.log(f"{NAMESPACE}/{p}")[-1500:]
                for p in ("demo-zookeeper-0", "demo-controller-0", "demo-broker-0")
            }
            raise AssertionError(f"not Ready: {cluster.get('status')}\n{logs}") from None
        # The test's clients' certificates: the operator's own Secrets, and others it signs
        # with the CAs' keys (as a user with access to them could).
        root = tmp_path_factory.mktemp("zk-tls-clients")
        trust = secret_data(store, names.cluster_ca_cert_secret("demo"))["ca.crt"]
        clients_ca = CertificateAuthority.load(
            secret_data(store, names.clients_ca_cert_secret("demo"))["ca.crt"],
            secret_data(store, names.clients_ca_key_secret("demo"))["ca.key"],
        )
        identity = secret_data(store, names.zookeeper_client_certs_secret("demo"))
        broker = secret_data(store, names.certs_secret("demo", names.Component.BROKER))
        zookeeper = secret_data(store, names.certs_secret("demo", ZK))
        other_ca = make_ca("elsewhere", now=NOW, validity_days=30)

        def user(ca: CertificateAuthority, name: str) -> str:
            return issue_leaf(
                ca, name, now=NOW, validity_days=30, server_auth=False, organization=None
            ).keystore_pem

        files = {
            "ca": write(root / "ca.crt", trust),
            "cluster identity": write(root / "client.pem", identity[names.ZOOKEEPER_CLIENT_PEM]),
            "zookeeper-0 certificate": write(root / "zk0.pem", zookeeper["demo-zookeeper-0.pem"]),
            # a broker's own certificate: the cluster CA's, but not the ZooKeeper identity
            "broker certificate": write(root / "broker.pem", broker["demo-broker-0.pem"]),
            "user of the clients CA": write(root / "alice.pem", user(clients_ca, "alice")),
            USER: write(root / "user.pem", user(clients_ca, USER)),
            "another CA": write(root / "mallory.pem", user(other_ca, "mallory")),
        }
        with session.kubelet.resolver():
            yield Secured(session.kubelet, files)


def kazoo(secured: Secured, who: str | None, chroot: str = names.ZOOKEEPER_CHROOT) -> KazooClient:
    """A started client; ``who`` is a key of ``secured.files`` (None: plaintext)."""
    tls = {}
    if who is not None:
        pem = str(secured.files[who])
        tls = {"use_ssl": True, "ca": str(secured.files["ca"]), "certfile": pem, "keyfile": pem}
        tls["check_hostname"] = True
    client = KazooClient(
        f"{secured.zookeeper_host}:{names.ZOOKEEPER_CLIENT_PORT}{chroot}",
        timeout=CONNECT_TIMEOUT_S,
        connection_retry={"max_tries": 1, "delay": 0.1},
        **tls,
    )
    try:
        client.start(timeout=CONNECT_TIMEOUT_S)
    except BaseException:
        client.stop()
        client.close()
        raise
    return client


@pytest.fixture
def owner(secured) -> Iterator[KazooClient]:
    client = kazoo(secured, "cluster identity")
    try:
        yield client
    finally:
        client.stop()
        client.close()


def srvr_over_tls(secured: Secured, pod: str) -> str:
    """ZooKeeper's ``srvr`` on a server's TLS client port, its certificate checked for its pod."""
    context = ssl.create_default_context(cafile=str(secured.files["ca"]))
    pem = str(secured.files["cluster identity"])
    context.load_cert_chain(pem, pem)
    host = names.pod_host("demo", ZK, names.ordinal_of(pod), NAMESPACE)
    address = (secured.pod_ip(pod), names.ZOOKEEPER_CLIENT_PORT)
    with (
        socket.create_connection(address, timeout=CONNECT_TIMEOUT_S) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(b"srvr")
        chunks = []
        while chunk := tls.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_the_ensemble_forms_over_tls_each_server_with_its_own_certificate(secured):
    def modes() -> list[str] | None:
        try:
            replies = [srvr_over_tls(secured, names.pod("demo", ZK, n)) for n in range(ZOOKEEPERS)]
        except OSError:
            return None
        found = [re.search(r"Mode: (\w+)", reply) for reply in replies]
        return sorted(m[1] for m in found if m) if all(found) else None

    assert wait_until(modes, "three servers serving", READY_TIMEOUT_S) == [
        "follower",
        "follower",
        "leader",
    ]
    for n in range(ZOOKEEPERS):
        log = secured.log(names.pod("demo", ZK, n))
        assert "Creating TLS-only quorum server socket" in log, log[-2000:]


def election_handshake(secured: Secured, source_pod: str, target_pod: str, who: Path) -> str:
    """Connect to ``target_pod``'s election port (3888) as a peer would from ``source_pod``'s
    address, presenting ``who``: "accepted" (the server waits for the election message),
    "refused" (it ended the connection over the certificate). The server's certificate must
    name ``target_pod`` either way (the handshake checks it)."""
    context = ssl.create_default_context(cafile=str(secured.files["ca"]))
    context.load_cert_chain(str(who), str(who))
    host = names.pod_host("demo", ZK, names.ordinal_of(target_pod), NAMESPACE)
    raw = socket.create_connection(
        (secured.pod_ip(target_pod), names.ZOOKEEPER_ELECTION_PORT),
        timeout=CONNECT_TIMEOUT_S,
        source_address=(secured.pod_ip(source_pod), 0),
    )
    try:
        try:
            tls = context.wrap_socket(raw, server_hostname=host)
        except ssl.SSLCertVerificationError:
            raise  # the server's certificate does not name its pod: the test fails
        except (ssl.SSLError, ConnectionError):
            return "refused"  # TLS 1.2: the server's verdict on our certificate, in the handshake
        with tls:
            tls.settimeout(PEER_VERDICT_S)
            try:
                return "refused" if tls.recv(1) == b"" else "accepted"
            except TimeoutError:
                return "accepted"  # waiting for our side of the election protocol
            except (ssl.SSLError, ConnectionError):
                return "refused"  # TLS 1.3: the verdict comes after the handshake
    finally:
        raw.close()


def test_only_a_certificate_naming_the_peers_pod_joins_the_quorum(secured):
    # the host name check is of the address the peer connects from (its pod's)
    zk0, zk1 = names.pod("demo", ZK, 0), names.pod("demo", ZK, 1)
    own = secured.files["zookeeper-0 certificate"]
    assert election_handshake(secured, zk0, zk1, own) == "accepted"
    for who in ("broker certificate", "cluster identity"):  # the cluster CA's, other names
        assert election_handshake(secured, zk0, zk1, secured.files[who]) == "refused", who
    # the right certificate from another pod's address is refused too
    assert election_handshake(secured, "demo-broker-0", zk1, own) == "refused"


def test_a_plaintext_client_gets_no_answer(secured):
    address = (secured.pod_ip("demo-zookeeper-0"), names.ZOOKEEPER_CLIENT_PORT)
    with socket.create_connection(address, timeout=CONNECT_TIMEOUT_S) as raw:
        raw.sendall(b"srvr")
        reply = b""
        try:
            while chunk := raw.recv(4096):
                reply += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    assert b"Zookeeper version" not in reply
    with pytest.raises(KazooTimeoutError):
        kazoo(secured, None)


@pytest.mark.parametrize("who", ["user of the clients CA", "another CA"])
def test_a_certificate_not_from_the_cluster_ca_is_refused(secured, who):
    with pytest.raises(KazooTimeoutError):
        kazoo(secured, who)


def create_topic(secured: Secured, topic: str) -> None:
    admin = KafkaAdminClient(**secured.kafka())
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def test_the_brokers_znodes_carry_acls_only_the_cluster_identity_may_use(secured, owner):
    create_topic(secured, TOPIC)
    for path in ("/brokers/ids/0", "/controller", f"/brokers/topics/{TOPIC}"):
        acls, _ = owner.get_acls(path)
        assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
            ("x509", CLIENT_ID, 31),  # CREATOR_ALL: the cluster's identity
            ("world", "anyone", 1),  # READ
        }, path
    acls, _ = owner.get_acls("/config/users")  # credentials: not even world READ
    assert {(a.id.scheme, a.id.id) for a in acls} == {("x509", CLIENT_ID)}
    # the chroot itself is the cluster's too
    root = kazoo(secured, "cluster identity", chroot="")
    try:
        acls, _ = root.get_acls(names.ZOOKEEPER_CHROOT)
    finally:
        root.stop()
        root.close()
    assert ("x509", CLIENT_ID, 31) in {(a.id.scheme, a.id.id, a.perms) for a in acls}

    other = kazoo(secured, "broker certificate")  # the cluster CA's, another subject
    try:
        assert b"partitions" in other.get(f"/brokers/topics/{TOPIC}")[0]
        with pytest.raises(NoAuthError):
            other.set(f"/brokers/topics/{TOPIC}", b"{}")
        with pytest.raises(NoAuthError):
            other.delete("/controller")
        with pytest.raises(NoAuthError):
            other.create("/brokers/topics/planted", b"{}")
        with pytest.raises(NoAuthError):
            other.get("/config/users")
    finally:
        other.stop()
        other.close()


def test_the_cluster_serves_produce_and_consume(secured):
    topic = "works"
    create_topic(secured, topic)
    producer = KafkaProducer(acks="all", **secured.kafka())
    try:
        futures = [producer.send(topic, b"%d" % i, partition=0) for i in range(RECORDS)]
        producer.flush(30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, **secured.kafka())
    seen: set[int] = set()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + 30
        while len(seen) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.update(int(record.value) for record in records)
    finally:
        consumer.close()
    assert seen == set(range(RECORDS))
