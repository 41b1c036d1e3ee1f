"""The CustomResourceDefinitions of group ``odradek.io``, as Python data: the one source of truth.

``scripts/render_crds.py`` writes them into the Helm chart (``charts/odradek/templates/crds/``);
a test keeps the checked-in YAML equal to what this module builds. Every kind is one entry of
:func:`crds` (OdradekCluster, OdradekTopic, Connect's OdradekConnect and
OdradekConnector, and OdradekUser); a new kind is added by writing its ``*_crd()`` function
and appending it there; the chart, the test API server (tests/support/k8s), the RBAC test and
the validators pick them up from that list. The chart's RBAC rules name the kinds by hand:
tests/chart/test_chart.py fails until a new kind is granted there too.

The schemas are structural OpenAPI v3 (``apiextensions.k8s.io/v1``): every node has a type except
where ``x-kubernetes-int-or-string`` or ``x-kubernetes-preserve-unknown-fields`` says otherwise,
and ``anyOf`` only carries the Quantity pattern. Status fields carry no enums on purpose: a value
the schema does not know would make the operator's status patch fail on a real API server.

CEL rules (``x-kubernetes-validations``) only say what the API server can refuse cheaply (a
partition count that decreases, a topic renamed). Neither ``jsonschema`` nor kmock evaluates CEL,
so the operator checks the same rules itself and reports them in a status condition.

Defaults (``default:``) are applied by a real API server on write; kmock does not apply them, so
:func:`odradek_operator.model.openapi.apply_defaults` does the same thing for code that reads a
resource (see that module).

Its length is deliberate: the schemas are data, and being their one home is what lets the spec
readers (``model.spec``) and the schema test take every bound and default from here.
"""

from __future__ import annotations

from typing import Any

from odradek.common.topics import TOPIC_NAME_LENGTH_MAX, TOPIC_NAME_PATTERN
from odradek_operator.names import API_VERSION, GROUP, VERSION

__all__ = ["API_VERSION", "GROUP", "VERSION", "crds", "spec_field"]

CATEGORY = "odradek"

Schema = dict[str, Any]

# Kubernetes' own Quantity schema, as controller-gen writes it for resource.Quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# Kafka's legal topic names (org.apache.kafka.common.internals.Topic).
# An RFC 1035 label: the names of the objects the operator derives from a cluster's name.
DNS_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
# "<name>-controller-nodes" must stay a 63-character DNS label (as model/spec/cluster.py checks).
CLUSTER_NAME_MAX = 40

# The limits a schema states (bounded lists keep CEL cost estimates and the API server happy).
VOLUMES_MAX = 16
VOLUME_ID_MAX = 999  # "data-<id>" claim templates and mount paths
CONDITIONS_MAX = 16
BROKERS_MAX = 1000
PARTITIONS_MAX = 100_000
CONNECT_REPLICAS_MAX = 100
CONNECT_NAME_MAX = 40  # "<name>-connect-config" must stay a 63-character DNS label
TASKS_MAX = 1000
LISTENERS_MAX = 8
LISTENER_NAME_PATTERN = r"^[a-z][a-z0-9]{0,10}$"  # Strimzi's: lowercase, at most 11 characters
AUTHENTICATION_TYPES = ["none", "scram-sha-512", "tls"]
SUPER_USERS_MAX = 100
CA_VALIDITY_DAYS_MAX = 36500
CERTIFICATES_MAX = 16  # status.certificates: the CAs and one entry per component's leaves
NETWORK_POLICY_PEERS_MAX = 64
IGNORED_TOPICS_MAX = 100  # status.operation.ignoredTopics (the message says how many in all)
LOG_LEVELS = ["WARNING", "DEBUG"]  # what ``odradek [-v]`` honours
CONNECTOR_STATES = ["running", "paused", "stopped"]
# OdradekConnect spec.authentication.type (Strimzi's KafkaConnect names; no oauth).
CONNECT_AUTHENTICATION_TYPES = ["scram-sha-512", "scram-sha-256", "plain", "tls"]
CONNECT_TRUSTED_MAX = 10  # spec.tls.trustedCertificates
# OdradekUser (Strimzi's KafkaUser): its vocabulary, which model/users.py reads from here.
USER_AUTHENTICATION_TYPES = ["scram-sha-512", "tls"]
ACL_RESOURCE_TYPES = ["topic", "group", "cluster", "transactionalId"]
ACL_PATTERN_TYPES = ["literal", "prefix"]
ACL_RULE_TYPES = ["allow", "deny"]
ACL_OPERATIONS = [
    "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "AlterConfigs",
    "DescribeConfigs", "IdempotentWrite", "All",
]  # fmt: skip
ACLS_MAX = 1000  # rules of one user (each operation of a rule is one ACL)
# A tls user's name is its certificate's CN, which X.509 bounds at 64 characters (ub-common-name).
USER_NAME_MAX = 253  # a Secret's name (DNS subdomain)


