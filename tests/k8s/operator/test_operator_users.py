"""OdradekUser end to end: kopf in-process against the test API server, the kubelet stand-in
running a secured cluster (a SCRAM-SHA-512 listener over TLS, an mTLS listener, the ACL
authorizer) as real processes. A SCRAM user's Secret, read as a client reads client.properties,
lets a real client (kafka-python) produce to the topic its ACLs allow and be refused on another;
its quotas and ACLs are what DescribeClientQuotas and DescribeAcls say; a deleted or edited
Secret is repaired (a new password works, the old one is refused); a tls user produces with
its certificate; deleting a user removes its credential, ACLs and quotas."""

from __future__ import annotations

import asyncio
import base64
import copy
import os
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAuthorizationFailedError

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.security import SaslAuthenticationError, client_security
from odradek.commands.client_properties import translate
from odradek.errors import ErrorCode
from odradek.ops.errors import OpsError
from odradek_operator import names
from odradek_operator.reconcile.admin import AdminTls, OpsAdmin
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import (
    MTLS_PORT,
    SCRAM_PORT,
    OperatorThread,
    condition,
    operator_session,
    secured_one_broker_cluster,
    wait_for,
)

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = "users"
READY_TIMEOUT_S = 180.0
WAIT_S = 45.0
CLUSTER = secured_one_broker_cluster("sec")
BROKER_HOST = names.pod_host("sec", names.Component.BROKER, 0, NAMESPACE)


def user(name: str, authentication: str, acls: list[dict], quotas: dict | None = None) -> dict:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekUser",
        "metadata": {"name": name, "labels": {"odradek.io/cluster": "sec"}},
        "spec": {
            "authentication": {"type": authentication},
            "authorization": {"type": "simple", "acls": acls},
            **({"quotas": quotas} if quotas else {}),
        },
    }


ALICE_ACLS = [
    {"resource": {"type": "topic", "name": "allowed"}, "operations": ["Write", "Describe"]},
    {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
]
ALICE_QUOTAS = {"producerByteRate": 1048576, "consumerByteRate": 2097152, "requestPercentage": 200}


class World:
    def __init__(self, store, kubelet: KubeletStandIn, tmp: Path) -> None:
        self.store = store
        self.kubelet = kubelet
        self.tmp = tmp

    def get(self, plural: str, name: str):
        return self.store.try_get(plural, NAMESPACE, name)

    def secret(self, name: str) -> dict[str, str]:
        obj = self.get("secrets", name) or {}
        return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}

    def cluster_settled(self) -> str | None:
        """ "Ready", or the refusal's message (a refused spec would only time out)."""
        cluster = self.get("odradekclusters", "sec")
        if condition(cluster, "Ready").get("status") == "True":
            return "Ready"
        error = condition(cluster, "Error")
        return error.get("message") if error.get("status") == "True" else None

    def user_ready(self, name: str) -> dict | None:
        obj = self.get("odradekusers", name)
        ready = condition(obj, "Ready")
        if ready.get("status") == "True" and obj["status"].get("observedGeneration") == (
            obj["metadata"].get("generation")
        ):
            return obj
        return None

    def admin(self) -> OpsAdmin:
        """The cluster as its super user sees it: the operator's certificate on INTERNAL."""
        data = self.secret(names.operator_certs_secret("sec"))
        tls = AdminTls.of(data["operator.pem"], data["ca.crt"])
        return OpsAdmin(f"{BROKER_HOST}:{names.INTERNAL_PORT}", tls)

    def mounted(self, name: str) -> Path:
        """The user's Secret written out as a pod would mount it; client.properties pointing
        there (its documented /etc/odradek/user paths replaced by the directory)."""
        directory = self.tmp / f"{name}-{os.urandom(4).hex()}"
        directory.mkdir()
        for key, value in self.secret(name).items():
            if key == "client.properties":
                value = value.replace("/etc/odradek/user", str(directory))
            (directory / key).write_text(value)
        return directory


def librdkafka_settings(directory: Path) -> dict[str, str]:
    """What the Secret's client.properties says, as odradek's --command-config reads it."""
    return translate((directory / "client.properties").read_text()).librdkafka


