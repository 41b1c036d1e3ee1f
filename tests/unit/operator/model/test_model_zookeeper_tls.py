"""A secured cluster's ZooKeeper objects: zoo.cfg serves TLS only (no plaintext client port),
with client certificates, the x509 provider and a TLS quorum; each server's start script names
its own mounted key store; brokers and controllers read ZooKeeper client keys that Odradek
accepts, pointing at the one identity they mount; an unsecured cluster keeps plaintext."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from odradek.config.broker import BrokerConfig
from odradek.config.controller import ControllerConfig
from odradek.config.properties import parse_overrides, parse_properties
from odradek.config.zookeeper_tls import ZkClientSettings
from odradek_operator import names
from odradek_operator.model import zookeeper_tls
from odradek_operator.model.desired import build
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError

KUBERNETES_VERSION = "1.30"
ZK_CLIENT_DIR = names.ZOOKEEPER_CLIENT_CERTS_DIR


TLS_LISTENER = {"name": "tls", "port": 9192, "tls": True, "authentication": {"type": "tls"}}


def spec(secured: bool, zookeepers: int = 3) -> ClusterSpec:
    body: dict[str, Any] = {
        "metadata": {"name": "demo", "namespace": "data", "uid": "0b1c-uid"},
        "spec": {"zookeeper": {"replicas": zookeepers}},
    }
    if secured:
        body["spec"]["listeners"] = [TLS_LISTENER]
    cluster = ClusterSpec.from_resource(body)
    assert cluster.secured == secured
    return cluster


def objects(cluster: ClusterSpec) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in build(cluster, "odradek:0.1.0")}


def zoo_cfg(cluster: ClusterSpec) -> list[str]:
    return objects(cluster)[("ConfigMap", "demo-zookeeper-config")]["data"]["zoo.cfg"].splitlines()


def settings(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def pod(cluster: ClusterSpec, component: str) -> dict[str, Any]:
    return objects(cluster)[("StatefulSet", f"demo-{component}")]["spec"]["template"]["spec"]


def secret_mounts(pod_spec: dict[str, Any]) -> dict[str, str]:
    """mount path -> Secret name, for every Secret the pod's container mounts."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod_spec["volumes"] if "secret" in v}
    (container,) = pod_spec["containers"]
    return {
        m["mountPath"]: secrets[m["name"]]
        for m in container["volumeMounts"]
        if m["name"] in secrets
    }


def test_a_secured_zookeeper_serves_tls_only_with_client_certificates_and_x509():
    lines = zoo_cfg(spec(secured=True))
    cfg = settings(lines)
    assert cfg["secureClientPort"] == "2181"
    assert "clientPort" not in cfg and "clientPortAddress" not in cfg
    servers = [line for line in lines if line.startswith("server.")]
    host = "demo-zookeeper-{}.demo-zookeeper-nodes.data.svc.cluster.local"
    # a client address in a server line would open a plaintext client port on it
    assert servers == [f"server.{n + 1}={host.format(n)}:2888:3888" for n in range(3)]
    assert cfg["serverCnxnFactory"] == "org.apache.zookeeper.server.NettyServerCnxnFactory"
    assert cfg["ssl.clientAuth"] == "need"
    assert cfg["authProvider.x509"] == "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
    assert (cfg["ssl.keyStore.type"], cfg["ssl.trustStore.type"]) == ("PEM", "PEM")
    assert cfg["sslQuorum"] == "true"
    assert cfg["ssl.quorum.clientAuth"] == "need"
    assert cfg["ssl.quorum.hostnameVerification"] == "true"
    assert (cfg["ssl.quorum.keyStore.type"], cfg["ssl.quorum.trustStore.type"]) == ("PEM", "PEM")
    # trusted: the cluster CA's bundle of the mounted C-zookeeper-certs, nothing else
    trust = f"{names.ZOOKEEPER_CERTS_DIR}/ca.crt"
    assert cfg["ssl.trustStore.location"] == cfg["ssl.quorum.trustStore.location"] == trust
    assert secret_mounts(pod(spec(secured=True), "zookeeper")) == {
        names.ZOOKEEPER_CERTS_DIR: "demo-zookeeper-certs"
    }


def test_an_unsecured_zookeeper_is_as_before():
    lines = zoo_cfg(spec(secured=False))
    assert not [line for line in lines if line.startswith(("ssl", "secure", "authProvider"))]
    assert all(line.endswith(":2181") for line in lines if line.startswith("server."))
    assert secret_mounts(pod(spec(secured=False), "zookeeper")) == {}
    zk = pod(spec(secured=False), "zookeeper")["containers"][0]
    assert zk["command"][2] == (
        'expr "$POD_INDEX" + 1 > /data/myid && exec zkServer.sh start-foreground'
    )


def run_start_script(cluster: ClusterSpec, tmp_path: Path, pod_name: str) -> dict[str, str]:
    """Run the ZooKeeper container's command with a zkServer.sh that prints what it got."""
    (zk,) = pod(cluster, "zookeeper")["containers"]
    data = tmp_path / "data"
    data.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "zkServer.sh"
    fake.write_text('#!/bin/sh\necho "ARGS=$*"\necho "SERVER_JVMFLAGS=$SERVER_JVMFLAGS"\n')
    fake.chmod(0o755)
    script = zk["command"][2].replace("/data/", f"{data}/")
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "POD_INDEX": pod_name.rsplit("-", 1)[1],
        "POD_NAME": pod_name,
    }
    out = subprocess.run(
        [*zk["command"][:2], script], env=env, capture_output=True, text=True, timeout=10
    )
    assert out.returncode == 0, out.stderr
    result = dict(line.split("=", 1) for line in out.stdout.splitlines())
    result["myid"] = (data / "myid").read_text().strip()
    return result