def _obj(
    properties: dict[str, Schema], *, required: list[str] | None = None, **extra: Any
) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


def _int(*, minimum: int | None = None, maximum: int | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    schema.update(extra)
    return schema


def _str(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def quantity(description: str, **extra: Any) -> Schema:
    """A Kubernetes Quantity (``10Gi``, ``500m`` or a plain integer)."""
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
        "description": description,
        **extra,
    }


def resources() -> Schema:
    """core/v1 ResourceRequirements (limits and requests)."""
    per_resource = {"type": "object", "additionalProperties": quantity("An amount of a resource.")}
    return _obj(
        {"limits": per_resource, "requests": per_resource},
        description="CPU and memory for each container (core/v1 ResourceRequirements).",
    )


def storage_class() -> Schema:
    return _str(
        nullable=True,
        description="StorageClass of the claim; null or absent: the cluster's default class.",
    )


def port(default: int, description: str) -> Schema:
    return _obj(
        {"port": _int(minimum=1, maximum=65535, default=default, description=description)},
        default={},
    )


def label_selector(description: str) -> Schema:
    """meta/v1 LabelSelector (matchLabels, matchExpressions)."""
    expression = _obj(
        {
            "key": _str(),
            "operator": _str(enum=["In", "NotIn", "Exists", "DoesNotExist"]),
            "values": {"type": "array", "items": _str()},
        },
        required=["key", "operator"],
    )
    return _obj(
        {
            "matchLabels": {"type": "object", "additionalProperties": _str()},
            "matchExpressions": {"type": "array", "items": expression},
        },
        description=description,
        **{"x-kubernetes-map-type": "atomic"},
    )


def network_policy_peers(description: str) -> Schema:
    """A list of networking.k8s.io/v1 NetworkPolicyPeer, as Strimzi's networkPolicyPeers."""
    peer = _obj(
        {
            "podSelector": label_selector("Pods (in the cluster's namespace unless combined)."),
            "namespaceSelector": label_selector("Namespaces (all their pods, or podSelector's)."),
            "ipBlock": _obj(
                {"cidr": _str(), "except": {"type": "array", "items": _str()}},
                required=["cidr"],
            ),
        }
    )
    return {
        "type": "array",
        "items": peer,
        "minItems": 1,
        "maxItems": NETWORK_POLICY_PEERS_MAX,
        "description": description,
    }


def config_map(description: str) -> Schema:
    """Kafka config keys to string, integer or boolean values (checked by odradek.config)."""
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": description,
    }


def conditions() -> Schema:
    """metav1.Condition, as a list keyed by ``type``."""
    condition = _obj(
        {
            "type": _str(description="Ready, Reconciling or Error."),
            "status": _str(enum=["True", "False", "Unknown"]),
            "reason": _str(description="A CamelCase reason, e.g. AllBrokersReady."),
            "message": _str(description="What happened, in words a user understands."),
            "lastTransitionTime": _str(format="date-time"),
            "observedGeneration": _int(minimum=0),
        },
        required=["type", "status"],
    )
    return {
        "type": "array",
        "items": condition,
        "maxItems": CONDITIONS_MAX,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    }


def ready_column() -> Schema:
    return {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    }


AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def immutable(message: str) -> list[Schema]:
    return [{"rule": "self == oldSelf", "message": message}]


def certificate_authority(description: str) -> Schema:
    return _obj(
        {
            "generateCertificateAuthority": {
                "type": "boolean",
                "default": True,
                "description": "false: bring your own (the user creates the two Secrets).",
            },
            "validityDays": _int(minimum=1, maximum=CA_VALIDITY_DAYS_MAX, default=365),
            "renewalDays": _int(
                minimum=1,
                maximum=CA_VALIDITY_DAYS_MAX,
                default=30,
                description="Renew this many days before expiry (less than validityDays).",
            ),
        },
        description=description,
    )