def scram_producer(directory: Path, max_block_ms: int = 15000) -> KafkaProducer:
    settings = librdkafka_settings(directory)
    assert settings["security.protocol"] == "SASL_SSL"
    return KafkaProducer(
        bootstrap_servers=f"{BROKER_HOST}:{SCRAM_PORT}",
        security_protocol="SASL_SSL",
        sasl_mechanism=settings["sasl.mechanism"],
        sasl_plain_username=settings["sasl.username"],
        sasl_plain_password=settings["sasl.password"],
        ssl_cafile=settings["ssl.ca.location"],
        acks="all",
        max_block_ms=max_block_ms,
        request_timeout_ms=15000,
    )


async def authentication_error(directory: Path) -> str | None:
    """None when the Secret's credential authenticates on the SCRAM listener, else why not."""
    security = client_security(librdkafka_settings(directory))
    try:
        async with ClusterClient(f"{BROKER_HOST}:{SCRAM_PORT}", security=security) as client:
            await client.send_any(3, 1, lambda t: build(t, topics=None))  # Metadata
    except (SaslAuthenticationError, OpsError) as e:
        return str(e)
    return None


def produce_one(producer: KafkaProducer, topic: str) -> None:
    try:
        producer.send(topic, b"hello").get(timeout=30)
    finally:
        producer.close(timeout=5)


async def describe_quotas(admin: OpsAdmin, user: str) -> dict[str, float]:
    """DescribeClientQuotas, sent here (not through the operator's adapter)."""

    def make(request_type):
        component = element_type(request_type, "components")
        match = build(component, entity_type="user", match_type=0, match=user)
        return build(request_type, components=(match,), strict=True)

    async with ClusterClient(admin.bootstrap, security=admin.security) as client:
        response = await client.send_any(48, 1, make)
    assert response.error_code == ErrorCode.none
    return {v.key: v.value for e in response.entries or () for v in e.values}


async def describe_scram(admin: OpsAdmin, user: str) -> ErrorCode:
    def make(request_type):
        name = element_type(request_type, "users")
        return build(request_type, users=(build(name, name=user),))

    async with ClusterClient(admin.bootstrap, security=admin.security) as client:
        response = await client.send_any(50, 0, make)
    return ErrorCode(int(response.results[0].error_code))


async def describe_acls(admin: OpsAdmin, principal: str) -> set[tuple]:
    def make(request_type):
        return build(
            request_type,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=principal,
            host_filter=None,
            operation=1,
            permission_type=1,
        )

    async with ClusterClient(admin.bootstrap, security=admin.security) as client:
        response = await client.send_any(29, 3, make)
    assert response.error_code == ErrorCode.none, response.error_message
    return {
        (int(r.resource_type), r.resource_name, int(a.operation))
        for r in response.resources
        for a in r.acls
    }


@pytest.fixture(scope="module")
def world(kube_api, kubeconfig, tmp_path_factory):
    with (
        operator_session(kube_api, kubeconfig, tmp_path_factory.mktemp("kubelet")) as session,
        session.kubelet.resolver(),  # the broker names, for the operator and kafka-python here
        OperatorThread(session.ctx, NAMESPACE),
    ):
        kube_api.store.create("odradekclusters", NAMESPACE, copy.deepcopy(CLUSTER))
        state = World(kube_api.store, session.kubelet, tmp_path_factory.mktemp("users"))
        settled = wait_for(
            lambda: state.cluster_settled(), READY_TIMEOUT_S, "secured cluster Ready", 0.5
        )
        assert settled == "Ready", settled
        # The topic, made by the super user (the operator's certificate) over INTERNAL.
        admin = KafkaAdminClient(
            bootstrap_servers=f"{BROKER_HOST}:{names.INTERNAL_PORT}",
            security_protocol="SSL",
            ssl_context=state.admin().security.tls,
        )
        try:
            admin.create_topics([NewTopic("allowed", 1, 1)])
        finally:
            admin.close()
        yield state


