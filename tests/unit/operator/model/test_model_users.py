"""OdradekUser specs: what is read (ACL rules as Kafka's bindings, quotas as Kafka's keys), what
is refused by name, and the Secret a user gets (its client.properties read by odradek's own
client-properties translator, as a client would read it)."""

from __future__ import annotations

import copy
import random

import pytest

from odradek.commands.client_properties import translate
from odradek.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.listeners import Listener
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.model.users import (
    CREDENTIAL_ANNOTATION,
    UserSpec,
    credential_fingerprint,
    new_password,
    password_problem,
    user_listener,
    user_secret,
)
from odradek_operator.pki.secrets import decode

USER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekUser",
    "metadata": {
        "name": "alice",
        "namespace": "ns",
        "uid": "u-1",
        "labels": {"odradek.io/cluster": "demo"},
    },
    "spec": {
        "authentication": {"type": "scram-sha-512"},
        "authorization": {
            "type": "simple",
            "acls": [
                {
                    "resource": {"type": "topic", "name": "orders"},
                    "operations": ["Write", "Describe"],
                },
                {
                    "resource": {"type": "group", "name": "app-", "patternType": "prefix"},
                    "operations": ["Read"],
                    "host": "10.0.0.7",
                },
                {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
                {"type": "deny", "resource": {"type": "topic", "name": "*"}, "operations": ["All"]},
            ],
        },
        "quotas": {
            "producerByteRate": 1024,
            "requestPercentage": 55,
            "controllerMutationRate": 2.5,
        },
    },
}


def user(**spec) -> dict:
    body = copy.deepcopy(USER)
    body["spec"].update(spec)
    return body


def refused(body: dict) -> SpecError:
    with pytest.raises(SpecError) as e:
        UserSpec.from_resource(body)
    return e.value


def test_rules_become_one_binding_per_operation_for_the_users_principal():
    spec = UserSpec.from_resource(USER)
    assert (spec.name, spec.cluster, spec.principal) == ("alice", "demo", "User:alice")
    got = [
        (
            b.pattern.resource_type,
            b.pattern.name,
            b.pattern.pattern_type,
            b.entry.operation,
            b.entry.permission_type,
            b.entry.host,
        )
        for b in spec.acls
    ]
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    assert got == [
        (ResourceType.TOPIC, "orders", PatternType.LITERAL, AclOperation.WRITE, allow, "*"),
        (ResourceType.TOPIC, "orders", PatternType.LITERAL, AclOperation.DESCRIBE, allow, "*"),
        (ResourceType.GROUP, "app-", PatternType.PREFIXED, AclOperation.READ, allow, "10.0.0.7"),
        (
            ResourceType.CLUSTER,
            "kafka-cluster",
            PatternType.LITERAL,
            AclOperation.IDEMPOTENT_WRITE,
            allow,
            "*",
        ),
        (ResourceType.TOPIC, "*", PatternType.LITERAL, AclOperation.ALL, deny, "*"),
    ]
    assert all(b.entry.principal == "User:alice" for b in spec.acls)
    assert spec.quotas.values == {
        "producer_byte_rate": 1024.0,
        "request_percentage": 55.0,
        "controller_mutation_rate": 2.5,
    }


