"""How an ``OdradekConnect``'s workers authenticate to the cluster and what they trust:
``spec.authentication`` and ``spec.tls``, in the shape of Strimzi's KafkaConnect.

```yaml
spec:
  authentication:                # an OdradekUser's Secret, or any Secret of the namespace
    type: scram-sha-512          # scram-sha-256 and plain too; or tls:
    username: connect
    passwordSecret: {secretName: connect, password: password}
    # type: tls
    # certificateAndKey: {secretName: connect, certificate: user.crt, key: user.key}
  tls:
    trustedCertificates: [{secretName: demo-cluster-ca-cert, certificate: ca.crt}]
```

What the workers get (``worker_security_properties``), as Kafka Connect worker keys that
``odradek.connect.worker_security`` maps for librdkafka:

- ``security.protocol``: with ``clusterRef``, that of the listener the workers use (``listener``:
  the first of the cluster's ``spec.listeners`` with the Connect's authentication, ``none``
  without one, and with TLS when ``spec.tls`` is given); with ``bootstrapServers``, ``SSL`` /
  ``SASL_SSL`` when ``spec.tls`` is given, else ``PLAINTEXT`` / ``SASL_PLAINTEXT``.
- SASL: ``sasl.mechanism`` and ``sasl.jaas.config`` whose password is
  ``${odradekenv:ODRADEK_CONNECT_SASL_PASSWORD}``, resolved by the worker's config provider
  (``config.providers``, Kafka's EnvVarConfigProvider) from the environment variable that the
  pod takes from ``passwordSecret`` (``secretKeyRef``). The password is never in the ConfigMap,
  the pod spec or the workers' arguments.
- tls: ``ssl.certificate.location`` and ``ssl.key.location``, files of the ``certificateAndKey``
  Secret.
- trust: ``ssl.ca.location``, one PEM bundle of every trusted certificate: each entry of
  ``spec.tls.trustedCertificates`` names a key (``certificate``) or keys (``pattern``, a glob as
  Strimzi's: ``*.crt``) of a Secret; with ``clusterRef`` and a TLS listener but no ``spec.tls``,
  every ``*.crt`` of the cluster CA's Secret (``<cluster>-cluster-ca-cert``: during a CA renewal
  the new ``ca.crt`` and the old ``ca-<date>.crt``, so the workers trust the brokers before and
  after their certificates are re-issued, as the cluster's own pods do). A worker reads one CA
  file, so the reconciler concatenates them into the Secret ``<name>-connect-trusted-certs``
  (owned by the Connect, model/connect.py), mounted at ``TRUSTED_DIR``.

The certificate and key's Secret is mounted (read-only) at ``CERTS_DIR/<secretName>`` (Strimzi's
``/opt/kafka/connect-certs/<secretName>``). ``referenced`` lists the Secret keys the workers read
besides the bundle: the reconciler hashes their values and the bundle into the pod template, so a
new password, a renewed certificate or a new CA replaces the workers one at a time.

Refused (``SpecError`` naming the field): other authentication types (``oauth``), a missing
field, a ``username`` a JAAS value cannot carry (a double quote, a backslash, a control
character), ``type: tls`` without TLS, a trusted certificate with both or neither of
``certificate`` and ``pattern``, more than ``TRUSTED_MAX`` of them, and, once
``authentication`` or ``tls`` is given, the top-level ``security.protocol``, ``sasl.*`` and
``ssl.*`` keys and the operator's config provider in ``spec.config``.

Pure, no I/O: any thread may call it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.config_providers import CONFIG_PROVIDERS, ENV
from odradek.connect.worker_security import is_security_key
from odradek_operator import names
from odradek_operator.model import crds
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.listeners import Listener
from odradek_operator.model.spec.readers import SpecError, _kind, _mapping, _only

__all__ = [
    "AUTHENTICATION_TYPES",
    "CERTS_DIR",
    "PASSWORD_ENV",
    "ConnectSecurity",
    "SecretKey",
    "TrustedCertificate",
    "WorkerSecurity",
    "trusted_bundle",
]

AUTHENTICATION_TYPES = tuple(crds.CONNECT_AUTHENTICATION_TYPES)
SCRAM_512, SCRAM_256, PLAIN, TLS = AUTHENTICATION_TYPES
_MECHANISMS = {SCRAM_512: "SCRAM-SHA-512", SCRAM_256: "SCRAM-SHA-256", PLAIN: "PLAIN"}
_LOGIN_MODULES = {
    SCRAM_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SCRAM_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
}
# The cluster's listeners' authentication names (model/spec/listeners.py) for each of ours.
_LISTENER_AUTHENTICATION = {SCRAM_512: "scram-sha-512", TLS: "tls", None: "none"}
CERTS_DIR = "/etc/odradek/connect-certs"
TRUSTED_DIR = "/etc/odradek/connect-trusted"  # the bundle Secret's mount
TRUSTED_KEY = "ca.crt"
TRUSTED_VOLUME = "connect-trusted-certs"
TRUSTED_MAX = crds.CONNECT_TRUSTED_MAX
CLUSTER_CA_PATTERN = "*.crt"
PASSWORD_ENV = "ODRADEK_CONNECT_SASL_PASSWORD"
PROVIDER = "odradekenv"  # the operator's config provider (Strimzi's is strimzienv)
CLUSTER_CA_KEY = "ca.crt"


@dataclass(frozen=True, slots=True, order=True)
class SecretKey:
    """One key of a Secret in the Connect's namespace."""

    secret: str
    key: str

    def path(self) -> str:
        return f"{CERTS_DIR}/{self.secret}/{self.key}"