def test_a_scram_user_produces_where_its_acls_allow_and_nowhere_else(world):
    world.store.create(
        "odradekusers", NAMESPACE, user("alice", "scram-sha-512", ALICE_ACLS, ALICE_QUOTAS)
    )
    obj = wait_for(lambda: world.user_ready("alice"), WAIT_S, "alice Ready")
    assert (obj["status"]["username"], obj["status"]["secret"]) == ("alice", "alice")
    secret = world.get("secrets", "alice")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    mounted = world.mounted("alice")
    produce_one(scram_producer(mounted), "allowed")
    with pytest.raises(TopicAuthorizationFailedError):
        produce_one(scram_producer(mounted), "forbidden")

    admin = world.admin()
    assert asyncio.run(describe_quotas(admin, "alice")) == {
        "producer_byte_rate": 1048576.0,
        "consumer_byte_rate": 2097152.0,
        "request_percentage": 200.0,
    }
    assert asyncio.run(describe_acls(admin, "User:alice")) == {
        (2, "allowed", 4),  # TOPIC, WRITE
        (2, "allowed", 8),  # TOPIC, DESCRIBE
        (4, "kafka-cluster", 12),  # CLUSTER, IDEMPOTENT_WRITE
    }
    # odradek's own client reads the same file (SCRAM over TLS, the cluster CA trusted).
    security = client_security(librdkafka_settings(mounted))
    assert security.sasl is not None and security.sasl.username == "alice"


def test_a_deleted_secret_comes_back_with_a_new_password_and_edits_are_put_back(world):
    wait_for(lambda: world.user_ready("alice"), WAIT_S, "alice Ready")
    old = world.mounted("alice")
    old_password = (old / "password").read_text()
    world.store.delete("secrets", NAMESPACE, "alice")
    wait_for(
        lambda: world.secret("alice").get("password") not in (None, old_password),
        WAIT_S,
        "Secret alice made again",
    )
    new = world.mounted("alice")
    produce_one(scram_producer(new), "allowed")
    # The old password no longer authenticates (odradek's own client: the broker's answer, at
    # once), the new one does.
    assert asyncio.run(authentication_error(new)) is None
    assert "SASL authentication failed" in (asyncio.run(authentication_error(old)) or "")

    jaas = world.secret("alice")["sasl.jaas.config"]
    tampered = base64.b64encode(b"tampered").decode()
    world.store.patch(
        "secrets", NAMESPACE, "alice", {"data": {"sasl.jaas.config": tampered, "extra": tampered}}
    )
    wait_for(
        lambda: (
            world.secret("alice").get("sasl.jaas.config") == jaas
            and "extra" not in world.secret("alice")
        ),
        WAIT_S,
        "Secret alice put back",
    )
    ready = condition(world.get("odradekusers", "alice"), "Ready")
    assert ready["status"] == "True"


def test_a_tls_user_produces_with_its_certificate(world):
    acls = [{"resource": {"type": "topic", "name": "allowed"}, "operations": ["Write"]}]
    world.store.create("odradekusers", NAMESPACE, user("bob", "tls", acls))
    obj = wait_for(lambda: world.user_ready("bob"), WAIT_S, "bob Ready")
    assert obj["status"]["certificateNotAfter"]
    mounted = world.mounted("bob")
    settings = librdkafka_settings(mounted)
    assert settings["security.protocol"] == "SSL"
    producer = KafkaProducer(
        bootstrap_servers=f"{BROKER_HOST}:{MTLS_PORT}",
        security_protocol="SSL",
        ssl_cafile=settings["ssl.ca.location"],
        ssl_certfile=str(mounted / "user.crt"),
        ssl_keyfile=str(mounted / "user.key"),
        acks="all",
        max_block_ms=15000,
    )
    produce_one(producer, "allowed")


def test_deleting_a_user_removes_its_credential_acls_and_quotas(world):
    wait_for(lambda: world.user_ready("alice"), WAIT_S, "alice Ready")
    admin = world.admin()
    assert asyncio.run(describe_scram(admin, "alice")) == ErrorCode.none
    world.store.delete("odradekusers", NAMESPACE, "alice")
    wait_for(lambda: world.get("odradekusers", "alice") is None, WAIT_S, "alice gone")
    assert asyncio.run(describe_scram(admin, "alice")) == ErrorCode.resource_not_found
    assert asyncio.run(describe_acls(admin, "User:alice")) == set()
    assert asyncio.run(describe_quotas(admin, "alice")) == {}
    wait_for(lambda: world.get("secrets", "alice") is None, WAIT_S, "Secret alice collected")