def test_each_server_starts_on_its_own_key_store_from_the_mounted_secret(tmp_path):
    cluster = spec(secured=True)
    (zk,) = pod(cluster, "zookeeper")["containers"]
    assert "$(" not in zk["command"][2]  # nothing for Kubernetes' expansion to touch
    got = run_start_script(cluster, tmp_path, "demo-zookeeper-2")
    assert got["myid"] == "3"
    assert got["ARGS"] == "start-foreground"
    pem = f"{names.ZOOKEEPER_CERTS_DIR}/demo-zookeeper-2.pem"  # the pki's <pod>.pem key
    assert got["SERVER_JVMFLAGS"].split() == [
        f"-Dzookeeper.ssl.keyStore.location={pem}",
        f"-Dzookeeper.ssl.quorum.keyStore.location={pem}",
    ]


@pytest.mark.parametrize("component", ["broker", "controller"])
def test_brokers_and_controllers_reach_zookeeper_over_tls_as_one_identity(component):
    cluster = spec(secured=True)
    objs = objects(cluster)
    data = objs[("ConfigMap", f"demo-{component}-config")]["data"]
    text = data["broker.properties"] if component == "broker" else data["controller-0.properties"]
    props = {p.key: p.value for p in parse_properties(text)}
    (container,) = pod(cluster, component)["containers"]
    env = {"POD_INDEX": "0", "POD_IP": "10.0.0.1", "POD_NAME": f"demo-{component}-0"}
    argv = [re.sub(r"\$\(([A-Z_]+)\)", lambda m: env[m[1]], a) for a in container["args"]]
    overrides = parse_overrides(argv[i + 1] for i, a in enumerate(argv) if a == "--override")
    parse = BrokerConfig if component == "broker" else ControllerConfig
    config = parse.from_properties({**props, **overrides})
    zk = ZkClientSettings.of(config)
    zk.check()
    assert zk.ssl_client_enable and zk.set_acl
    assert zk.check_hostname  # the server's certificate must name the client Service
    assert zk.keystore_location == f"{ZK_CLIENT_DIR}/{names.ZOOKEEPER_CLIENT_PEM}"
    assert zk.truststore_location == f"{ZK_CLIENT_DIR}/ca.crt"
    # the files named are the keys of the Secret the pod mounts there
    assert secret_mounts(pod(cluster, component))[ZK_CLIENT_DIR] == "demo-zookeeper-client-certs"
    # the keys of C-zookeeper-client-certs (reconcile/certificates.py writes exactly these)
    assert {os.path.basename(p) for p in (zk.keystore_location, zk.truststore_location)} == {
        names.ZOOKEEPER_CLIENT_PEM,
        "ca.crt",
    }


def test_unsecured_brokers_and_controllers_keep_plaintext_zookeeper():
    cluster = spec(secured=False)
    objs = objects(cluster)
    for text in (
        objs[("ConfigMap", "demo-broker-config")]["data"]["broker.properties"],
        objs[("ConfigMap", "demo-controller-config")]["data"]["controller-0.properties"],
    ):
        assert "zookeeper.ssl" not in text and "zookeeper.set.acl" not in text
    for component in ("broker", "controller"):
        assert ZK_CLIENT_DIR not in secret_mounts(pod(cluster, component))


def test_a_zookeeper_certificate_names_its_pod_and_the_client_service():
    cluster = spec(secured=True)
    dns = zookeeper_tls.server_dns_names(cluster, 1)
    assert "demo-zookeeper-1.demo-zookeeper-nodes.data.svc.cluster.local" in dns  # its peers'
    assert "demo-zookeeper-1.demo-zookeeper-nodes.data.svc" in dns  # reverse lookup's form
    host = names.zookeeper_connect("demo", "data").split(":", 1)[0]
    assert host in dns  # what brokers and controllers connect to and check
    assert not any("zookeeper-0" in name or "zookeeper-2" in name for name in dns)


def test_securing_restarts_zookeeper_and_every_secured_object_is_valid_kubernetes():
    plain, secured = objects(spec(secured=False)), objects(spec(secured=True))
    key = ("StatefulSet", "demo-zookeeper")
    annotations = [o[key]["spec"]["template"]["metadata"]["annotations"] for o in (plain, secured)]
    assert (
        annotations[0][names.CONFIG_HASH_ANNOTATION] != annotations[1][names.CONFIG_HASH_ANNOTATION]
    )
    for obj in secured.values():
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    "key",
    [
        "zookeeper.ssl.client.enable",
        "zookeeper.set.acl",
        "zookeeper.clientCnxnSocket",
        "zookeeper.ssl.keystore.location",
        "zookeeper.ssl.endpoint.identification.algorithm",
    ],
)
def test_the_zookeeper_client_keys_are_the_operators(key):
    body = {"metadata": {"name": "demo"}, "spec": {"brokers": {"config": {key: "true"}}}}
    with pytest.raises(SpecError) as refused:
        ClusterSpec.from_resource(body)
    assert refused.value.field == f"spec.brokers.config[{key}]"
    assert "ZooKeeper over mutual TLS" in str(refused.value)