@dataclass(frozen=True, slots=True, order=True)
class TrustedCertificate:
    """One entry of ``spec.tls.trustedCertificates``: a key, or the keys matching a glob."""

    secret: str
    certificate: str | None = None
    pattern: str | None = None

    def matches(self, key: str) -> bool:
        if self.certificate is not None:
            return key == self.certificate
        return fnmatch.fnmatchcase(key, self.pattern or "")


def trusted_bundle(pems: list[tuple[str, str, str]]) -> str:
    """The one CA file: each (secret, key, PEM), sorted, one after the other."""
    return "".join(pem.rstrip("\n") + "\n" for _, _, pem in sorted(pems))


def _ref(section: Mapping[str, Any], where: str, key_field: str) -> SecretKey:
    """``{secretName, <key_field>}``."""
    _only(section, where, ("secretName", key_field))
    values = []
    for field in ("secretName", key_field):
        value = section.get(field)
        if not isinstance(value, str) or not value.strip():
            raise SpecError(f"{where}.{field}", f"required: a string, got {_kind(value)}")
        values.append(value.strip())
    if "/" in values[1] or values[1] in (".", ".."):
        raise SpecError(f"{where}.{key_field}", f"{values[1]!r} is not a key of a Secret")
    return SecretKey(values[0], values[1])


