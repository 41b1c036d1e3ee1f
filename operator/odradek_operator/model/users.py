"""An ``OdradekUser`` (Strimzi's KafkaUser): its spec read once, and the Secret it is given.

``UserSpec.from_resource(body)`` reads the resource; anything the operator would not honour is a
``SpecError`` naming the field (an unknown operation, resource type or pattern type, an operation
the resource type does not have, a cluster with a name, a field the operator does not know). The
vocabulary (the enums) is the CRD's (model/crds.py); which operations each resource type takes is
Kafka's ``AclEntry.supportedOperations`` (``odradek.security.acl.SUPPORTED_OPERATIONS``, the
table the brokers and ``odradek acls`` use).

The user is ``User:<metadata.name>`` in Kafka, whatever its authentication: its SCRAM user name,
or the CN of its client certificate (``CN=<name>``, which the cluster's tls listeners map to
``<name>``). A rule with several operations is one ACL per operation, as Kafka stores them
(``UserSpec.acl_bindings``: the exact set the user's principal must have, nothing more).

``user_secret`` builds the Secret named after the user (HELPERS' contract, Strimzi's keys):
``password`` and ``sasl.jaas.config`` (scram-sha-512) or ``user.crt``, ``user.key`` and
``user.pem`` (tls); always ``ca.crt`` (the cluster CA, to trust the brokers) and
``client.properties`` (the Java client's keys, with files where the Secret is mounted at
``USER_SECRET_MOUNT``). ``credential_fingerprint`` is what the Secret's annotation
``odradek.io/credential`` holds: which password the SCRAM credential was set with (a sha256 of
the password, which sits in the same Secret), so a pass knows when to set it again.

Pure: no I/O (randomness comes from the caller's ``random.Random``); any thread may call it.
"""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
)
from odradek_operator import names
from odradek_operator.model import crds
from odradek_operator.model.meta import render_properties
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.listeners import Listener
from odradek_operator.model.spec.readers import SpecError, _only, crd_default
from odradek_operator.pki.secrets import encode

__all__ = [
    "AUTH_SCRAM",
    "AUTH_TLS",
    "CREDENTIAL_ANNOTATION",
    "SCRAM_ITERATIONS",
    "SCRAM_MECHANISM",
    "USER_SECRET_MOUNT",
    "PasswordRef",
    "Quotas",
    "UserSpec",
    "credential_fingerprint",
    "new_password",
    "user_listener",
    "user_secret",
]

AUTH_SCRAM, AUTH_TLS = crds.USER_AUTHENTICATION_TYPES
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096  # Kafka's kafka-configs.sh default
PASSWORD_LENGTH = 32  # a generated password: letters and digits (Strimzi's length)
_PASSWORD_ALPHABET = string.ascii_letters + string.digits
CN_MAX = 64  # X.509's ub-common-name: a tls user's name is its certificate's CN
CREDENTIAL_ANNOTATION = f"{names.GROUP}/credential"
# Where the documented client.properties expects the Secret's files (a pod mounts it there).
USER_SECRET_MOUNT = "/etc/odradek/user"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_RESOURCE_TYPES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.CLUSTER,
    "transactionalId": ResourceType.TRANSACTIONAL_ID,
}
_PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefix": PatternType.PREFIXED}
_PERMISSIONS = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}
# The defaults of an ACL rule's fields are the CRD's (allow, literal; the host is Kafka's "*").
_ACL = "spec.authorization.acls[]"
_DEFAULT_PERMISSION: str = crd_default(names.USER_KIND, f"{_ACL}.type")
_DEFAULT_PATTERN_TYPE: str = crd_default(names.USER_KIND, f"{_ACL}.resource.patternType")
_OPERATIONS = {kafka_name(op): op for op in AclOperation if kafka_name(op) in crds.ACL_OPERATIONS}
# spec.quotas -> Kafka's client quota keys (user entity), and whether the value is a LONG.
QUOTA_KEYS: Mapping[str, tuple[str, bool]] = {
    "producerByteRate": ("producer_byte_rate", True),
    "consumerByteRate": ("consumer_byte_rate", True),
    "requestPercentage": ("request_percentage", False),
    "controllerMutationRate": ("controller_mutation_rate", False),
}
if set(_RESOURCE_TYPES) != set(crds.ACL_RESOURCE_TYPES) or set(_OPERATIONS) != set(
    crds.ACL_OPERATIONS
):
    raise RuntimeError("model/users.py and the OdradekUser CRD disagree on the ACL vocabulary")


