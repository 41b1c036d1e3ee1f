"""Users: the ACL and quota diffs, and one OdradekUser pass against in-memory ports: what is set
the first time, nothing the second, drift repaired (Secret deleted, edited, a stale ACL, a quota
set by hand), a given password, a Secret another object owns, tls certificates kept and renewed,
and the finalizer's deletion."""

from __future__ import annotations

import asyncio
import copy
import datetime
import random

import pytest

from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek_operator import metrics, names
from odradek_operator.model.users import credential_fingerprint
from odradek_operator.pki import certs
from odradek_operator.pki import secrets as pki_secrets
from odradek_operator.reconcile import users
from odradek_operator.reconcile.status import Refused, Retry
from odradek_operator.reconcile.users import acl_diff, quota_diff
from support.operator_doubles import FakeKube, FakeUserAdmin, pod

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
ORDERS_WRITE = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
    AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
)


def binding(name: str, op=AclOperation.READ) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL),
        AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW),
    )


def test_acl_diff_makes_exactly_the_desired_set():
    diff = acl_diff({binding("a"), binding("b")}, {binding("b"), binding("c")})
    assert diff.create == (binding("a"),) and diff.delete == (binding("c"),)
    assert acl_diff({binding("a")}, {binding("a")}).empty
    # Another operation on the same resource is another ACL.
    write = binding("a", AclOperation.WRITE)
    assert acl_diff({binding("a")}, {write}).delete == (write,)


def test_quota_diff_sets_changes_and_removes_what_the_spec_leaves_out():
    diff = quota_diff({"producer_byte_rate": 10.0, "request_percentage": 5.0},
                      {"producer_byte_rate": 10.0, "consumer_byte_rate": 3.0})  # fmt: skip
    assert diff.set_ == {"request_percentage": 5.0} and diff.remove == ("consumer_byte_rate",)
    assert quota_diff({"controller_mutation_rate": 0.1}, {"controller_mutation_rate": 0.1}).empty


CLUSTER = {
    "kind": "OdradekCluster",
    "metadata": {"name": "demo", "namespace": "ns", "uid": "c-1"},
    "spec": {
        "listeners": [
            {
                "name": "scram",
                "port": 9095,
                "tls": True,
                "authentication": {"type": "scram-sha-512"},
            },
            {"name": "mtls", "port": 9096, "tls": True, "authentication": {"type": "tls"}},
        ]
    },
}


def user_body(authentication=None, acls=None, quotas=None) -> dict:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekUser",
        "metadata": {
            "name": "alice",
            "namespace": "ns",
            "uid": "user-uid",
            "generation": 3,
            "labels": {"odradek.io/cluster": "demo"},
        },
        "spec": {
            "authentication": authentication or {"type": "scram-sha-512"},
            "authorization": {
                "type": "simple",
                "acls": acls
                if acls is not None
                else [{"resource": {"type": "topic", "name": "orders"}, "operations": ["Write"]}],
            },
            "quotas": quotas if quotas is not None else {"producerByteRate": 1024},
        },
    }


def world():
    kube = FakeKube()
    kube.put(copy.deepcopy(CLUSTER))
    kube.put(pod("demo-broker-0"))
    cluster_ca = certs.make_ca("cluster-ca", now=NOW, validity_days=365)
    clients_ca = certs.make_ca("clients-ca", now=NOW, validity_days=365)
    for name, data in (
        (names.cluster_ca_cert_secret("demo"), pki_secrets.ca_cert_data(cluster_ca)),
        (names.clients_ca_cert_secret("demo"), pki_secrets.ca_cert_data(clients_ca)),
        (names.clients_ca_key_secret("demo"), pki_secrets.ca_key_data(clients_ca)),
    ):
        kube.put(
            {
                "kind": "Secret",
                "metadata": {"name": name, "namespace": "ns"},
                "data": pki_secrets.encode(data),
            }
        )
    operator = certs.issue_leaf(cluster_ca, "odradek-operator", now=NOW, validity_days=30)
    operator_data = pki_secrets.leaf_data({"operator": operator}, cluster_ca.cert_pem)
    kube.put(
        {
            "kind": "Secret",
            "metadata": {"name": names.operator_certs_secret("demo"), "namespace": "ns"},
            "data": pki_secrets.encode(operator_data),
        }
    )
    body = kube.put(user_body())
    return kube, FakeUserAdmin(), body, cluster_ca, clients_ca