@dataclass(frozen=True, slots=True)
class ConnectSecurity:
    """``spec.authentication`` and ``spec.tls`` as given (module docstring)."""

    authentication: str | None = None  # AUTHENTICATION_TYPES; None: no authentication
    username: str | None = None
    password: SecretKey | None = None
    certificate: SecretKey | None = None
    key: SecretKey | None = None
    trusted: tuple[TrustedCertificate, ...] = ()  # spec.tls.trustedCertificates
    tls: bool = False  # spec.tls given

    @property
    def given(self) -> bool:
        return self.authentication is not None or self.tls

    @classmethod
    def parse(cls, spec: Mapping[str, Any]) -> ConnectSecurity:
        tls_given = spec.get("tls") is not None
        trusted = _trusted(spec.get("tls"), "spec.tls") if tls_given else ()
        raw = spec.get("authentication")
        if raw is None:
            return cls(trusted=trusted, tls=tls_given)
        auth = _mapping(raw, "spec.authentication")
        kind = auth.get("type")
        where = "spec.authentication"
        if kind not in AUTHENTICATION_TYPES:
            raise SpecError(
                f"{where}.type", f"{kind!r} is not one of {', '.join(AUTHENTICATION_TYPES)}"
            )
        if kind == TLS:
            _only(auth, where, ("type", "certificateAndKey"))
            pair = auth.get("certificateAndKey")
            if pair is None:
                raise SpecError(f"{where}.certificateAndKey", "required with type tls")
            pair = _mapping(pair, f"{where}.certificateAndKey")
            _only(pair, f"{where}.certificateAndKey", ("secretName", "certificate", "key"))
            cert = _ref(
                {k: v for k, v in pair.items() if k != "key"},
                f"{where}.certificateAndKey",
                "certificate",
            )
            key = _ref(
                {k: v for k, v in pair.items() if k != "certificate"},
                f"{where}.certificateAndKey",
                "key",
            )
            return cls(TLS, certificate=cert, key=key, trusted=trusted, tls=tls_given)
        _only(auth, where, ("type", "username", "passwordSecret"))
        username = auth.get("username")
        if not isinstance(username, str) or not username:
            raise SpecError(f"{where}.username", f"required: a string, got {_kind(username)}")
        if any(c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in username):
            raise SpecError(
                f"{where}.username",
                "a double quote, a backslash or a control character cannot be carried in "
                "sasl.jaas.config",
            )
        secret = auth.get("passwordSecret")
        if secret is None:
            raise SpecError(f"{where}.passwordSecret", f"required with type {kind}")
        password = _ref(
            _mapping(secret, f"{where}.passwordSecret"), f"{where}.passwordSecret", "password"
        )
        return cls(kind, username, password, trusted=trusted, tls=tls_given)

    def check_worker_config(self, config: Mapping[str, str], cluster_ref: bool) -> None:
        """Keys of ``spec.config`` that these settings own: the top-level security keys once
        ``spec.authentication`` or ``spec.tls`` is given, or the cluster is ``clusterRef``'s
        (its listener decides); the operator's config provider."""
        for key in config:
            if (self.given or cluster_ref) and is_security_key(key):
                raise SpecError(
                    f"spec.config[{key}]",
                    "set by the operator from spec.authentication, spec.tls and the "
                    "clusterRef's listener (a prefixed producer./consumer./admin. key is yours)",
                )
            if key.startswith(f"{CONFIG_PROVIDERS}.{PROVIDER}."):
                raise SpecError(f"spec.config[{key}]", f"the provider {PROVIDER} is the operator's")

    def for_cluster(self, cluster: ClusterSpec | None) -> WorkerSecurity:
        """What the workers use: against ``cluster`` (``clusterRef``), or any cluster
        (``bootstrapServers``: None). ``SpecError`` when ``cluster`` has no listener for it."""
        if cluster is None:
            if self.authentication == TLS and not self.tls:
                raise SpecError("spec.tls", "required with authentication type tls")
            return WorkerSecurity(self, _protocol(self.authentication, self.tls), self.trusted)
        listener = self.listener(cluster)
        trusted = self.trusted
        if listener.tls and not trusted:
            ca = names.cluster_ca_cert_secret(cluster.name)
            trusted = (TrustedCertificate(ca, pattern=CLUSTER_CA_PATTERN),)
        return WorkerSecurity(self, listener.security_protocol, trusted, listener.port)

    def for_check(self, cluster_ref: bool) -> WorkerSecurity:
        """Settings to check the worker file with before the cluster is read: a ``clusterRef``'s
        listener assumed TLS (a secured cluster's are); ``bootstrapServers``' as they will be."""
        if not cluster_ref:
            return self.for_cluster(None)
        trusted = self.trusted or (TrustedCertificate("cluster-ca-cert", CLUSTER_CA_KEY),)
        return WorkerSecurity(self, _protocol(self.authentication, True), trusted)

    def listener(self, cluster: ClusterSpec) -> Listener:
        wanted = _LISTENER_AUTHENTICATION.get(self.authentication, self.authentication)
        for listener in cluster.listeners:
            if listener.authentication == wanted and (listener.tls or not self.tls):
                return listener
        tls = " with tls" if self.tls else ""
        raise SpecError(
            "spec.authentication",
            f"OdradekCluster {cluster.name} has no listener with authentication "
            f"{wanted}{tls} (spec.listeners)",
        )


