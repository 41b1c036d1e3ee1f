"""A secured OdradekCluster end to end: kopf in-process against the test API server, the kubelet
stand-in running ZooKeeper, a controller and three brokers as real processes, real TLS with the
certificates the operator made. One cluster for the module, in order: it becomes Ready with its
CAs, leaf Secrets (SANs of each pod's DNS names) and expiries in status; a client with a
certificate of the clients CA and a SCRAM-SHA-512 client produce and consume, a plaintext client
and a client of another CA are refused; a broker certificate near its expiry is re-issued and
the brokers roll one at a time under acks=all load, losing no acknowledged record. A second
cluster brings its own CA: refused in status until the user's Secrets exist, then its leaves
are the user's CA's."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import hashlib
import secrets as random_secrets
import socket
import ssl
import struct
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.errors import ClusterUnreachableError
from odradek.client.security import ClientSecurity, SaslCredentials
from odradek_operator import metrics, names
from odradek_operator.pki import certs, secrets
from odradek_operator.reconcile.admin import AdminTls, OpsAdmin
from odradek_operator.reconcile.certificates import pod_hash
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import OperatorThread, condition, operator_session, ready, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = "tls"
READY_TIMEOUT_S = 150.0
TOPIC = "secured-events"
CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "sec"},
    "spec": {
        "image": "odradek:test",
        "zookeeper": {"replicas": 1, "storage": {"size": "1Gi"}},
        "controllers": {"replicas": 1},
        "brokers": {
            "replicas": 3,
            "config": {
                "min.insync.replicas": 2,
                "default.replication.factor": 3,
                "offsets.topic.num.partitions": 3,
            },
        },
        "listeners": [
            {"name": "tls", "port": 9092, "tls": True, "authentication": {"type": "tls"}},
            {
                "name": "scram",
                "port": 9095,
                "tls": True,
                "authentication": {"type": "scram-sha-512"},
            },
        ],
        "authorization": {"type": "simple", "superUsers": ["User:alice", "User:bob"]},
    },
}


class Secured:
    def __init__(self, store, kubelet: KubeletStandIn, workdir: Path) -> None:
        self.store = store
        self.kubelet = kubelet
        self.workdir = workdir

    def get(self, plural="odradekclusters", name="sec", namespace=NAMESPACE):
        return self.store.try_get(plural, namespace, name)

    def secret(self, name: str, namespace: str = NAMESPACE) -> dict[str, str]:
        return secrets.decode(self.store.try_get("secrets", namespace, name))

    def ready(self, name="sec", namespace=NAMESPACE) -> bool:
        cluster = self.get(name=name, namespace=namespace)
        return ready(cluster) and cluster["status"]["operation"]["type"] == "Idle"

    def wait_ready(self, name="sec", namespace=NAMESPACE, timeout_s=READY_TIMEOUT_S) -> dict:
        wait_for(
            lambda: self.ready(name, namespace),
            timeout_s,
            f"cluster Ready: {(self.get(name=name, namespace=namespace) or {}).get('status')}",
            0.5,
        )
        return self.get(name=name, namespace=namespace)

    def bootstrap(self, port: int) -> list[str]:
        return [f"sec-broker-{i}.sec-broker-nodes.{NAMESPACE}.svc:{port}" for i in range(3)]

    def write(self, name: str, text: str) -> str:
        path = self.workdir / name
        path.write_text(text)
        return str(path)

    def client_context(self, keystore_pem: str | None) -> ssl.SSLContext:
        trust = self.secret("sec-cluster-ca-cert")["ca.crt"]
        context = ssl.create_default_context(cadata=trust)
        if keystore_pem is not None:
            path = self.write(
                f"client-{hashlib.sha256(keystore_pem.encode()).hexdigest()[:8]}.pem", keystore_pem
            )
            context.load_cert_chain(path)
        return context

    def user_keystore(self, user: str, ca: certs.CertificateAuthority | None = None) -> str:
        if ca is None:
            ca = secrets.read_ca(self.secret("sec-clients-ca-cert"), self.secret("sec-clients-ca"))
        now = datetime.datetime.now(datetime.UTC)
        leaf = certs.issue_leaf(
            ca, user, now=now, validity_days=1, server_auth=False, organization=None
        )
        return leaf.keystore_pem


@pytest.fixture(scope="module")
def secured(kube_api, kubeconfig, tmp_path_factory):
    kubelet_dir = tmp_path_factory.mktemp("kubelet")
    with (
        operator_session(kube_api, kubeconfig, kubelet_dir, namespaces=[NAMESPACE]) as session,
        session.kubelet.resolver(),  # the operator and the clients resolve the pods' DNS names
        OperatorThread(session.ctx, NAMESPACE),
    ):
        kube_api.store.create("odradekclusters", NAMESPACE, copy.deepcopy(CLUSTER))
        yield Secured(kube_api.store, session.kubelet, tmp_path_factory.mktemp("tls-clients"))


def leaf_certificate(keystore_pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(
        keystore_pem[keystore_pem.index("-----BEGIN CERTIFICATE-----") :].encode()
    )


def test_secured_cluster_becomes_ready_with_its_certificates(secured):
    started = time.monotonic()
    cluster = secured.wait_ready()
    entries = {e["certificate"]: e for e in cluster["status"]["certificates"]}
    assert set(entries) == {
        "cluster-ca",
        "clients-ca",
        "broker",
        "controller",
        "zookeeper",
        "operator",
        "zookeeper-client",
    }
    assert all(e["notAfter"] for e in entries.values())
    brokers = secured.secret("sec-broker-certs")
    assert set(brokers) == {f"sec-broker-{i}.pem" for i in range(3)} | {"ca.crt", "clients-ca.crt"}
    cert = leaf_certificate(brokers["sec-broker-1.pem"])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = sans.get_values_for_type(x509.DNSName)
    assert "sec-broker-1.sec-broker-nodes" in dns
    assert f"sec-broker-1.sec-broker-nodes.{NAMESPACE}.svc.cluster.local" in dns
    assert f"sec-bootstrap.{NAMESPACE}.svc" in dns
    assert cert.subject.rfc4514_string() == "CN=sec-broker,O=odradek.io"
    ca = secured.secret("sec-cluster-ca-cert")["ca.crt"]
    assert certs.signed_by(
        brokers["sec-broker-1.pem"][
            brokers["sec-broker-1.pem"].index("-----BEGIN CERTIFICATE-----") :
        ],
        ca,
    )
    assert set(secured.secret("sec-operator-certs")) == {"operator.pem", "ca.crt"}
    gauge = metrics.REGISTRY.get_sample_value(
        "odradek_operator_certificate_expiry_timestamp_seconds",
        {"cluster": "sec", "namespace": NAMESPACE, "certificate": "broker"},
    )
    assert gauge and gauge > time.time()
    print(f"secured cluster ready in {time.monotonic() - started:.1f}s")


def produce_consume(secured, context: ssl.SSLContext, port: int, tag: str, **sasl) -> None:
    protocol = "SASL_SSL" if sasl else "SSL"
    common = dict(
        bootstrap_servers=secured.bootstrap(port),
        security_protocol=protocol,
        ssl_context=context,
        request_timeout_ms=20000,
        **sasl,
    )
    producer = KafkaProducer(acks="all", **common)
    try:
        for i in range(5):
            producer.send(TOPIC, f"{tag}-{i}".encode()).get(timeout=30)
    finally:
        producer.close(timeout=10)
    expected = {f"{tag}-{i}" for i in range(5)}
    assert expected <= consume(common, expected)


def consume(common: dict, expected: set[str], timeout_s: float = 20.0) -> set[str]:
    """Every value of TOPIC read from the beginning until ``expected`` is seen (or timeout)."""
    consumer = KafkaConsumer(auto_offset_reset="earliest", **common)
    seen: set[str] = set()
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while not expected <= seen and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.update(r.value.decode() for r in records)
    finally:
        consumer.close()
    return seen


def test_a_client_certificate_of_the_clients_ca_produces_and_consumes(secured):
    secured.wait_ready()
    alice = secured.client_context(secured.user_keystore("alice"))
    admin = KafkaAdminClient(
        bootstrap_servers=secured.bootstrap(9092), security_protocol="SSL", ssl_context=alice
    )
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    produce_consume(secured, alice, 9092, "alice")


def api_versions_answered(host_port: str, context: ssl.SSLContext | None) -> bool:
    """True when the listener answers an ApiVersions v0 request from this client: a plaintext
    client on a TLS port, or a certificate the listener does not trust, gets no answer (the
    connection is closed or the handshake fails), within a few seconds."""
    host, port = host_port.rsplit(":", 1)
    client_id = b"tls-test"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            sock = context.wrap_socket(raw, server_hostname=host) if context else raw
            with sock:
                sock.sendall(struct.pack(">i", len(body)) + body)
                header = sock.recv(8)
    except (ssl.SSLError, OSError):
        return False
    return len(header) == 8 and struct.unpack(">ii", header)[1] == 7


def test_a_plaintext_client_and_a_stranger_are_refused(secured):
    secured.wait_ready()
    tls_port, internal = secured.bootstrap(9092)[0], secured.bootstrap(names.INTERNAL_PORT)[0]
    alice = secured.client_context(secured.user_keystore("alice"))
    assert api_versions_answered(tls_port, alice)  # the control: alice gets in
    assert not api_versions_answered(tls_port, None)  # plaintext
    now = datetime.datetime.now(datetime.UTC)
    stranger_ca = certs.make_ca("stranger", now=now, validity_days=2)
    stranger = secured.client_context(secured.user_keystore("alice", stranger_ca))
    assert not api_versions_answered(tls_port, stranger)
    # INTERNAL takes only the cluster CA's certificates: a clients-CA user is out, the operator in.
    assert not api_versions_answered(internal, alice)
    operator = secured.secret("sec-operator-certs")["operator.pem"]
    assert api_versions_answered(internal, secured.client_context(operator))


async def _set_scram(tls: AdminTls, bootstrap: str, user: str, password: str) -> None:
    salt = random_secrets.token_bytes(16)
    iterations = 4096
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)

    def make(request_type):
        upsertion = element_type(request_type, "upsertions")
        return build(
            request_type,
            deletions=(),
            upsertions=(
                upsertion(
                    name=user, mechanism=2, iterations=iterations, salt=salt, salted_password=salted
                ),
            ),
        )

    async with ClusterClient(bootstrap, security=OpsAdmin(bootstrap, tls).security) as client:
        response = await client.send_any(51, 0, make)
    assert [int(r.error_code) for r in response.results] == [0]


def test_a_scram_user_produces_and_consumes(secured):
    secured.wait_ready()
    operator_certs = secured.secret("sec-operator-certs")
    tls = AdminTls.of(operator_certs["operator.pem"], operator_certs["ca.crt"])
    bootstrap = ",".join(secured.bootstrap(names.INTERNAL_PORT))
    password = random_secrets.token_urlsafe(24)
    asyncio.run(_set_scram(tls, bootstrap, "bob", password))
    context = secured.client_context(None)
    sasl = dict(
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password=password
    )
    deadline = time.monotonic() + 30  # the credential reaches every broker by a notification
    while True:
        try:
            produce_consume(secured, context, 9095, "bob", **sasl)
            break
        except (KafkaError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    # A wrong password is refused (Odradek's own client: the broker's answer, not a timeout).
    wrong = ClientSecurity(context, SaslCredentials("SCRAM-SHA-512", "bob", "not-" + password))

    async def metadata_with_wrong_password() -> None:
        async with ClusterClient(secured.bootstrap(9095)[0], security=wrong) as client:
            await client.send_any(3, 1, lambda t: build(t, topics=None))

    with pytest.raises(ClusterUnreachableError, match="SASL authentication failed"):
        asyncio.run(metadata_with_wrong_password())


def test_a_broker_certificate_near_expiry_is_reissued_and_rolled_safely(secured):
    secured.wait_ready()
    store = secured.store
    before = store.try_get("secrets", NAMESPACE, "sec-broker-certs")
    old_hash = before["metadata"]["annotations"][names.CERTIFICATES_HASH_ANNOTATION]
    data = secrets.decode(before)
    ca = secrets.read_ca(secured.secret("sec-cluster-ca-cert"), secured.secret("sec-cluster-ca"))
    now = datetime.datetime.now(datetime.UTC)
    pem = data["sec-broker-0.pem"]
    sans = leaf_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    # Broker 0's certificate as it would be 29 days before its end: valid, but due for renewal.
    short = certs.issue_leaf(
        ca,
        "sec-broker",
        now=now,
        validity_days=2,
        dns_names=sans.value.get_values_for_type(x509.DNSName),
    )
    store.patch(
        "secrets",
        NAMESPACE,
        "sec-broker-certs",
        {"data": {"sec-broker-0.pem": base64.b64encode(short.keystore_pem.encode()).decode()}},
    )

    alice = secured.client_context(secured.user_keystore("alice"))
    acked: list[str] = []
    stop = threading.Event()

    def load() -> None:
        producer = KafkaProducer(
            bootstrap_servers=secured.bootstrap(9092),
            security_protocol="SSL",
            ssl_context=alice,
            acks="all",
            retries=50,
            request_timeout_ms=15000,
        )
        try:
            i = 0
            while not stop.is_set():
                value = f"roll-{i}"
                try:
                    producer.send(TOPIC, value.encode()).get(timeout=30)
                    acked.append(value)
                except KafkaError:
                    pass
                i += 1
                time.sleep(0.05)
        finally:
            producer.close(timeout=10)

    writer = threading.Thread(target=load, daemon=True)
    writer.start()
    started = time.monotonic()
    try:

        def rolled() -> bool:
            secret = store.try_get("secrets", NAMESPACE, "sec-broker-certs")
            new_hash = secret["metadata"]["annotations"][names.CERTIFICATES_HASH_ANNOTATION]
            if new_hash == old_hash:
                return False
            pods, _ = store.list("pods", NAMESPACE, names.selector("sec", names.Component.BROKER))
            hashes = [
                (p["metadata"].get("annotations") or {}).get(names.CERTIFICATES_HASH_ANNOTATION)
                for p in pods
            ]
            # a broker pod's hash covers its Secret and the ZooKeeper client identity's
            zk_client = store.try_get("secrets", NAMESPACE, "sec-zookeeper-client-certs")
            want = pod_hash(
                names.Component.BROKER,
                new_hash,
                zk_client["metadata"]["annotations"][names.CERTIFICATES_HASH_ANNOTATION],
            )
            return len(pods) == 3 and all(h == want for h in hashes) and secured.ready()

        wait_for(rolled, 240, "brokers rolled onto re-issued certificates", 1.0)
    finally:
        stop.set()
        writer.join(timeout=60)
    print(f"re-issued and rolled in {time.monotonic() - started:.1f}s, {len(acked)} acked")
    renewed = secured.secret("sec-broker-certs")["sec-broker-0.pem"]
    assert renewed != short.keystore_pem
    assert leaf_certificate(renewed).not_valid_after_utc > now + datetime.timedelta(days=300)
    assert len(acked) > 20
    common = dict(
        bootstrap_servers=secured.bootstrap(9092), security_protocol="SSL", ssl_context=alice
    )
    seen = consume(common, set(acked), timeout_s=30)
    assert set(acked) <= seen, f"lost {sorted(set(acked) - seen)[:5]}"


def test_bring_your_own_ca_is_refused_until_its_secrets_exist(secured):
    byo = copy.deepcopy(CLUSTER)
    byo["metadata"] = {"name": "own"}
    byo["spec"]["brokers"] = {
        "replicas": 1,
        "config": {
            "min.insync.replicas": 1,
            "default.replication.factor": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
        },
    }
    byo["spec"]["clusterCa"] = {"generateCertificateAuthority": False}
    secured.store.create("odradekclusters", NAMESPACE, byo)

    def refused():
        error = condition(secured.get(name="own", namespace=NAMESPACE), "Error")
        return error.get("reason") == "CertificateAuthorityMissing" and error

    error = wait_for(refused, 60, "BYO cluster refused for its missing CA", 0.5)
    assert "own-cluster-ca-cert" in error["message"] and "own-cluster-ca" in error["message"]
    assert secured.store.try_get("secrets", NAMESPACE, "own-broker-certs") is None

    now = datetime.datetime.now(datetime.UTC)
    mine = certs.make_ca("my-company-ca", now=now, validity_days=3650)
    for name, data in (
        ("own-cluster-ca", secrets.ca_key_data(mine)),
        ("own-cluster-ca-cert", secrets.ca_cert_data(mine)),
    ):
        secured.store.create(
            "secrets",
            NAMESPACE,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name},
                "data": secrets.encode(data),
            },
        )
    # A Secret change is no spec change: the periodic pass (5 s in tests) picks it up.
    cluster = secured.wait_ready("own", NAMESPACE)
    leaf = secured.secret("own-broker-certs", NAMESPACE)["own-broker-0.pem"]
    assert certs.signed_by(leaf[leaf.index("-----BEGIN CERTIFICATE-----") :], mine.cert_pem)
    entries = {e["certificate"]: e for e in cluster["status"]["certificates"]}
    expected = mine.certificate.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert entries["cluster-ca"]["notAfter"] == expected
    # The user's Secrets are theirs: never given an owner nor rewritten by the operator.
    own = secured.store.try_get("secrets", NAMESPACE, "own-cluster-ca-cert")
    assert not own["metadata"].get("ownerReferences")
    secured.store.delete("odradekclusters", NAMESPACE, "own")