def cluster_spec() -> Schema:
    listener = _obj(
        {
            "name": _str(pattern=LISTENER_NAME_PATTERN, description="Lowercase, <= 11 chars."),
            "port": _int(minimum=1, maximum=65535),
            "tls": {"type": "boolean", "default": False, "description": "TLS with the CA."},
            "authentication": _obj(
                {"type": _str(enum=AUTHENTICATION_TYPES)},
                required=["type"],
                description="scram-sha-512 (SASL) or tls (client certificates of the clients CA).",
            ),
            "networkPolicyPeers": network_policy_peers(
                "Who may connect (NetworkPolicyPeer); absent: anyone."
            ),
        },
        required=["name", "port"],
    )
    volume = _obj(
        {
            "id": _int(
                minimum=0,
                maximum=VOLUME_ID_MAX,
                description="The volume's id: mounted at /var/lib/odradek/data-<id>.",
            ),
            "size": quantity("The claim's size, e.g. 10Gi."),
            "storageClass": storage_class(),
        },
        required=["id", "size"],
    )
    zookeeper = _obj(
        {
            "replicas": _int(enum=[1, 3, 5], default=3, description="The ensemble's size."),
            "image": _str(default="zookeeper:3.8", description="The official ZooKeeper image."),
            "storage": _obj(
                {
                    "size": quantity("The data claim's size.", default="1Gi"),
                    "storageClass": storage_class(),
                },
                default={},
            ),
            "resources": resources(),
        },
        default={},
    )
    controllers = _obj(
        {"replicas": _int(minimum=1, maximum=7, default=2), "resources": resources()},
        default={},
    )
    brokers = _obj(
        {
            "replicas": _int(
                minimum=1,
                maximum=BROKERS_MAX,
                description="The number of brokers (the scale subresource's replicas).",
            ),
            "storage": _obj(
                {
                    "volumes": {
                        "type": "array",
                        "description": "JBOD: one claim per volume, all in log.dirs.",
                        "items": volume,
                        "minItems": 1,
                        "maxItems": VOLUMES_MAX,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["id"],
                    },
                    "deleteClaim": {
                        "type": "boolean",
                        "default": False,
                        "description": "Delete claims on cluster deletion or scale-down.",
                    },
                },
                required=["volumes"],
            ),
            "resources": resources(),
            "config": config_map("Kafka broker config keys, e.g. min.insync.replicas: 2."),
            "rack": _obj(
                {
                    "topologyKey": _str(
                        minLength=1, description="The node label read as broker.rack."
                    )
                },
                required=["topologyKey"],
                description=(
                    "broker.rack from a node label: the operator copies the label of each "
                    "broker pod's node onto the pod, the broker reads it at start."
                ),
            ),
        },
        required=["replicas", "storage"],
    )
    return _obj(
        {
            "image": _str(description="The Odradek image; default: the operator's ODRADEK_IMAGE."),
            "imagePullPolicy": _str(
                enum=["Always", "IfNotPresent", "Never"], default="IfNotPresent"
            ),
            "zookeeper": zookeeper,
            "controllers": controllers,
            "brokers": brokers,
            "listeners": {
                "type": "array",
                "description": (
                    "The client listeners (Strimzi's shape). Absent: one PLAINTEXT listener on "
                    "9092. Once one has tls or authentication, the brokers' INTERNAL and "
                    "CONTROL_PLANE listeners and the controllers' are mutual TLS with the "
                    "cluster CA, and the ACL authorizer is on."
                ),
                "items": listener,
                "minItems": 1,
                "maxItems": LISTENERS_MAX,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "controlPlane": port(9091, "CONTROL_PLANE: the controller's requests to brokers."),
            "authorization": _obj(
                {
                    "type": _str(enum=["simple"], description="Kafka's ACL authorizer."),
                    "superUsers": {
                        "type": "array",
                        "items": _str(minLength=1),
                        "maxItems": SUPER_USERS_MAX,
                        "description": "Principals allowed everything, e.g. User:admin.",
                    },
                },
                required=["type"],
                description="Needs a listener with tls or authentication.",
            ),
            "clusterCa": certificate_authority(
                "Signs the brokers', controllers', ZooKeeper's and the operator's certificates."
            ),
            "clientsCa": certificate_authority("Signs the OdradekUsers' tls certificates."),
            "metrics": port(9645, "The admin listener: /metrics, /healthz, /readyz."),
            "networkPolicies": {
                "type": "boolean",
                "default": True,
                "description": "NetworkPolicies for the cluster's pods (docs/kubernetes.md).",
            },
        },
        required=["brokers"],
    )


def cluster_status() -> Schema:
    return _obj(
        {
            "observedGeneration": _int(minimum=0),
            "conditions": conditions(),
            "brokerIds": {"type": "array", "items": _int(minimum=0), "maxItems": BROKERS_MAX},
            "bootstrap": _str(description="host:port of the bootstrap Service."),
            "certificates": {
                "type": "array",
                "maxItems": CERTIFICATES_MAX,
                "description": "The operator's certificates and when each expires.",
                "items": _obj(
                    {
                        "certificate": _str(
                            description="cluster-ca, clients-ca, broker, controller, "
                            "zookeeper or operator."
                        ),
                        "secret": _str(),
                        "notAfter": _str(format="date-time"),
                        "generation": _int(minimum=0, description="A CA's generation."),
                    }
                ),
            },
            "brokers": _obj(
                {
                    "replicas": _int(minimum=0, description="Brokers that exist now."),
                    "selector": _str(description="The label selector of the broker pods."),
                }
            ),
            "operation": _obj(
                {
                    "type": _str(
                        description="RollingRestart, ScaleUp, ScaleDown, AddVolume or Idle."
                    ),
                    "brokers": {"type": "array", "items": _int(minimum=0), "maxItems": BROKERS_MAX},
                    "message": _str(),
                    "startedAt": _str(format="date-time"),
                    "rebalanced": {
                        "type": "boolean",
                        "description": "ScaleUp: its one rebalance has been started.",
                    },
                    "ignoredTopics": {
                        "type": "array",
                        "items": _str(),
                        "maxItems": IGNORED_TOPICS_MAX,
                        "description": "RollingRestart: topics whose replication factor is at"
                        " most their min.insync.replicas, which the restart cannot keep"
                        " writable and so does not wait for.",
                    },
                }
            ),
        }
    )


def topic_spec() -> Schema:
    return _obj(
        {
            "cluster": _str(
                pattern=DNS_LABEL_PATTERN,
                maxLength=CLUSTER_NAME_MAX,
                description="The OdradekCluster in the same namespace.",
                **{"x-kubernetes-validations": immutable("cluster is immutable")},
            ),
            "topicName": _str(
                pattern=TOPIC_NAME_PATTERN,
                maxLength=TOPIC_NAME_LENGTH_MAX,
                description="The topic's name in Kafka; default: metadata.name.",
                **{"x-kubernetes-validations": immutable("topicName is immutable")},
            ),
            "partitions": _int(
                minimum=1,
                maximum=PARTITIONS_MAX,
                description="Partitions can be added, never removed.",
                **{
                    "x-kubernetes-validations": [
                        {"rule": "self >= oldSelf", "message": "partitions may not decrease"}
                    ]
                },
            ),
            "replicationFactor": _int(minimum=1, maximum=BROKERS_MAX),
            "config": config_map("Kafka topic config keys, e.g. retention.ms: 604800000."),
        },
        required=["cluster", "partitions", "replicationFactor"],
    )


def topic_status() -> Schema:
    return _obj(
        {
            "observedGeneration": _int(minimum=0),
            "conditions": conditions(),
            "partitions": _int(minimum=0),
            "topicName": _str(
                description="The topic this resource manages (deleting the resource deletes it)."
            ),
            "appliedPartitions": _int(
                minimum=0,
                description="spec.partitions when last applied: a lower spec is a decrease.",
            ),
            "replicationFactor": _int(minimum=0),
            "config": config_map("The topic's non-default config as the cluster reports it."),
        }
    )


def string_map(description: str) -> Schema:
    """Config keys to string values (Kafka Connect's REST API takes ``Map<String, String>``)."""
    return {
        "type": "object",
        "additionalProperties": _str(),
        "description": description,
    }


def connect_spec() -> Schema:
    return _obj(
        {
            "replicas": _int(
                minimum=0,
                maximum=CONNECT_REPLICAS_MAX,
                default=1,
                description="The number of workers (the scale subresource's replicas).",
            ),
            "clusterRef": _str(
                pattern=DNS_LABEL_PATTERN,
                maxLength=CLUSTER_NAME_MAX,
                description="An OdradekCluster in this namespace: bootstrap is its Service.",
            ),
            "bootstrapServers": _str(
                minLength=1,
                description="host:port,... of a Kafka-compatible cluster (instead of clusterRef).",
            ),
            "config": {
                "type": "object",
                "additionalProperties": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True,
                },
                "description": (
                    "Worker properties with Kafka Connect's names (group.id, "
                    "config.storage.topic... default from the resource's name)."
                ),
            },
            "image": _str(description="The Odradek image; default: the operator's ODRADEK_IMAGE."),
            "imagePullPolicy": _str(
                enum=["Always", "IfNotPresent", "Never"], default="IfNotPresent"
            ),
            "resources": resources(),
            "logLevel": _str(
                enum=LOG_LEVELS,
                default="WARNING",
                description="The workers' log level (DEBUG runs odradek -v).",
            ),
            "authentication": connect_authentication(),
            "tls": _obj(
                {
                    "trustedCertificates": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": CONNECT_TRUSTED_MAX,
                        "items": _obj(
                            {
                                "secretName": _str(minLength=1, description="A Secret here."),
                                "certificate": _str(minLength=1, description="A key (PEM)."),
                                "pattern": _str(
                                    minLength=1, description="Keys matching a glob: *.crt."
                                ),
                            },
                            required=["secretName"],
                        ),
                        "description": (
                            "The CAs the workers trust, one of certificate and pattern each "
                            "(put into one bundle, <name>-connect-trusted-certs)."
                        ),
                    }
                },
                required=["trustedCertificates"],
                description=(
                    "TLS to the brokers. With clusterRef and a TLS listener, default: every "
                    "*.crt of the cluster CA's Secret (<cluster>-cluster-ca-cert)."
                ),
            ),
            "networkPolicies": {
                "type": "boolean",
                "default": True,
                "description": "A NetworkPolicy: only the workers and the operator reach 8083.",
            },
        },
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.clusterRef) != has(self.bootstrapServers)",
                    "message": "exactly one of clusterRef and bootstrapServers",
                }
            ]
        },
    )


