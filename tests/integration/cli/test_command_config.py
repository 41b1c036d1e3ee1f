"""``--command-config``: the commands work against ``odradek local up --security sasl_ssl`` with
its ``client.properties`` (or a Java-only one), by default without options, the commands on
Odradek's own client over SSL and SASL_SSL, and refuse what they cannot honour in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.local.cluster import ClusterState
from odradek.local.pki import LocalPki
from odradek.local.security import ADMIN_USER, HOSTS, INTERNAL_LISTENER
from support.listener_ports import listener_addresses

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def secured(local_cluster, tmp_path_factory):
    """(a directory whose var/local holds the secured cluster, its data dir)."""
    root = tmp_path_factory.mktemp("cmdcfg")
    data_dir = root / "var" / "local"
    with local_cluster(data_dir, brokers=1, security="sasl_ssl"):
        yield root, data_dir


def odradek(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def ok(cwd: Path, *args: str) -> str:
    result = odradek(cwd, *args)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def failed(cwd: Path, *args: str) -> str:
    result = odradek(cwd, *args)
    assert result.returncode == 1, f"{args}: {result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def test_the_commands_work_with_client_properties(secured, tmp_path):
    _, data_dir = secured
    config = ("--command-config", str(data_dir / "client.properties"))
    # Run elsewhere: the address comes from the file's bootstrap.servers.
    ok(tmp_path, "topics", "create", "cmdcfg", "--partitions", "2", *config)
    assert "cmdcfg" in ok(tmp_path, "topics", "list", *config).split()
    ok(tmp_path, "produce", "cmdcfg", "--num-records", "40", "--record-size", "8", *config)
    consumed = ok(
        tmp_path,
        "consume",
        "cmdcfg",
        "--from-beginning",
        "--max-messages",
        "40",
        "--timeout-ms",
        "20000",
        "--print",
        *config,
    )
    assert len(consumed.splitlines()) == 40
    ok(tmp_path, "acls", "--list", *config)


def test_a_java_client_properties_file_works(secured, tmp_path):
    _, data_dir = secured
    password = (data_dir / "admin.password").read_text().strip()
    state_file = (data_dir / "client.properties").read_text()
    bootstrap = next(
        line.partition("=")[2] for line in state_file.splitlines() if line.startswith("bootstrap")
    )
    java = tmp_path / "java.properties"
    java.write_text(
        f"bootstrap.servers={bootstrap}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="admin" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={data_dir / 'pki' / 'ca.pem'}\n"
    )
    ok(tmp_path, "topics", "list", "--command-config", str(java))


def test_without_options_the_secured_local_cluster_is_the_default(secured):
    root, _ = secured
    ok(root, "topics", "create", "by-default", "--partitions", "1")
    assert "by-default" in ok(root, "topics", "list").split()


def test_what_cannot_be_honoured_is_refused_in_one_line(secured, tmp_path):
    root, _ = secured
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nlinger.ms=5\n")
    error = failed(root, "topics", "list", "--command-config", str(bad))
    assert f"{bad}:2: linger.ms" in error
    jks = tmp_path / "jks.properties"
    jks.write_text("ssl.truststore.location=/etc/truststore.jks\n")
    assert "JKS" in failed(root, "topics", "list", "--command-config", str(jks))
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        (root / "var" / "local" / "client.properties").read_text().split("\n# ")[0]
        + "\nsasl.password=guess\n"
    )
    assert "SASL authentication failed" in failed(
        root, "quotas", "--describe", "--command-config", str(wrong)
    )


def test_the_commands_on_odradeks_own_client_speak_sasl_ssl_by_default(secured):
    root, _ = secured
    ok(root, "quotas", "--describe")
    ok(root, "groups", "list")
    ok(root, "transactions", "list")


def test_the_commands_on_odradeks_own_client_speak_ssl(secured, tmp_path):
    """Over the brokers' INTERNAL listener (mutual TLS): a certificate for CN=admin from the
    cluster's CA is the superuser."""
    _, data_dir = secured
    [broker] = [m for m in ClusterState.read(data_dir).members if m.role == "broker"]
    listeners = listener_addresses(broker)
    pki = LocalPki.create(data_dir / "pki", HOSTS)
    ssl_file = tmp_path / "ssl.properties"
    ssl_file.write_text(
        f"bootstrap.servers={listeners[INTERNAL_LISTENER]}\n"
        "security.protocol=SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_path}\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={pki.issue(ADMIN_USER)}\n"
    )
    config = ("--command-config", str(ssl_file))
    ok(tmp_path, "quotas", "--describe", *config)
    ok(tmp_path, "groups", "list", *config)
    ok(tmp_path, "transactions", "list", *config)
    ok(tmp_path, "topics", "list", *config)  # librdkafka too
