"""A worker's security keys, as Kafka Connect takes them, and the connector client override policy.

The keys are the Java client's (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.truststore.*``, ``ssl.keystore.*``, ``ssl.endpoint.identification.algorithm``...) or
librdkafka's; their mapping has one home, ``client.java_security``. Three layers, each over the
one before (``java_security.layer``: a Java key replaces the librdkafka key that says the same):

1. the worker's top-level keys: every client the worker makes (the tasks' producers, consumers
   and admins, the internal topics' clients, the distributed group membership's client). Kafka
   applies them to the worker's own clients and admins only and wants ``producer.``/``consumer.``
   for the tasks' clients; here they apply to all, so one set of credentials is enough, and the
   prefixed forms still override;
2. ``producer.*``, ``consumer.*``, ``admin.*``: that client only;
3. a connector's ``producer.override.*``, ``consumer.override.*``, ``admin.override.*``, if
   ``connector.client.config.override.policy`` allows them (KIP-458): ``All`` allows every key,
   ``None`` none, ``Principal`` only ``sasl.jaas.config``, ``sasl.mechanism`` and
   ``security.protocol`` (Kafka's ``PrincipalConnectorClientConfigOverridePolicy``; a policy is
   named by its alias or its Kafka class name). A refusal is Kafka's sentence.

A key that cannot be mapped is a ``ConfigException`` naming it as the user wrote it (with its
prefix); the worker's own layers are checked when the worker starts (``WorkerConfig``), the
connector's when its config is validated (``WorkerConfig.override_errors``) and again when its
task is built. Messages never hold a secret. Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.client import java_security
from odradek.connect.api import ConfigException

__all__ = [
    "CLIENTS",
    "OVERRIDE_POLICIES",
    "POLICY_CLASSES",
    "PRINCIPAL_OVERRIDES",
    "client_overrides",
    "client_security",
    "is_security_key",
]

CLIENTS = ("producer", "consumer", "admin")
OVERRIDE_POLICIES = ("All", "None", "Principal")
# Kafka takes a policy by alias or by class name.
POLICY_CLASSES = {
    f"org.apache.kafka.connect.connector.policy.{alias}ConnectorClientConfigOverridePolicy": alias
    for alias in OVERRIDE_POLICIES
}
PRINCIPAL_OVERRIDES = ("sasl.jaas.config", "sasl.mechanism", "security.protocol")
is_security_key = java_security.is_security_key


def client_overrides(policy: str, connector_config: Mapping[str, str], client: str) -> dict:
    """A connector's ``<client>.override.*`` keys, unprefixed, once ``policy`` allows each."""
    prefix = f"{client}.override."
    overrides = {k[len(prefix) :]: v for k, v in connector_config.items() if k.startswith(prefix)}
    for key in overrides:
        if policy == "None" or (policy == "Principal" and key not in PRINCIPAL_OVERRIDES):
            raise ConfigException(
                prefix + key,
                f"The '{policy}' policy does not allow '{prefix + key}' to be overridden in the "
                f"connector configuration.",
            )
    return overrides


def _layers(layers: list[tuple[str, Mapping[str, str]]]) -> tuple[dict[str, str], dict[str, str]]:
    """(the stacked security keys, key -> the name the user wrote it under)."""
    settings: dict[str, str] = {}
    names: dict[str, str] = {}
    for prefix, props in layers:
        given = {k: v for k, v in props.items() if is_security_key(k)}
        settings = java_security.layer(settings, given)
        for key in given:
            names[key] = prefix + key
            names[java_security.ALIASES.get(key, key)] = prefix + key
    return settings, names


def client_security(
    worker: Mapping[str, str],
    client: str | None,
    prefixed: Mapping[str, str] = (),
    overrides: Mapping[str, str] = (),
) -> dict[str, str]:
    """librdkafka's security settings of one client: ``worker``'s top-level keys, then
    ``prefixed`` (the worker's ``<client>.*``, unprefixed), then ``overrides`` (the connector's
    allowed ``<client>.override.*``, unprefixed). ``client`` None: the top-level keys alone."""
    layers: list[tuple[str, Mapping[str, str]]] = [("", worker)]
    if client is not None:
        layers += [(f"{client}.", dict(prefixed)), (f"{client}.override.", dict(overrides))]
    settings, names = _layers(layers)
    try:
        return java_security.translate(settings, describe=lambda key: names.get(key, key))
    except java_security.JavaSecurityError as e:
        raise ConfigException(names.get(e.key, e.key), e.reason) from e