def test_a_rule_repeated_is_one_binding():
    rule = {"resource": {"type": "topic", "name": "t"}, "operations": ["Read", "Read"]}
    spec = UserSpec.from_resource(user(authorization={"type": "simple", "acls": [rule, rule]}))
    assert len(spec.acls) == 1


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"authentication": None}, "spec.authentication", "required"),
        ({"authentication": {"type": "plain"}}, "spec.authentication.type", "not supported"),
        (
            {"authentication": {"type": "tls", "password": {}}},
            "spec.authentication.password",
            "only with type scram-sha-512",
        ),
        ({"extra": 1}, "spec.extra", "unknown field"),
        (
            {"authorization": {"type": "opa"}},
            "spec.authorization.type",
            "not supported",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [{"resource": {"type": "user", "name": "x"}, "operations": ["Read"]}],
                }
            },
            "spec.authorization.acls[0].resource.type",
            "'user' is not supported",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [{"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}],
                }
            },
            "spec.authorization.acls[0].operations[0]",
            "'Fly' is not an operation",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [{"resource": {"type": "group", "name": "g"}, "operations": ["Write"]}],
                }
            },
            "spec.authorization.acls[0].operations[0]",
            "a group takes only Delete, Describe, Read or All, not Write",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [
                        {"resource": {"type": "cluster", "name": "x"}, "operations": ["Alter"]}
                    ],
                }
            },
            "spec.authorization.acls[0].resource.name",
            "the cluster has no name",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [{"resource": {"type": "topic"}, "operations": ["Read"]}],
                }
            },
            "spec.authorization.acls[0].resource.name",
            "required",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [
                        {
                            "resource": {"type": "topic", "name": "t", "patternType": "match"},
                            "operations": ["Read"],
                        }
                    ],
                }
            },
            "spec.authorization.acls[0].resource.patternType",
            "'match' is not supported",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [
                        {"resource": {"type": "topic", "name": "a/b"}, "operations": ["Read"]}
                    ],
                }
            },
            "spec.authorization.acls[0].resource.name",
            "invalid resource name",
        ),
        (
            {
                "authorization": {
                    "type": "simple",
                    "acls": [
                        {
                            "resource": {"type": "topic", "name": "t"},
                            "operation": "Read",
                            "operations": ["Read"],
                        }
                    ],
                }
            },
            "spec.authorization.acls[0].operation",
            "unknown field",
        ),
        ({"quotas": {"producerByteRate": 1.5}}, "spec.quotas.producerByteRate", "whole number"),
        ({"quotas": {"consumerByteRate": -1}}, "spec.quotas.consumerByteRate", "0 or more"),
        ({"quotas": {"ipRate": 1}}, "spec.quotas.ipRate", "unknown field"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(change, field, says):
    body = user(**change)
    if change.get("authentication", 0) is None:
        del body["spec"]["authentication"]
    error = refused(body)
    assert error.field == field, error
    assert says in error.message, error


def test_the_cluster_label_is_required_and_names_are_checked():
    body = copy.deepcopy(USER)
    del body["metadata"]["labels"]
    assert refused(body).field == "metadata.labels[odradek.io/cluster]"
    body = copy.deepcopy(USER)
    body["metadata"]["name"] = "odradek-operator"
    assert "operator's own principal" in refused(body).message
    body = user(authentication={"type": "tls"})
    body["metadata"]["name"] = "a" * 65
    assert "at most 64" in refused(body).message


def test_a_given_password_comes_from_another_secret():
    ref = {"valueFrom": {"secretKeyRef": {"name": "alice-pw", "key": "pw"}}}
    spec = UserSpec.from_resource(user(authentication={"type": "scram-sha-512", "password": ref}))
    assert (spec.password.secret, spec.password.key) == ("alice-pw", "pw")
    ref["valueFrom"]["secretKeyRef"]["name"] = "alice"
    error = refused(user(authentication={"type": "scram-sha-512", "password": ref}))
    assert "the one the operator writes" in error.message


def test_generated_passwords_and_what_a_password_may_hold():
    password = new_password(random.Random(7))
    assert len(password) == 32 and password.isalnum()
    assert new_password(random.Random(7)) == password
    assert new_password(random.Random(8)) != password
    assert password_problem('a"b') and password_problem("a\\b") and password_problem("")
    assert password_problem("a\nb") and password_problem("ok-Pass word!") is None


def test_a_scram_users_secret_has_what_a_java_client_needs():
    spec = UserSpec.from_resource(USER)
    listener = Listener("sasl", 9095, True, "scram-sha-512")
    secret = user_secret(spec, ca_crt="CA PEM\n", listener=listener, password="s3cret")
    data = decode(secret)
    assert set(data) == {"ca.crt", "client.properties", "password", "sasl.jaas.config"}
    assert data["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cret";'
    )
    meta = secret["metadata"]
    assert meta["annotations"][CREDENTIAL_ANNOTATION] == credential_fingerprint("s3cret")
    assert meta["ownerReferences"][0]["kind"] == "OdradekUser"
    assert meta["ownerReferences"][0]["uid"] == "u-1"
    assert meta["labels"]["odradek.io/cluster"] == "demo"
    client = translate(data["client.properties"])
    assert client.librdkafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/odradek/user/ca.crt",
    }
    plain = user_secret(
        spec, ca_crt="", listener=Listener("s", 1, False, "scram-sha-512"), password="p"
    )
    assert translate(decode(plain)["client.properties"]).security_protocol == "SASL_PLAINTEXT"


def test_a_tls_users_secret_has_key_and_certificate_in_one_pem_too():
    spec = UserSpec.from_resource(user(authentication={"type": "tls"}))
    secret = user_secret(
        spec,
        ca_crt="CA\n",
        listener=Listener("tls", 9096, True, "tls"),
        certificate="CERT\n",
        key="KEY\n",
    )
    data = decode(secret)
    assert set(data) == {"ca.crt", "client.properties", "user.crt", "user.key", "user.pem"}
    assert data["user.pem"] == "KEY\nCERT\n"
    assert "ssl.keystore.location=/etc/odradek/user/user.pem" in data["client.properties"]
    assert CREDENTIAL_ANNOTATION not in secret["metadata"]["annotations"]


def test_the_listener_a_user_connects_to():
    cluster = ClusterSpec.from_resource(
        {
            "metadata": {"name": "demo", "namespace": "ns", "uid": "c"},
            "spec": {
                "brokers": {"replicas": 3},
                "listeners": [
                    {"name": "plain", "port": 9092},
                    {"name": "mtls", "port": 9096, "tls": True, "authentication": {"type": "tls"}},
                    {
                        "name": "scram",
                        "port": 9095,
                        "tls": True,
                        "authentication": {"type": "scram-sha-512"},
                    },
                ],
            },
        }
    )
    assert user_listener(cluster, "scram-sha-512") == Listener("scram", 9095, True, "scram-sha-512")
    assert user_listener(cluster, "tls").name == "mtls"
    plain = ClusterSpec.from_resource({**{"metadata": {"name": "d", "uid": "c"}}, "spec": {}})
    assert user_listener(plain, "tls") is None
