"""The mutual-TLS cluster of the security tests (test_client_matrix, test_control_plane_tls,
test_forgery): one trustme CA, a certificate per principal, and the settings of a cluster whose
own traffic is mutual TLS.

``write_pki`` writes, under ``root``, ``ca.pem`` and for each name (the certificate's CN, which
``PRINCIPAL_RULES`` maps to ``User:<name>``) ``<name>.pem`` (key and chain in one file, a
keystore), ``<name>_cert.pem`` and ``<name>_key.pem`` (apart, for librdkafka and kafka-python).
``cluster_overrides`` gives a cluster with a PLAINTEXT listener for the test harness, and
CONTROL_PLANE, INTERNAL (inter-broker) and the controllers' listener over TLS with
``ssl.client.auth=required`` and the ``broker`` and ``controller`` certificates; client listeners
are added after those. With ``acls`` the ACL authorizer is on with ``broker``, ``controller``
and ``admin`` as super users. Stateless: modules may build their clusters at once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import trustme

__all__ = ["PRINCIPAL_RULES", "SUPER_USERS", "cluster_overrides", "mtls_settings", "write_pki"]

PRINCIPAL_RULES = "RULE:^CN=([^,]*).*$/$1/,DEFAULT"
SUPER_USERS = "User:broker;User:controller;User:admin"


def write_pki(root: Path, names: Iterable[str]) -> dict[str, Path]:
    """The files of the module docstring: ``"ca"``, ``name``, ``f"{name}_cert"``,
    ``f"{name}_key"`` -> path."""
    ca = trustme.CA(organization_name="Odradek tests")
    files = {"ca": root / "ca.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    for name in names:
        cert = ca.issue_cert("127.0.0.1", "localhost", common_name=name)
        for suffix, blob in (
            ("", cert.private_key_and_cert_chain_pem),
            ("_cert", cert.cert_chain_pems[0]),
            ("_key", cert.private_key_pem),
        ):
            files[f"{name}{suffix}"] = root / f"{name}{suffix}.pem"
            blob.write_to_path(str(files[f"{name}{suffix}"]))
    return files


def mtls_settings(keystore: Path, ca: Path, *, acls: bool = False) -> dict[str, str]:
    """A member's TLS settings: its keystore, the CA as truststore, client certificates
    required and mapped to principals by CN; with ``acls`` the ACL authorizer and super users."""
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": PRINCIPAL_RULES,
    }
    if acls:
        settings["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
        settings["super.users"] = SUPER_USERS
    return settings


def cluster_overrides(
    pki: Mapping[str, Path],
    *,
    client_listeners: Mapping[str, str] | None = None,
    acls: bool = False,
) -> tuple[dict[str, str], dict[str, str]]:
    """(broker overrides, controller overrides) for ``local_cluster``; ``client_listeners``:
    listener name -> security protocol, bound after the cluster's own."""
    protocols = {"PLAINTEXT": "PLAINTEXT", "CONTROL_PLANE": "SSL", "INTERNAL": "SSL"}
    protocols.update(client_listeners or {})
    names = list(protocols)
    broker = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in names),
        "listener.security.protocol.map": ",".join(f"{n}:{protocols[n]}" for n in names),
        "inter.broker.listener.name": "INTERNAL",
        **mtls_settings(pki["broker"], pki["ca"], acls=acls),
    }
    controller = {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        **mtls_settings(pki["controller"], pki["ca"], acls=acls),
    }
    return broker, controller
