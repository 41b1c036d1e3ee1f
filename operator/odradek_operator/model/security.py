"""The brokers' and controllers' listeners, TLS, SASL and authorizer keys, and the certificate
volumes their pods mount.

Unsecured (no listener with tls or authentication: the default) nothing changes: the client
listener is ``PLAINTEXT``, INTERNAL and CONTROL_PLANE are PLAINTEXT, everything is advertised on
the pod's IP.

Secured (``ClusterSpec.secured``):

- each ``spec.listeners`` entry is a listener named ``name`` upper case, SSL, SASL_SSL,
  SASL_PLAINTEXT or PLAINTEXT; ``tls`` authentication is ``ssl.client.auth=required`` against
  the clients CA (its bundle ``clients-ca.crt`` in the brokers' Secret), ``scram-sha-512`` is
  SASL with SCRAM-SHA-512 (credentials in ZooKeeper, OdradekUser's);
- INTERNAL and CONTROL_PLANE are SSL with ``ssl.client.auth=required`` against the cluster CA,
  and so is the controllers' listener: only a certificate of the cluster CA gets in;
- every pod presents its own leaf, ``<CERTS_DIR>/<pod>.pem`` (key then chain, from the
  ``<C>-<component>-certs`` Secret), and trusts ``<CERTS_DIR>/ca.crt`` (the cluster CA bundle,
  old and new while a renewed CA replaces the old one);
- every listener is advertised on the pod's DNS name through its headless Service
  (``<pod>.<C>-broker-nodes.<ns>.svc.cluster.local``), a subjectAltName of its leaf, since
  peers check host names (Kafka's ``ssl.endpoint.identification.algorithm=https``) and a pod's
  IP is not known when its certificate is made; the controller binds its listener on that name;
- ``ssl.principal.mapping.rules`` maps a certificate whose subject is only ``CN=U`` (the clients
  CA's users, the operator's own ``CN=odradek-operator``) to ``User:U``; every other subject
  stays whole, so the brokers are ``User:CN=<C>-broker,O=odradek.io``, a name no user
  certificate can take;
- the ACL authorizer is on, ``super.users`` the brokers', the controllers', the operator's
  principals and ``spec.authorization.superUsers``.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator import names
from odradek_operator.model.spec.cluster import ClusterSpec

__all__ = [
    "ACL_AUTHORIZER",
    "PRINCIPAL_MAPPING_RULES",
    "advertised_host",
    "broker_listener_protocols",
    "broker_properties",
    "client_ports",
    "certificate_volumes",
    "component_principal",
    "controller_properties",
    "keystore_override",
    "super_users",
]

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
CERTS_VOLUME = "certs"
CA_FILE = "ca.crt"
CLIENTS_CA_FILE = "clients-ca.crt"  # in the brokers' Secret: the clients CA bundle


def component_principal(cluster: str, component: names.Component) -> str:
    """The principal of a component's certificates (subject ``CN=<C>-<component>,O=odradek.io``
    as RFC 2253 prints it)."""
    return f"User:CN={names.component_principal_name(cluster, component)},O={names.GROUP}"


def super_users(cluster: ClusterSpec) -> list[str]:
    own = [
        component_principal(cluster.name, names.Component.BROKER),
        component_principal(cluster.name, names.Component.CONTROLLER),
        f"User:{names.OPERATOR_PRINCIPAL_NAME}",
    ]
    extra = cluster.authorization.super_users if cluster.authorization else ()
    return list(dict.fromkeys([*own, *extra]))


def advertised_host(cluster: ClusterSpec, component: names.Component) -> str:
    """What a pod advertises: its IP, or when secured its DNS name (a SAN of its leaf)."""
    if not cluster.secured:
        return f"$({names.ENV_POD_IP})"
    nodes = names.headless_service(cluster.name, component)
    return f"$({names.ENV_POD_NAME}).{names.service_host(nodes, cluster.namespace)}"


def keystore_override(cluster: ClusterSpec) -> list[str]:
    """The per-pod ``--override`` of a secured pod: its own key and certificate."""
    if not cluster.secured:
        return []
    return [f"ssl.keystore.location={names.CERTS_DIR}/$({names.ENV_POD_NAME}).pem"]


def broker_listener_protocols(cluster: ClusterSpec) -> dict[str, str]:
    """Kafka listener name -> security protocol, the client listeners first."""
    internal = "SSL" if cluster.secured else "PLAINTEXT"
    client = {listener.kafka_name: listener.security_protocol for listener in cluster.listeners}
    return {
        **client,
        names.CONTROL_PLANE_LISTENER: internal,
        names.INTERNAL_LISTENER: internal,
    }


def client_ports(cluster: ClusterSpec) -> list[tuple[str, int]]:
    """(container port name, port) of each client listener: the first is ``client`` (as before
    spec.listeners), the others their listener's name (never a reserved one, spec/listeners.py)."""
    return [
        ("client" if i == 0 else listener.name, listener.port)
        for i, listener in enumerate(cluster.listeners)
    ]


def _tls_stores() -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": f"{names.CERTS_DIR}/{CA_FILE}",
        "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
    }


def _authorizer(cluster: ClusterSpec) -> dict[str, str]:
    return {"authorizer.class.name": ACL_AUTHORIZER, "super.users": ";".join(super_users(cluster))}


def broker_properties(cluster: ClusterSpec) -> dict[str, str]:
    """The security part of broker.properties (the listener map always; the rest when secured)."""
    protocols = broker_listener_protocols(cluster)
    props = {"listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items())}
    if not cluster.secured:
        return props
    props.update(_tls_stores())
    props.update(_authorizer(cluster))
    for internal in (names.INTERNAL_LISTENER, names.CONTROL_PLANE_LISTENER):
        props[f"listener.name.{internal.lower()}.ssl.client.auth"] = "required"
    for listener in cluster.listeners:
        prefix = f"listener.name.{listener.kafka_name.lower()}."
        if listener.authentication == "tls":
            props[prefix + "ssl.client.auth"] = "required"
            props[prefix + "ssl.truststore.location"] = f"{names.CERTS_DIR}/{CLIENTS_CA_FILE}"
        elif listener.tls:
            props[prefix + "ssl.client.auth"] = "none"
        if listener.authentication == "scram-sha-512":
            props[prefix + "sasl.enabled.mechanisms"] = SCRAM_MECHANISM
            props[prefix + f"{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = SCRAM_JAAS
    return props


def controller_properties(cluster: ClusterSpec) -> dict[str, str]:
    """The security part of a controller's file: its listener SSL with client certificates of
    the cluster CA only, and the brokers' authorizer."""
    if not cluster.secured:
        return {}
    return {
        "listener.security.protocol.map": f"{names.CONTROLLER_LISTENER}:SSL",
        **_tls_stores(),
        "ssl.client.auth": "required",
        **_authorizer(cluster),
    }


def certificate_volumes(
    cluster: ClusterSpec, component: names.Component
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container mounts) of a secured pod's certificates; ([], []) unsecured.
    The brokers' Secret also holds the clients CA bundle (``clients-ca.crt``), so one volume
    and one hash cover everything a broker trusts."""
    if not cluster.secured:
        return [], []
    secret = {"secretName": names.certs_secret(cluster.name, component), "defaultMode": 0o440}
    volumes = [{"name": CERTS_VOLUME, "secret": secret}]
    mounts = [{"name": CERTS_VOLUME, "mountPath": names.CERTS_DIR, "readOnly": True}]
    return volumes, mounts
