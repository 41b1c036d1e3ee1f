"""CreateAcls, DescribeAcls and DeleteAcls against a real broker with Kafka's ACL authorizer,
through confluent-kafka's AdminClient: what confluent-kafka-python's own integration test
(tests/integration/admin/test_basic_operations.py, verify_admin_acls) does with ACLs (the
sequence is support/confluent_acls.py, which compat/confluent_suite runs too), then a DENY of
ALTER on the Cluster refusing CreateAcls with CLUSTER_AUTHORIZATION_FAILED.

One local cluster (ZooKeeper, a controller, one broker) for the module. Clients are plaintext,
so ``User:ANONYMOUS``; the broker has ``allow.everyone.if.no.acl.found=true`` so that the
Cluster, which has no ACL until the last test, may be administered.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from odradek.cli import main
from support.confluent_acls import any_filter, verify_admin_acls

pytestmark = pytest.mark.integration

WAIT_S = 30.0
TOPIC, GROUP = "acl-topic", "acl-group"


@pytest.fixture(scope="module")
def cluster(local_cluster, tmp_path_factory):
    overrides = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    data_dir = tmp_path_factory.mktemp("acl-cluster")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        yield state


@pytest.fixture(scope="module")
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def test_confluent_kafkas_admin_acl_sequence(admin):
    verify_admin_acls(admin, TOPIC, GROUP, WAIT_S)


def test_a_bad_principal_is_refused_as_invalid_request(admin):
    bad = AclBinding(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        "test-user-without-type",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as raised:
        admin.create_acls([bad])[bad].result(timeout=WAIT_S)
    assert raised.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert admin.describe_acls(any_filter()).result(timeout=WAIT_S) == []


def test_odradek_acls_adds_lists_and_removes(cluster, admin, capsys):
    def acls(*argv: str) -> str:
        capsys.readouterr()
        code = main(["acls", "--bootstrap-server", cluster.bootstrap_servers, *argv])
        out, err = capsys.readouterr()
        assert code == 0, err
        return out

    added = acls("--add", "--allow-principal", "User:cli", "--consumer", "--topic", "cli-topic",
                 "--group", "cli-group")  # fmt: skip
    assert added.count("Added") == 3
    assert len(admin.describe_acls(any_filter()).result(timeout=WAIT_S)) == 3
    listed = acls("--list", "--topic", "cli-topic")
    assert "resourceType=TOPIC, name=cli-topic, patternType=LITERAL" in listed
    assert "(principal=User:cli, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert acls("--remove", "--topic", "cli-topic").count("Removed") == 2
    assert acls("--remove", "--group", "cli-group").count("Removed") == 1
    assert admin.describe_acls(any_filter()).result(timeout=WAIT_S) == []


def test_a_deny_of_alter_on_the_cluster_refuses_create_acls(admin):
    deny_alter = AclBinding(
        ResourceType.BROKER,  # librdkafka's name for the Cluster resource
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        AclOperation.ALTER,
        AclPermissionType.DENY,
    )
    admin.create_acls([deny_alter])[deny_alter].result(timeout=WAIT_S)
    another = AclBinding(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        "User:someone",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as raised:
        admin.create_acls([another])[another].result(timeout=WAIT_S)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