def admin_for(admin):
    return lambda bootstrap, tls=None: admin


def sync(kube, admin, body, periodic=False, now=NOW, seed=1) -> dict:
    live = kube.find("OdradekUser", "alice")
    current = {**body, "status": (live or {}).get("status") or {}}
    return asyncio.run(
        users.sync_user(
            kube,
            admin_for(admin),
            current,
            periodic=periodic,
            rng=random.Random(seed),
            now=lambda: now,
        )
    )


def ready(kube) -> dict:
    status = kube.find("OdradekUser", "alice")["status"]
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def secret(kube) -> dict[str, str]:
    return pki_secrets.decode(kube.find("Secret", "alice"))


def test_first_pass_sets_credential_secret_acls_quotas_then_nothing_more():
    kube, admin, body, cluster_ca, _ = world()
    status = sync(kube, admin, body)
    data = secret(kube)
    assert admin.scram["alice"] == {"SCRAM-SHA-512": (4096, data["password"])}
    assert len(data["password"]) == 32
    assert data["ca.crt"] == cluster_ca.cert_pem
    assert f'password="{data["password"]}"' in data["sasl.jaas.config"]
    assert admin.acls == {ORDERS_WRITE}
    assert admin.quotas == {"alice": {"producer_byte_rate": 1024.0}}
    assert (status["username"], status["secret"], status["observedGeneration"]) == (
        "alice",
        "alice",
        3,
    )
    assert ready(kube)["status"] == "True" and ready(kube)["reason"] == "Reconciled"
    # The credential was set before the Secret was written (a Secret never names a password the
    # brokers do not have).
    calls_before = len(admin.calls)
    sync(kube, admin, body, periodic=True)
    assert len(admin.calls) == calls_before
    assert ready(kube)["reason"] == "InSync"


def test_a_deleted_secret_gets_a_new_password_and_credential():
    kube, admin, body, *_ = world()
    sync(kube, admin, body)
    first = secret(kube)["password"]
    del kube.objects["Secret", "ns", "alice"]
    sync(kube, admin, body, periodic=True, seed=2)
    second = secret(kube)["password"]
    assert second != first
    assert admin.scram["alice"]["SCRAM-SHA-512"] == (4096, second)
    assert ready(kube)["reason"] == "DriftRepaired"


def test_an_edited_secret_is_put_back_and_an_edited_password_becomes_the_credential():
    kube, admin, body, *_ = world()
    sync(kube, admin, body)
    live = kube.find("Secret", "alice")
    password = secret(kube)["password"]
    live["data"]["sasl.jaas.config"] = pki_secrets.encode({"x": "tampered"})["x"]
    live["data"]["extra"] = pki_secrets.encode({"x": "added by hand"})["x"]
    upserts = [c for c in admin.calls if c[0] == "upsert_scram"]
    sync(kube, admin, body, periodic=True)
    data = secret(kube)
    assert "extra" not in data and data["password"] == password
    assert f'password="{password}"' in data["sasl.jaas.config"]
    assert [c for c in admin.calls if c[0] == "upsert_scram"] == upserts  # not set again
    # The password itself edited: as Strimzi, the Secret's password is the user's.
    live = kube.find("Secret", "alice")
    live["data"]["password"] = pki_secrets.encode({"x": "chosen-by-hand"})["x"]
    sync(kube, admin, body, periodic=True)
    assert admin.scram["alice"]["SCRAM-SHA-512"] == (4096, "chosen-by-hand")
    live = kube.find("Secret", "alice")
    assert live["metadata"]["annotations"]["odradek.io/credential"] == credential_fingerprint(
        "chosen-by-hand"
    )


