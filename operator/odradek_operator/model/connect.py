"""Connect's custom resources read once (``ConnectSpec``, ``ConnectorSpec``) and the objects an
``OdradekConnect`` should have (``desired_objects``).

An ``OdradekConnect`` named ``sync`` runs ``spec.replicas`` distributed workers
(``odradek connect distributed``) as the Deployment ``sync-connect``, configured by the
ConfigMap ``sync-connect-config`` (``connect-distributed.properties``), their REST API behind the
Service ``sync-connect-api`` on port 8083. A Deployment, not a StatefulSet: a worker keeps nothing
on disk (configs, offsets and statuses are in the cluster's internal topics) and needs no stable
name (it advertises its pod IP, and the group reassigns its tasks when it goes), so pods may be
replaced in any order and scheduled anywhere.

The worker properties are the user's ``spec.config`` over the operator's defaults
(``group.id`` ``<name>-connect``, the storage topics ``<name>-connect-configs|offsets|status``,
the JSON converters of Kafka's own example file), plus the keys the operator owns: the bootstrap
(``clusterRef``'s bootstrap Service or ``bootstrapServers``), the REST listener and what it
advertises. The one per-pod key, ``rest.advertised.host.name`` (the pod's IP: other workers
forward requests to it), goes in by ``--override`` with Kubernetes' ``$(POD_IP)`` expansion, as
the brokers' listeners do; the REST listener binds every address of the pod.

On a secured cluster, ``spec.authentication`` and ``spec.tls`` (Strimzi's fields; an
OdradekUser's Secret) give the workers their security keys, Secret volumes and the password's
environment variable (model/connect_security.py); ``WorkerSecurity`` is those settings resolved
against the ``clusterRef``'s listeners. The NetworkPolicy ``<name>-connect-network-policy`` lets
only the workers and the operator reach the REST port (``spec.networkPolicies``, default true).

An ``OdradekConnector`` is a connector of the Connect cluster ``spec.connectRef``: its name is the
resource's name, its config ``spec.config`` with ``connector.class`` from ``spec.class`` and
``tasks.max`` from ``spec.tasksMax``; ``spec.state`` is its target state.

Rule (as model/spec/): never accept what is not honoured; refusals are
``SpecError(field, message)``.
Pure, no I/O: any thread may call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.api import ConfigException
from odradek.connect.worker_config import WorkerConfig
from odradek_operator import names
from odradek_operator.model import meta, network_policies
from odradek_operator.model.connect_security import TRUSTED_KEY, ConnectSecurity, WorkerSecurity
from odradek_operator.model.spec.readers import (
    SpecError,
    _int,
    _kind,
    _mapping,
    _only,
    _str,
    crd_default,
    crd_enum,
    crd_fact,
    crd_range,
)
from odradek_operator.model.spec.resources import DEFAULT_REQUESTS, Resources
from odradek_operator.pki.secrets import encode

__all__ = [
    "OPERATOR_OWNED_WORKER_KEYS",
    "ConnectSpec",
    "ConnectorSpec",
    "config_map",
    "deployment",
    "desired_objects",
    "network_policy",
    "service",
    "worker_properties",
]

# Bounds, defaults and enums: the CRDs' (model/crds.py), read through spec/readers.py.
_CONNECT, _CONNECTOR = names.CONNECT_KIND, names.CONNECTOR_KIND
REPLICAS = crd_range(_CONNECT, "spec.replicas")
DEFAULT_REPLICAS: int = crd_default(_CONNECT, "spec.replicas")
CONNECT_NAME_MAX = crd_fact(_CONNECT, "metadata.name", "maxLength")  # "<name>-connect-config"
LOG_LEVELS = crd_enum(_CONNECT, "spec.logLevel")
DEFAULT_LOG_LEVEL: str = crd_default(_CONNECT, "spec.logLevel")
_PULL_POLICIES = crd_enum(_CONNECT, "spec.imagePullPolicy")
DEFAULT_IMAGE_PULL_POLICY: str = crd_default(_CONNECT, "spec.imagePullPolicy")
DEFAULT_NETWORK_POLICIES: bool = crd_default(_CONNECT, "spec.networkPolicies")
TASKS = crd_range(_CONNECTOR, "spec.tasksMax")
DEFAULT_TASKS_MAX: int = crd_default(_CONNECTOR, "spec.tasksMax")
CONNECTOR_STATES = crd_enum(_CONNECTOR, "spec.state")
DEFAULT_STATE: str = crd_default(_CONNECTOR, "spec.state")
TARGET_STATES = {"running": "STARTED", "paused": "PAUSED", "stopped": "STOPPED"}
# Observed states (Kafka's AbstractStatus.State) that mean the target state is reached.
REACHED = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}
STARTUP_MAX_S = 120  # importing, creating the internal topics, binding the REST listener
STARTUP_PROBE_PERIOD_S = 1
SHUTDOWN_MARGIN_S = 10
DEFAULT_SHUTDOWN_TIMEOUT_MS = 5000  # Kafka's task.shutdown.graceful.timeout.ms
REST_LISTENER = f"http://0.0.0.0:{names.CONNECT_REST_PORT}"

# Worker keys the operator writes itself: refused in spec.config.
OPERATOR_OWNED_WORKER_KEYS = frozenset(
    {
        "bootstrap.servers",
        "listeners",
        "rest.advertised.host.name",
        "rest.advertised.port",
        "rest.advertised.listener",
        "rest.host.name",
        "rest.port",
    }
)
# Keys no distributed worker of ours takes, with the reason a user reads.
REFUSED_WORKER_KEYS = {
    "plugin.path": "connectors are Python entry points (odradek.connect.connectors), not jars",
    "offset.storage.file.filename": "a standalone worker's key: these workers are distributed",
}
# Connector keys that are spec fields of their own.
CONNECTOR_KEYS_IN_SPEC = {
    "connector.class": "spec.class",
    "tasks.max": "spec.tasksMax",
    "name": "metadata.name",
}
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _name(body: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = _mapping(body.get("metadata"), "metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("metadata.name", "required")
    return name, str(metadata.get("namespace") or "default"), str(metadata.get("uid") or "")


def _property(value: object, where: str) -> str:
    """A worker config value as the properties file carries it (YAML numbers become text)."""
    if isinstance(value, bool):
        raise SpecError(where, f"write {str(value).lower()!r} in quotes: values are strings")
    if isinstance(value, int | str):
        return str(value)
    raise SpecError(where, f"expected a string or an integer, got {_kind(value)}")


# --- OdradekConnect -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectSpec:
    """An ``OdradekConnect``: a group of distributed workers."""

    name: str
    namespace: str
    uid: str
    replicas: int
    cluster_ref: str | None
    bootstrap_servers: str | None
    config: Mapping[str, str]  # the user's spec.config, as text
    image: str | None
    image_pull_policy: str
    resources: Resources
    log_level: str
    security: ConnectSecurity = ConnectSecurity()
    network_policies: bool = DEFAULT_NETWORK_POLICIES

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> ConnectSpec:
        name, namespace, uid = _name(body)
        if len(name) > CONNECT_NAME_MAX:
            raise SpecError("metadata.name", f"at most {CONNECT_NAME_MAX} characters")
        spec = _mapping(body.get("spec"), "spec")
        _only(
            spec,
            "spec",
            (
                "replicas",
                "clusterRef",
                "bootstrapServers",
                "config",
                "image",
                "imagePullPolicy",
                "resources",
                "logLevel",
                "authentication",
                "tls",
                "networkPolicies",
            ),
        )
        replicas = _int(spec, "replicas", "spec", DEFAULT_REPLICAS, *REPLICAS)
        cluster_ref = _str(spec, "clusterRef", "spec", None)
        bootstrap = _str(spec, "bootstrapServers", "spec", None)
        if (cluster_ref is None) == (bootstrap is None):
            raise SpecError(
                "spec",
                "exactly one of clusterRef (an OdradekCluster of this namespace) and "
                "bootstrapServers (host:port,...) says where the workers connect",
            )
        log_level = spec.get("logLevel", DEFAULT_LOG_LEVEL)
        if log_level not in LOG_LEVELS:
            raise SpecError("spec.logLevel", f"{log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        pull = spec.get("imagePullPolicy", DEFAULT_IMAGE_PULL_POLICY)
        if pull not in _PULL_POLICIES:
            raise SpecError("spec.imagePullPolicy", f"{pull!r} is not a pull policy")
        parsed = cls(
            name=name,
            namespace=namespace,
            uid=uid,
            replicas=replicas,
            cluster_ref=cluster_ref,
            bootstrap_servers=bootstrap,
            config=_worker_config(spec.get("config"), "spec.config"),
            image=_str(spec, "image", "spec", None),
            image_pull_policy=pull,
            resources=Resources.parse(
                spec.get("resources"), "spec.resources", DEFAULT_REQUESTS["connect"]
            ),
            log_level=log_level,
            security=ConnectSecurity.parse(spec),
            network_policies=_bool(spec, "networkPolicies", DEFAULT_NETWORK_POLICIES),
        )
        parsed.security.check_worker_config(parsed.config, cluster_ref is not None)
        _check_worker_config(parsed)
        return parsed

    @property
    def group_id(self) -> str:
        return self.config.get("group.id", f"{self.name}-connect")


def _bool(spec: Mapping[str, Any], key: str, default: bool) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"spec.{key}", f"expected true or false, got {_kind(value)}")
    return value


def _worker_config(value: object, where: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for key, raw in _mapping(value, where).items():
        path = f"{where}[{key}]"
        if key in OPERATOR_OWNED_WORKER_KEYS:
            raise SpecError(
                path,
                "the operator sets this key (the bootstrap comes from spec.clusterRef or "
                "spec.bootstrapServers, the REST listener is port "
                f"{names.CONNECT_REST_PORT} on the pod's IP)",
            )
        if key in REFUSED_WORKER_KEYS:
            raise SpecError(path, REFUSED_WORKER_KEYS[key])
        config[key] = _property(raw, path)
    return config


def _check_worker_config(spec: ConnectSpec) -> None:
    """The file as the worker will read it (``odradek.connect.worker_config``): unknown keys and
    bad values are refused here, not by workers in a crash loop."""
    security = spec.security.for_check(spec.cluster_ref is not None)
    props = worker_properties(spec, spec.bootstrap_servers or "bootstrap:9092", security)
    props["rest.advertised.host.name"] = "127.0.0.1"  # the pod IP, by --override
    environ = {env["name"]: "password" for env in security.env()}  # the pod's, by secretKeyRef
    try:
        WorkerConfig(props, distributed=True, environ=environ)
    except ConfigException as e:
        key = str(e).split(":", 1)[0]
        where = f"spec.config[{key}]" if key in spec.config else "spec.config"
        raise SpecError(where, str(e)) from e


def default_worker_properties(name: str) -> dict[str, str]:
    """What a worker gets unless spec.config says otherwise."""
    prefix = f"{name}-connect"
    return {
        "group.id": prefix,
        "config.storage.topic": f"{prefix}-configs",
        "offset.storage.topic": f"{prefix}-offsets",
        "status.storage.topic": f"{prefix}-status",
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
    }


def worker_properties(
    spec: ConnectSpec, bootstrap_servers: str, security: WorkerSecurity
) -> dict[str, str]:
    """connect-distributed.properties: defaults, the user's config, the operator's keys."""
    return {
        **default_worker_properties(spec.name),
        **spec.config,
        **security.properties(spec.config),
        "bootstrap.servers": bootstrap_servers,
        "listeners": REST_LISTENER,
        "rest.advertised.port": str(names.CONNECT_REST_PORT),
    }


def object_meta(spec: ConnectSpec, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": names.connect_labels(spec.name),
        "ownerReferences": [_owner(names.CONNECT_KIND, spec.name, spec.uid)],
    }


def config_map(
    spec: ConnectSpec, bootstrap_servers: str, security: WorkerSecurity
) -> dict[str, Any]:
    header = "Written by odradek-operator from the OdradekConnect's spec; edits are overwritten."
    props = worker_properties(spec, bootstrap_servers, security)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(spec, names.connect_config_map(spec.name)),
        "data": {names.CONNECT_PROPERTIES: meta.render_properties(props, header)},
    }


def args(spec: ConnectSpec) -> list[str]:
    verbose = ["-v"] if spec.log_level == "DEBUG" else []
    return [
        *verbose,
        "connect",
        "distributed",
        f"{names.CONNECT_CONFIG_DIR}/{names.CONNECT_PROPERTIES}",
        "--override",
        f"rest.advertised.host.name=$({names.ENV_POD_IP})",
    ]


def termination_grace_s(spec: ConnectSpec) -> int:
    """Long enough for the tasks' graceful shutdown, and the worker's LeaveGroup."""
    raw = spec.config.get("task.shutdown.graceful.timeout.ms", str(DEFAULT_SHUTDOWN_TIMEOUT_MS))
    try:
        timeout_ms = int(raw)
    except ValueError:
        raise SpecError(
            "spec.config[task.shutdown.graceful.timeout.ms]", f"{raw!r} is not a number"
        ) from None
    return -(-timeout_ms // 1000) + SHUTDOWN_MARGIN_S


def deployment(
    spec: ConnectSpec,
    image: str,
    bootstrap_servers: str,
    security: WorkerSecurity,
    secrets_digest: str | None = None,
) -> dict[str, Any]:
    """The workers; ``secrets_digest``: a hash of the Secret keys they read
    (``security.referenced()``), so a new password or certificate replaces them."""
    rest = meta.http_get("/", "rest")  # GET / answers once the REST server is up
    container = {
        "name": "connect",
        "image": spec.image or image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["odradek"],
        "args": args(spec),
        # POD_IP, POD_NAME, POD_NAMESPACE (no ordinal: a Deployment), the SASL password
        "env": [*meta.pod_env()[1:], *security.env()],
        "ports": [{"name": "rest", "containerPort": names.CONNECT_REST_PORT}],
        **meta.probes(rest, rest, STARTUP_MAX_S),
        # Startup probed every second (a worker answers within seconds of binding its REST
        # listener, so it takes its first rebalance sooner); up to STARTUP_MAX_S all the same.
        "startupProbe": {
            **rest,
            "periodSeconds": STARTUP_PROBE_PERIOD_S,
            "timeoutSeconds": meta.PROBE_TIMEOUT_S,
            "failureThreshold": STARTUP_MAX_S // STARTUP_PROBE_PERIOD_S,
        },
        "resources": meta.resources(spec.resources),
        "securityContext": meta.container_security_context(),
        "volumeMounts": [
            {"name": meta.CONFIG_VOLUME, "mountPath": names.CONNECT_CONFIG_DIR, "readOnly": True},
            meta.tmp_mount(),
            *security.volume_mounts(),
        ],
    }
    selector = names.connect_selector_labels(spec.name)
    pod = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace_s(spec),
        "securityContext": meta.pod_security_context(meta.ODRADEK_UID),
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector},
            }
        ],
        "containers": [container],
        "volumes": [
            {
                "name": meta.CONFIG_VOLUME,
                "configMap": {"name": names.connect_config_map(spec.name)},
            },
            meta.tmp_volume(),
            *security.volumes(names.connect_trusted_secret(spec.name)),
        ],
    }
    # A changed properties file changes the template, so the Deployment replaces the workers.
    # So does a changed Secret key the workers read (read once, at their start).
    digest = meta.config_hash(
        worker_properties(spec, bootstrap_servers, security), *meta.optional(secrets_digest)
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(spec, names.connect_deployment(spec.name)),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector},
            # One new worker before an old one goes: the group keeps its capacity.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": names.connect_labels(spec.name),
                    "annotations": {names.CONFIG_HASH_ANNOTATION: digest},
                },
                "spec": pod,
            },
        },
    }


def service(spec: ConnectSpec) -> dict[str, Any]:
    """The REST API of every ready worker (any worker answers: others forward to the leader)."""
    port = names.CONNECT_REST_PORT
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, names.connect_service(spec.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": names.connect_selector_labels(spec.name),
            "ports": [{"name": "rest", "port": port, "targetPort": "rest", "protocol": "TCP"}],
        },
    }


def network_policy(spec: ConnectSpec, operator_namespace: str | None) -> dict[str, Any]:
    """Ingress to the workers' REST port from the workers (forwarding to the leader) and the
    operator (OdradekConnectors) only, as Strimzi's ``<name>-connect`` policy; egress open."""
    selector = names.connect_selector_labels(spec.name)
    return {
        "apiVersion": network_policies.API_VERSION,
        "kind": network_policies.KIND,
        "metadata": object_meta(spec, names.connect_network_policy(spec.name)),
        "spec": {
            "podSelector": {"matchLabels": selector},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "ports": [{"protocol": "TCP", "port": names.CONNECT_REST_PORT}],
                    "from": [
                        {"podSelector": {"matchLabels": selector}},
                        network_policies.operator_peer(operator_namespace),
                    ],
                }
            ],
        },
    }