def _secret_key(key_field: str, description: str) -> Schema:
    return _obj(
        {
            "secretName": _str(minLength=1, description="A Secret in this namespace."),
            key_field: _str(minLength=1, description=description),
        },
        required=["secretName", key_field],
    )


def connect_authentication() -> Schema:
    """Strimzi's KafkaConnect ``authentication``: an OdradekUser's Secret (or any)."""
    return _obj(
        {
            "type": _str(enum=CONNECT_AUTHENTICATION_TYPES),
            "username": _str(minLength=1, description="SASL: the user name (the OdradekUser)."),
            "passwordSecret": _secret_key("password", "The key holding the password."),
            "certificateAndKey": _obj(
                {
                    "secretName": _str(minLength=1, description="A Secret in this namespace."),
                    "certificate": _str(minLength=1, description="Its certificate (user.crt)."),
                    "key": _str(minLength=1, description="Its private key (user.key)."),
                },
                required=["secretName", "certificate", "key"],
                description="tls: the client certificate and key.",
            ),
        },
        required=["type"],
        description="How the workers authenticate (an OdradekUser's Secret).",
    )


def connect_status() -> Schema:
    return _obj(
        {
            "observedGeneration": _int(minimum=0),
            "conditions": conditions(),
            "replicas": _int(minimum=0, description="Workers that exist now."),
            "readyReplicas": _int(minimum=0, description="Workers whose REST API answers."),
            "selector": _str(description="The label selector of the worker pods."),
            "url": _str(description="The REST API through the Service."),
            "bootstrapServers": _str(description="What the workers connect to."),
            "securityProtocol": _str(description="The workers' security.protocol."),
        }
    )