def test_a_credential_deleted_on_the_brokers_and_other_mechanisms_are_repaired():
    kube, admin, body, *_ = world()
    sync(kube, admin, body)
    password = secret(kube)["password"]
    admin.scram["alice"] = {"SCRAM-SHA-256": (4096, "other")}
    sync(kube, admin, body, periodic=True)
    assert admin.scram["alice"] == {"SCRAM-SHA-512": (4096, password)}


def test_stale_acls_and_quotas_made_by_hand_are_removed():
    kube, admin, body, *_ = world()
    sync(kube, admin, body)
    stray = binding("audit")
    other_user = AclBinding(
        stray.pattern,
        AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    admin.acls |= {stray, other_user}
    admin.quotas["alice"]["consumer_byte_rate"] = 5.0
    sync(kube, admin, body, periodic=True)
    assert admin.acls == {ORDERS_WRITE, other_user}
    assert admin.quotas["alice"] == {"producer_byte_rate": 1024.0}
    assert "1 ACLs deleted" in ready(kube)["message"]


def test_a_given_password_is_used_and_follows_its_secret():
    kube, admin, _, *_ = world()
    ref = {"valueFrom": {"secretKeyRef": {"name": "alice-pw", "key": "pw"}}}
    body = kube.put(user_body(authentication={"type": "scram-sha-512", "password": ref}))
    with pytest.raises(Retry) as waiting:
        sync(kube, admin, body)
    assert waiting.value.reason == "PasswordSecretNotFound"
    assert ready(kube)["status"] == "False"
    kube.put(
        {
            "kind": "Secret",
            "metadata": {"name": "alice-pw", "namespace": "ns"},
            "data": pki_secrets.encode({"pw": "given-1"}),
        }
    )
    sync(kube, admin, body)
    assert secret(kube)["password"] == "given-1"
    assert admin.scram["alice"]["SCRAM-SHA-512"][1] == "given-1"
    kube.find("Secret", "alice-pw")["data"] = pki_secrets.encode({"pw": "given-2"})
    sync(kube, admin, body, periodic=True)
    assert admin.scram["alice"]["SCRAM-SHA-512"][1] == "given-2"
    kube.find("Secret", "alice-pw")["data"] = pki_secrets.encode({"pw": 'bad"quote'})
    with pytest.raises(Refused) as bad:
        sync(kube, admin, body, periodic=True)
    assert bad.value.reason == "InvalidPassword"


def test_a_secret_of_the_users_name_owned_by_another_is_never_taken():
    kube, admin, body, *_ = world()
    kube.put({"kind": "Secret", "metadata": {"name": "alice", "namespace": "ns"}, "data": {}})
    with pytest.raises(Refused) as conflict:
        sync(kube, admin, body)
    assert conflict.value.reason == "SecretConflict"
    assert "alice" not in admin.scram


def test_acls_on_a_cluster_without_an_authorizer_wait_and_say_why():
    kube, admin, body, *_ = world()
    admin.authorizer = False
    with pytest.raises(Retry) as waiting:
        sync(kube, admin, body)
    assert waiting.value.reason == "AuthorizerDisabled"
    no_acls = kube.put(user_body(acls=[]))
    sync(kube, admin, no_acls)  # nothing to keep: fine
    assert ready(kube)["status"] == "True"


def test_a_cluster_without_a_listener_for_the_user_is_not_ready():
    kube, admin, body, *_ = world()
    kube.find("OdradekCluster", "demo")["spec"] = {}
    with pytest.raises(Retry) as waiting:
        sync(kube, admin, body)
    assert waiting.value.reason == "NoMatchingListener"
    assert "alice" in admin.scram  # the user exists meanwhile


def test_moving_a_user_to_another_cluster_is_refused():
    kube, admin, body, *_ = world()
    typo = copy.deepcopy(body)
    typo["metadata"]["labels"]["odradek.io/cluster"] = "dmeo"
    with pytest.raises(Retry):
        sync(kube, admin, typo)  # never reached: a label that may still be corrected
    assert "cluster" not in kube.find("OdradekUser", "alice")["status"]
    sync(kube, admin, body)
    assert kube.find("OdradekUser", "alice")["status"]["cluster"] == "demo"
    moved = copy.deepcopy(body)
    moved["metadata"]["labels"]["odradek.io/cluster"] = "other"
    with pytest.raises(Refused) as refused:
        sync(kube, admin, moved)
    assert refused.value.reason == "ClusterChangeRefused"


def test_a_tls_user_gets_a_certificate_kept_until_renewal():
    kube, admin, _, _, clients_ca = world()
    admin.scram["alice"] = {"SCRAM-SHA-512": (4096, "was scram")}
    body = kube.put(user_body(authentication={"type": "tls"}))
    status = sync(kube, admin, body)
    assert "alice" not in admin.scram  # a tls user has no password
    data = secret(kube)
    assert certs.signed_by(data["user.crt"], clients_ca.cert_pem)
    assert data["user.pem"] == data["user.key"] + data["user.crt"]
    assert "CN=alice" in certs.parse_certificates(data["user.crt"])[0].subject.rfc4514_string()
    assert status["certificateNotAfter"] == "2027-12-03T12:00:00Z"
    expiry = metrics.CERTIFICATE_EXPIRY.labels("demo", "ns", "user-alice")._value.get()
    assert expiry == datetime.datetime(2027, 12, 3, 12, 0, tzinfo=datetime.UTC).timestamp()
    sync(kube, admin, body, periodic=True, now=NOW + datetime.timedelta(days=300))
    assert secret(kube)["user.crt"] == data["user.crt"]  # kept
    sync(kube, admin, body, periodic=True, now=NOW + datetime.timedelta(days=340))
    renewed = secret(kube)
    assert renewed["user.crt"] != data["user.crt"] and renewed["user.key"] != data["user.key"]
    assert "renewed" in ready(kube)["message"]
    asyncio.run(users.delete_user(kube, admin_for(admin), kube.find("OdradekUser", "alice")))
    series = {s.labels["certificate"] for m in metrics.REGISTRY.collect() for s in m.samples}
    assert "user-alice" not in series


def test_a_tls_certificate_edited_or_from_another_ca_is_issued_again():
    kube, admin, _, *_ = world()
    body = kube.put(user_body(authentication={"type": "tls"}))
    sync(kube, admin, body)
    stranger = certs.make_ca("stranger", now=NOW, validity_days=30)
    leaf = certs.issue_leaf(stranger, "alice", now=NOW, validity_days=10, organization=None)
    kube.find("Secret", "alice")["data"].update(
        pki_secrets.encode({"user.crt": leaf.cert_pem, "user.key": leaf.key_pem})
    )
    sync(kube, admin, body, periodic=True)
    assert secret(kube)["user.crt"] != leaf.cert_pem
    assert "another CA" in ready(kube)["message"]


def test_the_finalizer_deletes_credential_acls_and_quotas():
    kube, admin, body, *_ = world()
    sync(kube, admin, body)
    admin.acls.add(binding("extra"))
    done = asyncio.run(users.delete_user(kube, admin_for(admin), kube.find("OdradekUser", "alice")))
    assert (admin.scram, admin.acls, admin.quotas) == ({}, set(), {})
    assert "1 SCRAM credentials, 2 ACLs, 1 quotas" in done
    del kube.objects["OdradekCluster", "ns", "demo"]
    assert "gone" in asyncio.run(users.delete_user(kube, admin_for(admin), body))