@dataclass(frozen=True, slots=True)
class PasswordRef:
    """``spec.authentication.password.valueFrom.secretKeyRef``: a password the user gives."""

    secret: str
    key: str


@dataclass(frozen=True, slots=True)
class Quotas:
    """Kafka's client quota keys of the user entity and their values (only those set)."""

    values: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class UserSpec:
    name: str  # metadata.name: the Kafka user name
    namespace: str
    uid: str
    cluster: str  # the label odradek.io/cluster
    authentication: str  # AUTH_SCRAM or AUTH_TLS
    password: PasswordRef | None  # scram-sha-512 with a given password
    acls: tuple[AclBinding, ...]  # one per operation of each rule, in the spec's order
    quotas: Quotas

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    def acl_bindings(self) -> frozenset[AclBinding]:
        return frozenset(self.acls)

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> UserSpec:
        metadata = _mapping(body.get("metadata"), "metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise SpecError("metadata.name", "required")
        labels = _mapping(metadata.get("labels"), "metadata.labels")
        cluster = labels.get(names.CLUSTER_LABEL)
        if not isinstance(cluster, str) or not cluster:
            raise SpecError(
                f"metadata.labels[{names.CLUSTER_LABEL}]",
                "required: the OdradekCluster (in this namespace) the user belongs to",
            )
        if name == names.OPERATOR_PRINCIPAL_NAME:
            raise SpecError(
                "metadata.name",
                f"{name} is the operator's own principal (a super user): choose another name",
            )
        spec = _mapping(body.get("spec"), "spec")
        _only(spec, "spec", ("authentication", "authorization", "quotas"))
        authentication, password = _authentication(spec.get("authentication"), name)
        return cls(
            name=name,
            namespace=str(metadata.get("namespace") or "default"),
            uid=str(metadata.get("uid") or ""),
            cluster=cluster,
            authentication=authentication,
            password=password,
            acls=_acls(spec.get("authorization"), f"User:{name}"),
            quotas=_quotas(spec.get("quotas")),
        )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(where, f"must be an object, not {type(value).__name__}")
    return value


def _choice(section: Mapping[str, Any], key: str, where: str, choices, default=None):
    value = section.get(key, default)
    if value not in choices:
        raise SpecError(
            f"{where}.{key}",
            f"{value!r} is not supported (one of: {', '.join(map(str, choices))})",
        )
    return choices[value] if isinstance(choices, Mapping) else value


def _authentication(value: object, name: str) -> tuple[str, PasswordRef | None]:
    where = "spec.authentication"
    if value is None:
        raise SpecError(where, f"required: type {AUTH_SCRAM} or {AUTH_TLS}")
    section = _mapping(value, where)
    _only(section, where, ("type", "password"))
    kind = _choice(section, "type", where, crds.USER_AUTHENTICATION_TYPES)
    if kind == AUTH_TLS and len(name) > CN_MAX:
        raise SpecError(
            "metadata.name",
            f"a tls user's name is its certificate's CN, at most {CN_MAX} characters",
        )
    if "password" not in section:
        return kind, None
    if kind != AUTH_SCRAM:
        raise SpecError(f"{where}.password", f"only with type {AUTH_SCRAM}")
    password = _mapping(section["password"], f"{where}.password")
    _only(password, f"{where}.password", ("valueFrom",))
    value_from = _mapping(password.get("valueFrom"), f"{where}.password.valueFrom")
    _only(value_from, f"{where}.password.valueFrom", ("secretKeyRef",))
    ref_where = f"{where}.password.valueFrom.secretKeyRef"
    ref = _mapping(value_from.get("secretKeyRef"), ref_where)
    _only(ref, ref_where, ("name", "key"))
    secret, key = ref.get("name"), ref.get("key")
    if not isinstance(secret, str) or not secret or not isinstance(key, str) or not key:
        raise SpecError(ref_where, "name and key are required")
    if secret == name:
        raise SpecError(
            f"{ref_where}.name",
            f"Secret {name} is the one the operator writes for this user: keep the password "
            "in another Secret",
        )
    return kind, PasswordRef(secret, key)


def _acls(value: object, principal: str) -> tuple[AclBinding, ...]:
    where = "spec.authorization"
    if value is None:
        return ()
    section = _mapping(value, where)
    _only(section, where, ("type", "acls"))
    _choice(section, "type", where, ("simple",))
    rules = section.get("acls") or []
    if not isinstance(rules, list):
        raise SpecError(f"{where}.acls", "must be a list")
    if len(rules) > crds.ACLS_MAX:
        raise SpecError(f"{where}.acls", f"at most {crds.ACLS_MAX} rules")
    bindings: list[AclBinding] = []
    for i, rule in enumerate(rules):
        for binding in _rule(_mapping(rule, f"{where}.acls[{i}]"), f"{where}.acls[{i}]", principal):
            if binding not in bindings:
                bindings.append(binding)
    return tuple(bindings)


def _rule(rule: Mapping[str, Any], where: str, principal: str) -> list[AclBinding]:
    _only(rule, where, ("type", "resource", "operations", "host"))
    permission = _choice(rule, "type", where, _PERMISSIONS, _DEFAULT_PERMISSION)
    resource = _mapping(rule.get("resource"), f"{where}.resource")
    _only(resource, f"{where}.resource", ("type", "name", "patternType"))
    resource_type = _choice(resource, "type", f"{where}.resource", _RESOURCE_TYPES)
    pattern_type = _choice(
        resource, "patternType", f"{where}.resource", _PATTERN_TYPES, _DEFAULT_PATTERN_TYPE
    )
    name = resource.get("name")
    if resource_type is ResourceType.CLUSTER:
        if name is not None:
            raise SpecError(f"{where}.resource.name", "the cluster has no name: leave it out")
        if pattern_type is not PatternType.LITERAL:
            raise SpecError(f"{where}.resource.patternType", "the cluster takes literal only")
        name = CLUSTER_NAME
    elif not isinstance(name, str) or not name:
        raise SpecError(f"{where}.resource.name", "required for a topic, group or transactionalId")
    host = rule.get("host", WILDCARD_HOST)
    if not isinstance(host, str) or not host:
        raise SpecError(f"{where}.host", "a client address, or *")
    operations = rule.get("operations")
    if not isinstance(operations, list) or not operations:
        raise SpecError(f"{where}.operations", "required: a list of operations")
    bindings = []
    for j, text in enumerate(operations):
        operation = _OPERATIONS.get(text) if isinstance(text, str) else None
        if operation is None:
            raise SpecError(
                f"{where}.operations[{j}]",
                f"{text!r} is not an operation (one of: {', '.join(crds.ACL_OPERATIONS)})",
            )
        supported = SUPPORTED_OPERATIONS[resource_type]
        if operation is not AclOperation.ALL and operation not in supported:
            raise SpecError(
                f"{where}.operations[{j}]",
                f"a {resource['type']} takes only "
                f"{', '.join(sorted(kafka_name(o) for o in supported))} or All, not {text}",
            )
        binding = AclBinding(
            ResourcePattern(resource_type, name, pattern_type),
            AccessControlEntry(principal, host, operation, permission),
        )
        reason = binding.invalid_reason()
        if reason is not None:
            raise SpecError(f"{where}.resource.name", reason)
        bindings.append(binding)
    return bindings


def _quotas(value: object) -> Quotas:
    where = "spec.quotas"
    section = _mapping(value, where)
    _only(section, where, tuple(QUOTA_KEYS))
    values: dict[str, float] = {}
    for field, raw in section.items():
        key, is_long = QUOTA_KEYS[field]
        is_number = isinstance(raw, int | float) and not isinstance(raw, bool)
        if not is_number or raw < 0 or (is_long and int(raw) != raw):
            kind = "a whole number" if is_long else "a number"
            raise SpecError(f"{where}.{field}", f"{kind} of 0 or more, not {raw!r}")
        values[key] = float(raw)
    return Quotas(values)


# --- the Secret ---------------------------------------------------------------------------------


def new_password(rng: random.Random) -> str:
    """A generated password: ``PASSWORD_LENGTH`` letters and digits (pass ``SystemRandom``)."""
    return "".join(rng.choice(_PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH))


def password_problem(password: str) -> str | None:
    """Why ``password`` cannot be a SCRAM password here (None: it can): empty, or a character the
    JAAS value in ``sasl.jaas.config`` cannot carry as Kafka's parser reads it."""
    if not password:
        return "the password is empty"
    if any(c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in password):
        return "the password holds a double quote, a backslash or a control character"
    return None


def credential_fingerprint(password: str) -> str:
    """What the Secret's ``CREDENTIAL_ANNOTATION`` holds once the credential is set."""
    text = f"{SCRAM_MECHANISM}:{SCRAM_ITERATIONS}:{password}"
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def jaas_config(user: str, password: str) -> str:
    return f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{password}";'


def client_properties(spec: UserSpec, listener: Listener | None, jaas: str | None) -> str:
    """The Java client's settings for ``listener`` (none known yet: TLS assumed, as a secured
    cluster's client listeners are), files under ``USER_SECRET_MOUNT``."""
    tls = listener.tls if listener is not None else True
    props: dict[str, str] = {}
    if spec.authentication == AUTH_SCRAM:
        props["security.protocol"] = listener.security_protocol if listener else "SASL_SSL"
        props["sasl.mechanism"] = SCRAM_MECHANISM
        props["sasl.jaas.config"] = jaas or ""
    else:
        props["security.protocol"] = "SSL"
        props["ssl.keystore.type"] = "PEM"
        props["ssl.keystore.location"] = f"{USER_SECRET_MOUNT}/user.pem"
    if tls:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = f"{USER_SECRET_MOUNT}/ca.crt"
    where = f"listener {listener.kafka_name} (port {listener.port})" if listener else "the cluster"
    header = (
        f"OdradekUser {spec.name} of cluster {spec.cluster}: {where}.\n"
        f"Written by the operator; mount the Secret at {USER_SECRET_MOUNT}. "
        "bootstrap.servers: the cluster's status.bootstrap."
    )
    return render_properties(props, header)


def user_secret(
    spec: UserSpec,
    *,
    ca_crt: str,
    listener: Listener | None,
    password: str | None = None,
    certificate: str | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """The Secret ``spec.name``: the password (scram-sha-512) or ``certificate`` and ``key``
    (PEM; tls), the cluster CA's ``ca_crt`` and client.properties; owned by the OdradekUser."""
    data: dict[str, str] = {"ca.crt": ca_crt}
    annotations: dict[str, str] = {}
    jaas = None
    if spec.authentication == AUTH_SCRAM:
        if password is None:
            raise ValueError("a scram-sha-512 user's Secret needs its password")
        jaas = jaas_config(spec.name, password)
        data["password"] = password
        data["sasl.jaas.config"] = jaas
        annotations[CREDENTIAL_ANNOTATION] = credential_fingerprint(password)
    else:
        if certificate is None or key is None:
            raise ValueError("a tls user's Secret needs its certificate and key")
        data["user.crt"] = certificate
        data["user.key"] = key
        data["user.pem"] = key.rstrip("\n") + "\n" + certificate
    data["client.properties"] = client_properties(spec, listener, jaas)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": {**names.labels(spec.cluster), names.CLUSTER_LABEL: spec.cluster},
            "annotations": annotations,
            "ownerReferences": [owner_reference(spec)],
        },
        "data": encode(dict(sorted(data.items()))),
    }


def user_listener(cluster: ClusterSpec, authentication: str) -> Listener | None:
    """The first of the cluster's listeners whose authentication is the user's (None: none
    takes it, so the user cannot connect yet)."""
    return next((lst for lst in cluster.listeners if lst.authentication == authentication), None)


def owner_reference(spec: UserSpec) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.USER_KIND,
        "name": spec.name,
        "uid": spec.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