def connector_spec() -> Schema:
    return _obj(
        {
            "connectRef": _str(
                pattern=DNS_LABEL_PATTERN,
                maxLength=CONNECT_NAME_MAX,
                description="The OdradekConnect in this namespace that runs the connector.",
                **{"x-kubernetes-validations": immutable("connectRef is immutable")},
            ),
            "class": _str(
                minLength=1,
                description=(
                    "connector.class: FileStreamSource, a full Kafka name, or package.module:Class."
                ),
            ),
            "tasksMax": _int(minimum=1, maximum=TASKS_MAX, default=1, description="tasks.max."),
            "config": string_map("Connector config keys (Kafka's names) to string values."),
            "state": _str(
                enum=CONNECTOR_STATES,
                default="running",
                description="running, paused (tasks keep their place) or stopped (no tasks).",
            ),
        },
        required=["connectRef", "class"],
    )


def connector_status() -> Schema:
    entry = {
        "state": _str(description="RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING."),
        "worker": _str(description="host:port of the worker it runs on."),
        "trace": _str(description="The failure's stack trace, when FAILED."),
    }
    task = _obj({"id": _int(minimum=0), **entry}, required=["id"])
    return _obj(
        {
            "observedGeneration": _int(minimum=0),
            "conditions": conditions(),
            "connectorStatus": _obj(dict(entry)),
            "type": _str(description="source or sink."),
            "tasks": {
                "type": "array",
                "items": task,
                "maxItems": TASKS_MAX,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["id"],
            },
        }
    )


