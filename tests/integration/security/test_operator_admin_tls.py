"""The operator's admin client with its own certificate (``AdminTls`` from pki's leaves) runs
every call it makes over a mutual-TLS listener that checks host names: odradek.ops's (Metadata,
DescribeConfigs, DescribeLogDirs) and librdkafka's (create, alter, add partitions, delete); a
client without the certificate is refused. One local cluster (ZooKeeper, a controller, one
broker) whose SSL listener presents a pki leaf for ``localhost``."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from odradek_operator.pki import certs
from odradek_operator.reconcile.admin import AdminTls, ClusterUnavailable, OpsAdmin
from support.listener_ports import listener_ports

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_cluster(local_cluster, tmp_path_factory):
    now = datetime.datetime.now(datetime.UTC)
    ca = certs.make_ca("test-cluster-ca", now=now, validity_days=2)
    broker = certs.issue_leaf(ca, "test-broker", now=now, validity_days=1, dns_names=["localhost"])
    operator = certs.issue_leaf(
        ca, "odradek-operator", now=now, validity_days=1, server_auth=False, organization=None
    )
    root = tmp_path_factory.mktemp("pki")
    (root / "broker.pem").write_text(broker.keystore_pem)
    (root / "ca.crt").write_text(ca.cert_pem)
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SSL://localhost:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(root / "broker.pem"),
        "listener.name.ssl.ssl.truststore.location": str(root / "ca.crt"),
        "listener.name.ssl.ssl.client.auth": "required",
    }
    with local_cluster(
        tmp_path_factory.mktemp("admin-tls"), brokers=1, broker_overrides=overrides
    ) as state:
        member = next(m for m in state.members if m.role == "broker")
        port = listener_ports(member)["SSL"]
        yield f"localhost:{port}", AdminTls.of(operator.keystore_pem, ca.cert_pem)


def test_every_admin_call_runs_over_mutual_tls(tls_cluster):
    bootstrap, tls = tls_cluster
    admin = OpsAdmin(bootstrap, tls)

    async def scenario():
        await admin.create_topic("secured-admin", 1, 1, {"retention.ms": "3600000"})
        await admin.create_partitions("secured-admin", 2)
        await admin.alter_topic_config("secured-admin", {"cleanup.policy": "compact"}, [])
        configs = await admin.topic_configs(["secured-admin"])
        view = await admin.view()
        dirs = await admin.log_dir_partitions(view.brokers)
        await admin.delete_topic("secured-admin")
        return configs, view, dirs

    configs, view, dirs = asyncio.run(scenario())
    topic = configs["secured-admin"]
    assert topic["retention.ms"] == ("3600000", True)
    assert topic["cleanup.policy"] == ("compact", True)
    assert topic["segment.bytes"][1] is False  # a default, not the topic's own
    assert {tp.partition for tp in view.partitions if tp.topic == "secured-admin"} == {0, 1}
    (broker_id,) = view.brokers
    assert sum(dirs[broker_id].values()) >= 2  # the topic's two partitions, while it existed


def test_without_the_certificate_the_listener_refuses(tls_cluster):
    bootstrap, _ = tls_cluster
    now = datetime.datetime.now(datetime.UTC)
    stranger_ca = certs.make_ca("stranger", now=now, validity_days=2)
    stranger = certs.issue_leaf(stranger_ca, "eve", now=now, validity_days=1, server_auth=False)
    # Eve trusts the broker (the right CA) but her certificate is another CA's.
    right_ca = tls_cluster[1].trust_pem
    admin = OpsAdmin(bootstrap, AdminTls.of(stranger.keystore_pem, right_ca))
    with pytest.raises(ClusterUnavailable):
        asyncio.run(admin.view())
