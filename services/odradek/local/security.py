"""``odradek local up --security sasl_ssl``: a local cluster secured as a Kafka cluster is.

What ``sasl_ssl`` sets up, under the data directory:

- ``pki/``: a CA and one certificate per role (``LocalPki``): ``broker.pem`` (CN=broker, shared by
  the brokers, as Kafka's brokers usually share one principal) and ``controller.pem``;
- clients connect to each broker's ``SASL_SSL`` listener with SCRAM-SHA-512 over TLS (no client
  certificate asked); brokers replicate over an ``INTERNAL`` SSL listener and the controller and
  the brokers talk over SSL (the control-plane listener and the controller's), all with
  ``ssl.client.auth=required``: only the CA's certificates get in;
- Kafka's ACL authorizer with ``User:broker``, ``User:controller`` and ``User:admin`` as super
  users, so no other principal can act as a broker or the controller, or do anything an ACL
  does not allow;
- a superuser ``admin`` whose SCRAM-SHA-512 credential (a random password, kept in
  ``admin.password``, 0600) is written to ZooKeeper in Kafka's format before any broker starts;
- ``client.properties``: what a client needs, librdkafka's names (``security.protocol``,
  ``sasl.mechanism``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``) and the Java
  client's (``sasl.jaas.config``, ``ssl.truststore.type=PEM``, ``ssl.truststore.location``), with
  ``bootstrap.servers``.

ZooKeeper stays on 127.0.0.1 without TLS: it is this machine's (docs/security.md says how to run
it over TLS with ``zookeeper.set.acl``). Plaintext (no option) stays the default; its brokers
replicate over a PLAINTEXT ``INTERNAL`` listener, apart from the clients' (``secure``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from odradek.local.pki import LocalPki
from odradek.security.scram import ScramMechanism, credential_from_password, sanitize
from odradek.zk.paths import EntityConfig, entity_config_path

__all__ = ["ADMIN_USER", "MODES", "LocalSecurity", "secure"]

MODES = ("plaintext", "sasl_ssl")
ADMIN_USER = "admin"
CLIENT_LISTENER = "SASL_SSL"
INTERNAL_LISTENER = "INTERNAL"
MECHANISM = ScramMechanism.SCRAM_SHA_512
SCRAM_ITERATIONS = 8192
# broker keys that lay out the listeners: given any, plaintext mode adds no INTERNAL listener
LAYOUT_KEYS = frozenset(
    {"listeners", "listener.security.protocol.map", "inter.broker.listener.name"}
)
PRINCIPAL_RULES = "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"  # CN=broker,O=... -> broker
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SUPER_USERS = f"User:broker;User:controller;User:{ADMIN_USER}"
HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True, slots=True)
class LocalSecurity:
    """What the cluster's processes and clients are given (see the module)."""

    client_listener: str
    broker_overrides: dict[str, str] = field(default_factory=dict)
    controller_overrides: dict[str, str] = field(default_factory=dict)
    internal_listener: str | None = None  # a third broker listener, for replication
    admin_password: str | None = None
    ca_path: str | None = None


def _stores(keystore: Path, ca: Path) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": PRINCIPAL_RULES,
        "authorizer.class.name": AUTHORIZER,
        "super.users": SUPER_USERS,
    }


def _password(data_dir: Path) -> str:
    path = data_dir / "admin.password"
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    return password


def secure(
    data_dir: Path, mode: str, broker_overrides: Mapping[str, str] | None = None
) -> LocalSecurity:
    """The settings of ``mode`` for a cluster in ``data_dir`` (certificates made there).

    Plaintext brokers replicate over a PLAINTEXT ``INTERNAL`` listener of their own, so no
    client flood of the client listener can keep a follower out (``max.connections``); unless
    ``broker_overrides`` lay out the listeners themselves (``LAYOUT_KEYS``), which then win."""
    if mode == "plaintext":
        if broker_overrides is not None and LAYOUT_KEYS & broker_overrides.keys():
            return LocalSecurity("PLAINTEXT")
        return LocalSecurity(
            "PLAINTEXT",
            broker_overrides={
                "listener.security.protocol.map": (
                    f"PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,{INTERNAL_LISTENER}:PLAINTEXT"
                ),
                "inter.broker.listener.name": INTERNAL_LISTENER,
            },
            internal_listener=INTERNAL_LISTENER,
        )
    if mode != "sasl_ssl":
        raise ValueError(f"--security {mode}: choose one of {', '.join(MODES)}")
    pki = LocalPki.create(data_dir / "pki", HOSTS)
    broker = _stores(pki.issue("broker"), pki.ca_path)
    controller = _stores(pki.issue("controller"), pki.ca_path)
    return LocalSecurity(
        CLIENT_LISTENER,
        broker_overrides={
            "listener.security.protocol.map": (
                f"{CLIENT_LISTENER}:SASL_SSL,CONTROL_PLANE:SSL,{INTERNAL_LISTENER}:SSL"
            ),
            "inter.broker.listener.name": INTERNAL_LISTENER,
            "sasl.enabled.mechanisms": MECHANISM.mechanism_name,
            f"listener.name.{CLIENT_LISTENER.lower()}.ssl.client.auth": "none",
            **broker,
        },
        controller_overrides={"listener.security.protocol.map": "CONTROLLER:SSL", **controller},
        internal_listener=INTERNAL_LISTENER,
        admin_password=_password(data_dir),
        ca_path=str(pki.ca_path),
    )


def write_admin_credential(zookeeper_connect: str, security: LocalSecurity) -> None:
    """The admin's SCRAM credential at ``/config/users/admin`` (Kafka's format), unless one is
    there already (a cluster started again keeps its credentials)."""
    if security.admin_password is None:
        return
    credential = credential_from_password(MECHANISM, security.admin_password, SCRAM_ITERATIONS)
    node = EntityConfig({MECHANISM.mechanism_name: credential.encode()})
    hosts, slash, chroot = zookeeper_connect.partition("/")
    client = KazooClient(hosts, timeout=10)  # the chroot may not exist yet: full paths
    client.start(timeout=10)
    try:
        path = (slash + chroot).rstrip("/") + entity_config_path("users", sanitize(ADMIN_USER))
        with contextlib.suppress(NodeExistsError):  # kept from an earlier start
            client.create(path, node.encode(), makepath=True)
    finally:
        client.stop()
        client.close()


def client_config(security: LocalSecurity, bootstrap: str) -> dict[str, str]:
    """librdkafka's settings for the admin (confluent-kafka, kcat)."""
    config = {"bootstrap.servers": bootstrap}
    if security.admin_password is None:
        return config
    return {
        **config,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM.mechanism_name,
        "sasl.username": ADMIN_USER,
        "sasl.password": security.admin_password,
        "ssl.ca.location": str(security.ca_path),
    }


def write_client_properties(data_dir: Path, security: LocalSecurity, bootstrap: str) -> Path:
    """``<data-dir>/client.properties`` (0600): librdkafka's keys, then the Java client's."""
    path = data_dir / "client.properties"
    lines = [f"{key}={value}" for key, value in client_config(security, bootstrap).items()]
    lines += [
        "# The Java client's names for the same (librdkafka refuses these: drop them for kcat -F)",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN_USER}" password="{security.admin_password}";',
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={security.ca_path}",
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