def user_spec() -> Schema:
    secret_key_ref = _obj(
        {
            "name": _str(minLength=1, description="A Secret in the user's namespace."),
            "key": _str(minLength=1, description="The key holding the password."),
        },
        required=["name", "key"],
    )
    authentication = _obj(
        {
            "type": _str(
                enum=USER_AUTHENTICATION_TYPES,
                description="scram-sha-512 (a password) or tls (a client certificate).",
            ),
            "password": _obj(
                {"valueFrom": _obj({"secretKeyRef": secret_key_ref}, required=["secretKeyRef"])},
                required=["valueFrom"],
                description="scram-sha-512 only: the password to use; default: generated.",
            ),
        },
        required=["type"],
    )
    resource = _obj(
        {
            "type": _str(enum=ACL_RESOURCE_TYPES),
            "name": _str(
                minLength=1,
                description="The topic, group or transactional id; * (literal) for all; "
                "none for the cluster.",
            ),
            "patternType": _str(enum=ACL_PATTERN_TYPES, default="literal"),
        },
        required=["type"],
    )
    rule = _obj(
        {
            "type": _str(enum=ACL_RULE_TYPES, default="allow"),
            "resource": resource,
            "operations": {
                "type": "array",
                "items": _str(enum=ACL_OPERATIONS),
                "minItems": 1,
                "maxItems": len(ACL_OPERATIONS),
            },
            "host": _str(minLength=1, default="*", description="A client address, or *."),
        },
        required=["resource", "operations"],
    )
    authorization = _obj(
        {
            "type": _str(enum=["simple"], description="Kafka's ACL authorizer."),
            "acls": {"type": "array", "items": rule, "maxItems": ACLS_MAX},
        },
        required=["type"],
    )
    rate = "bytes per second, for the user's clients together, on each broker"
    quotas = _obj(
        {
            "producerByteRate": _int(minimum=0, description=f"producer_byte_rate: {rate}."),
            "consumerByteRate": _int(minimum=0, description=f"consumer_byte_rate: {rate}."),
            "requestPercentage": _int(
                minimum=0,
                description="request_percentage: of one request handler thread's time.",
            ),
            "controllerMutationRate": {
                "type": "number",
                "minimum": 0,
                "description": "controller_mutation_rate: partitions created or deleted a second.",
            },
        }
    )
    return _obj(
        {"authentication": authentication, "authorization": authorization, "quotas": quotas},
        required=["authentication"],
    )


def user_status() -> Schema:
    return _obj(
        {
            "observedGeneration": _int(minimum=0),
            "conditions": conditions(),
            "username": _str(description="The Kafka user name (principal User:<username>)."),
            "secret": _str(description="The Secret holding the user's credentials."),
            "certificateNotAfter": _str(
                format="date-time", description="tls: when the client certificate expires."
            ),
        }
    )