def _trusted(value: object, where: str) -> tuple[TrustedCertificate, ...]:
    tls = _mapping(value, where)
    _only(tls, where, ("trustedCertificates",))
    certificates = tls.get("trustedCertificates")
    where = f"{where}.trustedCertificates"
    if not isinstance(certificates, list) or not certificates:
        raise SpecError(where, "required: a list of {secretName, certificate or pattern}")
    if len(certificates) > TRUSTED_MAX:
        raise SpecError(where, f"at most {TRUSTED_MAX}")
    out = []
    for i, raw in enumerate(certificates):
        entry = _mapping(raw, f"{where}[{i}]")
        if ("certificate" in entry) == ("pattern" in entry):
            raise SpecError(f"{where}[{i}]", "exactly one of certificate and pattern")
        field = "pattern" if "pattern" in entry else "certificate"
        ref = _ref(entry, f"{where}[{i}]", field)
        out.append(TrustedCertificate(ref.secret, **{field: ref.key}))
    return tuple(out)


def _protocol(authentication: str | None, tls: bool) -> str:
    sasl = authentication in _MECHANISMS
    if tls:
        return "SASL_SSL" if sasl else "SSL"
    return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class WorkerSecurity:
    """The settings resolved against the cluster the workers use."""

    spec: ConnectSecurity
    protocol: str
    trusted: tuple[TrustedCertificate, ...]
    port: int | None = None  # clusterRef: the listener's port

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def properties(self, user_config: Mapping[str, str]) -> dict[str, str]:
        """Worker keys (module docstring); ``user_config``: the user's ``spec.config``, whose
        own ``config.providers`` are kept beside the operator's."""
        if not self.spec.given and self.protocol == "PLAINTEXT":
            return {}
        spec = self.spec
        props = {"security.protocol": self.protocol}
        if spec.authentication in _MECHANISMS:
            providers = [p.strip() for p in user_config.get(CONFIG_PROVIDERS, "").split(",")]
            props[CONFIG_PROVIDERS] = ",".join([*(p for p in providers if p), PROVIDER])
            props[f"{CONFIG_PROVIDERS}.{PROVIDER}.class"] = ENV
            props[f"{CONFIG_PROVIDERS}.{PROVIDER}.param.allowlist.pattern"] = PASSWORD_ENV
            props["sasl.mechanism"] = _MECHANISMS[spec.authentication]
            props["sasl.jaas.config"] = (
                f'{_LOGIN_MODULES[spec.authentication]} required username="{spec.username}" '
                f'password="${{{PROVIDER}:{PASSWORD_ENV}}}";'
            )
        if spec.certificate is not None and spec.key is not None:
            props["ssl.certificate.location"] = spec.certificate.path()
            props["ssl.key.location"] = spec.key.path()
        if self.trusted_sources():
            props["ssl.ca.location"] = f"{TRUSTED_DIR}/{TRUSTED_KEY}"
        return props

    def trusted_sources(self) -> tuple[TrustedCertificate, ...]:
        """What the bundle is made of (nothing without TLS)."""
        return self.trusted if self.tls else ()

    def referenced(self) -> list[SecretKey]:
        """The Secret keys the workers read besides the bundle (the password, the certificate
        and key), sorted."""
        keys = {self.spec.password, self.spec.certificate, self.spec.key}
        return sorted(k for k in keys if k is not None)

    def mounted_secrets(self) -> list[str]:
        """The Secrets mounted at ``CERTS_DIR/<name>`` (the password is an env var)."""
        files = [k for k in self.referenced() if k != self.spec.password]
        return sorted({k.secret for k in files})

    def env(self) -> list[dict[str, Any]]:
        password = self.spec.password
        if password is None:
            return []
        ref = {"name": password.secret, "key": password.key}
        return [{"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": ref}}]

    def volumes(self, trusted_secret: str) -> list[dict[str, Any]]:
        """``trusted_secret``: the bundle's Secret (``<name>-connect-trusted-certs``)."""
        volumes = [
            {"name": f"connect-certs-{i}", "secret": {"secretName": secret}}
            for i, secret in enumerate(self.mounted_secrets())
        ]
        if self.trusted_sources():
            volumes.append({"name": TRUSTED_VOLUME, "secret": {"secretName": trusted_secret}})
        return volumes

    def volume_mounts(self) -> list[dict[str, Any]]:
        mounts = [
            {"name": f"connect-certs-{i}", "mountPath": f"{CERTS_DIR}/{secret}", "readOnly": True}
            for i, secret in enumerate(self.mounted_secrets())
        ]
        if self.trusted_sources():
            mounts.append({"name": TRUSTED_VOLUME, "mountPath": TRUSTED_DIR, "readOnly": True})
        return mounts