def trusted_certificates_secret(spec: ConnectSpec, bundle: str) -> dict[str, Any]:
    """The one CA file the workers trust (``connect_security.trusted_bundle``)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": object_meta(spec, names.connect_trusted_secret(spec.name)),
        "data": encode({TRUSTED_KEY: bundle}),
    }


def desired_objects(
    spec: ConnectSpec,
    image: str,
    bootstrap_servers: str,
    security: WorkerSecurity,
    *,
    trusted_bundle: str | None = None,
    secrets_digest: str | None = None,
    operator_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """In apply order: what the pods refer to before the Deployment that starts them.
    ``trusted_bundle``: the CA file, when ``security.trusted_sources()`` is not empty."""
    if bool(security.trusted_sources()) != (trusted_bundle is not None):
        raise ValueError("a trusted bundle goes with trusted certificates, and only with them")
    policy = [network_policy(spec, operator_namespace)] if spec.network_policies else []
    bundle = [trusted_certificates_secret(spec, trusted_bundle)] if trusted_bundle else []
    return [
        config_map(spec, bootstrap_servers, security),
        service(spec),
        *bundle,
        *policy,
        deployment(spec, image, bootstrap_servers, security, secrets_digest),
    ]


# --- OdradekConnector ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectorSpec:
    """An ``OdradekConnector``: one connector of the Connect cluster it names."""

    name: str  # the connector's name: metadata.name
    namespace: str
    connect: str
    connector_class: str
    tasks_max: int
    config: Mapping[str, str]
    state: str  # running | paused | stopped

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> ConnectorSpec:
        name, namespace, _ = _name(body)
        spec = _mapping(body.get("spec"), "spec")
        _only(spec, "spec", ("connectRef", "class", "tasksMax", "config", "state"))
        connect = _str(spec, "connectRef", "spec", None)
        if connect is None:
            raise SpecError("spec.connectRef", "required: the OdradekConnect in this namespace")
        connector_class = _str(spec, "class", "spec", None)
        if connector_class is None:
            raise SpecError(
                "spec.class",
                "required: the connector class (FileStreamSource, "
                "org.apache.kafka.connect.file.FileStreamSourceConnector or package.module:Class)",
            )
        tasks_max = _int(spec, "tasksMax", "spec", DEFAULT_TASKS_MAX, *TASKS)
        state = spec.get("state", DEFAULT_STATE)
        if state not in CONNECTOR_STATES:
            raise SpecError("spec.state", f"{state!r} is not one of {', '.join(CONNECTOR_STATES)}")
        return cls(
            name=name,
            namespace=namespace,
            connect=connect,
            connector_class=connector_class,
            tasks_max=tasks_max,
            config=_connector_config(spec.get("config"), "spec.config"),
            state=state,
        )

    def connector_config(self) -> dict[str, str]:
        """The body of ``PUT /connectors/{name}/config``."""
        return {
            **self.config,
            "connector.class": self.connector_class,
            "tasks.max": str(self.tasks_max),
        }

    @property
    def target_state(self) -> str:
        """Kafka's TargetState: STARTED, PAUSED or STOPPED."""
        return TARGET_STATES[self.state]

    @property
    def reached_state(self) -> str:
        """The observed state (connector and tasks) that means the target is reached."""
        return REACHED[self.state]


def _connector_config(value: object, where: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for key, raw in _mapping(value, where).items():
        path = f"{where}[{key}]"
        if key in CONNECTOR_KEYS_IN_SPEC:
            raise SpecError(path, f"set {CONNECTOR_KEYS_IN_SPEC[key]} instead")
        if not isinstance(raw, str):
            raise SpecError(path, f"expected a string, got {_kind(raw)} (quote it)")
        config[key] = raw
    return config