def _crd(
    kind: str,
    *,
    short_names: list[str],
    metadata: Schema | None = None,
    spec: Schema,
    status: Schema,
    columns: list[Schema],
    scale: Schema | None = None,
) -> dict[str, Any]:
    plural = kind.lower() + "s"
    subresources: dict[str, Any] = {"status": {}}
    if scale is not None:
        subresources["scale"] = scale
    root = _obj(
        {
            "apiVersion": _str(),
            "kind": _str(),
            "metadata": metadata or {"type": "object"},
            "spec": spec,
            "status": status,
        },
        required=["spec"],
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def cluster_crd() -> dict[str, Any]:
    return _crd(
        "OdradekCluster",
        short_names=["odc", "odradek"],
        # The one metadata field a CRD may restrict: the name, which every derived object carries.
        metadata=_obj({"name": _str(pattern=DNS_LABEL_PATTERN, maxLength=CLUSTER_NAME_MAX)}),
        spec=cluster_spec(),
        status=cluster_status(),
        columns=[
            {"name": "Brokers", "type": "integer", "jsonPath": ".spec.brokers.replicas"},
            ready_column(),
            {"name": "Operation", "type": "string", "jsonPath": ".status.operation.type"},
            {"name": "Bootstrap", "type": "string", "jsonPath": ".status.bootstrap"},
            AGE_COLUMN,
        ],
        scale={
            "specReplicasPath": ".spec.brokers.replicas",
            "statusReplicasPath": ".status.brokers.replicas",
            "labelSelectorPath": ".status.brokers.selector",
        },
    )


def topic_crd() -> dict[str, Any]:
    return _crd(
        "OdradekTopic",
        short_names=["odt"],
        spec=topic_spec(),
        status=topic_status(),
        columns=[
            {"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"},
            {"name": "Partitions", "type": "integer", "jsonPath": ".spec.partitions"},
            {"name": "RF", "type": "integer", "jsonPath": ".spec.replicationFactor"},
            ready_column(),
            AGE_COLUMN,
        ],
    )


def connect_crd() -> dict[str, Any]:
    return _crd(
        "OdradekConnect",
        short_names=["odcx"],
        metadata=_obj({"name": _str(pattern=DNS_LABEL_PATTERN, maxLength=CONNECT_NAME_MAX)}),
        spec=connect_spec(),
        status=connect_status(),
        columns=[
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready Replicas", "type": "integer", "jsonPath": ".status.readyReplicas"},
            ready_column(),
            {"name": "URL", "type": "string", "jsonPath": ".status.url"},
            AGE_COLUMN,
        ],
        scale={
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    )


def connector_crd() -> dict[str, Any]:
    return _crd(
        "OdradekConnector",
        short_names=["odcr"],
        spec=connector_spec(),
        status=connector_status(),
        columns=[
            {"name": "Connect", "type": "string", "jsonPath": ".spec.connectRef"},
            {"name": "Class", "type": "string", "jsonPath": ".spec.class"},
            {"name": "Tasks", "type": "integer", "jsonPath": ".spec.tasksMax"},
            {"name": "State", "type": "string", "jsonPath": ".status.connectorStatus.state"},
            ready_column(),
            AGE_COLUMN,
        ],
    )


CLUSTER_LABEL_PATH = ".metadata.labels.odradek\\.io/cluster"  # JSONPath escapes the dot


def user_crd() -> dict[str, Any]:
    return _crd(
        "OdradekUser",
        short_names=["odu"],
        metadata=_obj({"name": _str(maxLength=USER_NAME_MAX)}),
        spec=user_spec(),
        status=user_status(),
        columns=[
            {
                "name": "Cluster",
                "type": "string",
                "jsonPath": ".metadata.labels.odradek\\.io/cluster",
            },
            {"name": "Authentication", "type": "string", "jsonPath": ".spec.authentication.type"},
            {"name": "Authorization", "type": "string", "jsonPath": ".spec.authorization.type"},
            ready_column(),
            AGE_COLUMN,
        ],
    )


def crds() -> list[dict[str, Any]]:
    """Every CRD of the group, in the order the chart renders them. Add new kinds here."""
    return [cluster_crd(), topic_crd(), connect_crd(), connector_crd(), user_crd()]


def crd_for(kind: str) -> dict[str, Any]:
    """The CRD whose kind is ``kind`` (KeyError if the group has no such kind)."""
    for crd in crds():
        if crd["spec"]["names"]["kind"] == kind:
            return crd
    raise KeyError(kind)


def spec_field(kind: str, path: str) -> Schema:
    """The schema node of one field of ``kind``, e.g. ``spec.brokers.replicas`` or
    ``spec.brokers.storage.volumes[].id`` (``[]``: a list's items). The operator reads its bounds
    from here (model/spec/readers.py), so the CRD and the operator's checks cannot drift apart."""
    node = open_api_schema(crd_for(kind))
    for part in path.split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def open_api_schema(crd: dict[str, Any], version: str = VERSION) -> Schema:
    """The ``openAPIV3Schema`` of one served version of ``crd``."""
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return served["schema"]["openAPIV3Schema"]
    raise KeyError(version)
