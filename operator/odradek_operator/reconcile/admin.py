"""The Odradek cluster as the reconcilers ask it things: ``ClusterAdmin`` and its real adapter.

``ClusterAdmin`` is the small port (a ``typing.Protocol``) the reconcilers take, so their
decisions are unit-tested with a fake; ``UserAdmin`` is the OdradekUser reconciler's (SCRAM
credentials, the ACLs of one principal, the user entity's client quotas). ``OpsAdmin``
implements both for one bootstrap address: Metadata, drain, rebalance and reassignments
through ``odradek.ops`` (the same library the ``odradek cluster`` command uses);
DescribeLogDirs, DescribeConfigs and the users' SCRAM credentials, ACLs and client quotas
through ``odradek.ops``' ``ClusterClient`` (confluent_kafka has no client quota API); topics
and their config changes through confluent_kafka's ``AdminClient`` (its blocking futures
waited for in a worker thread). An ACL API answering SECURITY_DISABLED (no authorizer on the
brokers) is ``AuthorizerDisabled``.

Every call opens its own connections and closes them, bounded by ``REQUEST_TIMEOUT_S``; an
unreachable cluster is ``ClusterUnavailable`` (the handlers turn it into a temporary error).

On a secured cluster ``OpsAdmin`` is given ``AdminTls`` (the operator's own certificate,
``<C>-operator-certs``, principal ``User:odradek-operator``, a super user) and a bootstrap on
the brokers' INTERNAL listener by their DNS names: both clients speak mutual TLS and check the
brokers' host names against the cluster CA.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from odradek import ops
from odradek.client.admin import DESCRIBE_LOG_DIRS, ClusterClient, build, element_type
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode
from odradek.ops import ClusterView, OpsError
from odradek.ops.cluster import read_cluster
from odradek.ops.reassign import list_reassignments
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.scram import ScramMechanism, salted_password

__all__ = [
    "AdminRefused",
    "AdminTls",
    "AuthorizerDisabled",
    "ClusterAdmin",
    "ClusterUnavailable",
    "OpsAdmin",
    "UserAdmin",
]

REQUEST_TIMEOUT_S = 15.0
ADMIN_TIMEOUT_S = 30.0


class ClusterUnavailable(Exception):
    """The cluster did not answer (retry later)."""


class AdminRefused(Exception):
    """The cluster refused a request for a reason retrying will not change (bad config...)."""


class AuthorizerDisabled(AdminRefused):
    """The brokers run without an authorizer (``authorizer.class.name``): ACLs cannot be kept."""


class ClusterAdmin(Protocol):
    async def view(self) -> ClusterView: ...

    async def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, tuple[str, bool]]]:
        """topic -> config name -> (value, is_override): set on the topic itself or not."""

    async def reassignments_in_progress(self) -> int: ...

    async def drain(self, broker_ids: Iterable[int]) -> int:
        """Start moving every replica off ``broker_ids`` onto the other brokers, in one
        reassignment (draining one at a time could move replicas onto the next to go); the
        partitions moving (0: nothing to move)."""

    async def rebalance(self) -> int:
        """Start evening out replicas over the brokers; the partitions moving (0: balanced)."""

    async def log_dir_partitions(self, broker_ids: Iterable[int]) -> dict[int, dict[str, int]]:
        """broker -> log dir -> replicas in it (brokers that did not answer are left out)."""

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str]
    ) -> None: ...

    async def create_partitions(self, name: str, total: int) -> None: ...

    async def alter_topic_config(
        self, name: str, set_: Mapping[str, str], delete: Iterable[str]
    ) -> None: ...

    async def delete_topic(self, name: str) -> None: ...


class UserAdmin(Protocol):
    """What the OdradekUser reconciler asks. ACLs are ``odradek.security.acl.AclBinding``s."""

    async def scram_mechanisms(self, user: str) -> dict[str, int]:
        """The user's SCRAM credentials: mechanism (``SCRAM-SHA-512``) -> iterations."""

    async def upsert_scram(
        self, user: str, mechanism: str, iterations: int, password: str
    ) -> None: ...

    async def delete_scram(self, user: str, mechanism: str) -> None:
        """Remove one credential (none there: nothing happens)."""

    async def acls_of(self, principal: str) -> frozenset[AclBinding]:
        """Every ACL whose principal is ``principal`` (AuthorizerDisabled without an authorizer)."""

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None: ...

    async def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Remove exactly these ACLs (each matched on every field)."""

    async def user_quotas(self, user: str) -> dict[str, float]:
        """The client quotas of the user entity ``user`` (not its clients', nor the default)."""

    async def alter_user_quotas(
        self, user: str, set_: Mapping[str, float], remove: Iterable[str]
    ) -> None: ...


@dataclass(frozen=True)
class AdminTls:
    """The operator's client identity for one cluster: PEM key, certificate, trust bundle."""

    key_pem: str = field(repr=False)
    cert_pem: str
    trust_pem: str

    @classmethod
    def of(cls, keystore_pem: str, trust_pem: str) -> AdminTls:
        """From a ``<pod>.pem``-style key-then-certificate PEM (pki.secrets)."""
        start = keystore_pem.index("-----BEGIN CERTIFICATE-----")
        return cls(keystore_pem[:start], keystore_pem[start:], trust_pem)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context: this certificate, the cluster CA trusted, host names checked.
        Python's ssl loads a key only from a file: written to a private temporary directory
        for the moment of loading, then removed."""
        context = ssl.create_default_context(cadata=self.trust_pem)
        with tempfile.TemporaryDirectory(prefix="odradek-operator-tls-") as directory:
            path = os.path.join(directory, "operator.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.key_pem + self.cert_pem)
            context.load_cert_chain(path)
        return context

    def librdkafka(self) -> dict[str, str]:
        return {
            "security.protocol": "SSL",
            "ssl.ca.pem": self.trust_pem,
            "ssl.certificate.pem": self.cert_pem,
            "ssl.key.pem": self.key_pem,
        }


class OpsAdmin:
    def __init__(self, bootstrap: str, tls: AdminTls | None = None) -> None:
        self.bootstrap = bootstrap
        self.tls = tls
        self.security = ClientSecurity(tls.ssl_context()) if tls is not None else None

    # -- odradek.ops --------------------------------------------------------------------------

    async def view(self) -> ClusterView:
        from odradek.client.admin import ClusterClient

        try:
            async with ClusterClient(
                self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S, security=self.security
            ) as c:
                return await read_cluster(c)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"Metadata from {self.bootstrap}: {e}") from e

    async def reassignments_in_progress(self) -> int:
        from odradek.client.admin import ClusterClient

        try:
            async with ClusterClient(
                self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S, security=self.security
            ) as c:
                return len(await list_reassignments(c))
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"ListPartitionReassignments: {e}") from e

    async def drain(self, broker_ids: Iterable[int]) -> int:
        departing = set(broker_ids)
        view = await self.view()
        topics = sorted({p.topic for p in view.partitions.values() if departing & set(p.replicas)})
        if not topics:
            return 0
        remaining = [b for b in view.brokers if b not in departing]
        return await self._run(
            ops.prepare_move(self.bootstrap, topics, remaining, security=self.security)
        )

    async def rebalance(self) -> int:
        return await self._run(ops.prepare_rebalance(self.bootstrap, security=self.security))

    async def _run(self, preparing) -> int:
        try:
            prepared = await preparing
            if not len(prepared.plan):
                return 0
            await ops.execute(
                self.bootstrap,
                prepared.plan,
                request_timeout_s=REQUEST_TIMEOUT_S,
                security=self.security,
            )
        except ops.ReassignmentInProgressError:
            return await self.reassignments_in_progress()
        except ops.PlacementError as e:
            raise AdminRefused(str(e)) from e
        except (ops.OpsError, OSError) as e:
            raise ClusterUnavailable(str(e)) from e
        return len(prepared.plan)

    async def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, tuple[str, bool]]]:
        """DescribeConfigs through odradek.ops (the cluster pass asks it during every rolling
        restart: one client, the operator's TLS, for the whole pass)."""
        names_ = sorted(set(topics))
        if not names_:
            return {}

        def make(request_type):
            resource_type = element_type(request_type, "resources")
            resources = tuple(
                resource_type(
                    resource_type=RESOURCE_TOPIC, resource_name=t, configuration_keys=None
                )
                for t in names_
            )
            return build(request_type, resources=resources, include_synonyms=False)

        try:
            async with ClusterClient(
                self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S, security=self.security
            ) as c:
                response = await c.send_any(DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_MAX_VERSION, make)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"DescribeConfigs: {e}") from e
        result: dict[str, dict[str, tuple[str, bool]]] = {}
        for r in response.results:
            if r.error_code != ErrorCode.none:
                raise AdminRefused(
                    f"{r.error_code.name}: DescribeConfigs of {r.resource_name}: "
                    f"{r.error_message or ''}".rstrip(": ")
                )
            result[str(r.resource_name)] = {
                str(entry.name): (entry.value, _is_override(entry)) for entry in r.configs
            }
        return result

    async def log_dir_partitions(self, broker_ids: Iterable[int]) -> dict[int, dict[str, int]]:
        from odradek.ops import OpsError
        from odradek.ops.cluster import read_cluster

        result: dict[int, dict[str, int]] = {}
        try:
            async with ClusterClient(
                self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S, security=self.security
            ) as c:
                await read_cluster(c)  # learns every broker's address
                for broker_id in sorted(set(broker_ids)):
                    try:
                        response = await c.send_to(
                            broker_id, DESCRIBE_LOG_DIRS, 4, lambda t: build(t, topics=None)
                        )
                    except OpsError:
                        continue
                    dirs: dict[str, int] = {}
                    for r in response.results:
                        if r.error_code != ErrorCode.none:
                            continue
                        dirs[str(r.log_dir)] = sum(len(t.partitions) for t in r.topics)
                    result[broker_id] = dirs
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"DescribeLogDirs: {e}") from e
        return result

    # -- confluent_kafka ----------------------------------------------------------------------

    def _client(self):
        return AdminClient(
            {
                "bootstrap.servers": self.bootstrap,
                "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
                # Looking at a topic must never create it (brokers auto-create by default).
                "allow.auto.create.topics": False,
                **(self.tls.librdkafka() if self.tls is not None else {}),
            }
        )

    async def _wait(self, futures: Mapping) -> dict:
        def wait_all():
            results = {}
            for key, future in futures.items():
                results[key] = future.result(timeout=ADMIN_TIMEOUT_S)
            return results

        try:
            return await asyncio.to_thread(wait_all)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            if (
                error is not None
                and hasattr(error, "retriable")
                and not error.retriable()
                and error.code() not in _UNAVAILABLE_CODES()
            ):
                raise AdminRefused(f"{error.name()}: {error.str()}") from e
            raise ClusterUnavailable(str(e)) from e
        except TimeoutError as e:
            raise ClusterUnavailable(f"{self.bootstrap}: no answer in {ADMIN_TIMEOUT_S}s") from e

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str]
    ) -> None:

        topic = NewTopic(name, partitions, replication_factor, config={**config})
        client = self._client()  # alive until its futures are done
        try:
            await self._wait(client.create_topics([topic], operation_timeout=ADMIN_TIMEOUT_S))
        except AdminRefused as e:
            if not str(e).startswith("TOPIC_ALREADY_EXISTS"):  # created by a pass before: fine
                raise

    async def create_partitions(self, name: str, total: int) -> None:
        client = self._client()  # alive until its futures are done
        await self._wait(client.create_partitions([NewPartitions(name, total)]))

    async def alter_topic_config(
        self, name: str, set_: Mapping[str, str], delete: Iterable[str]
    ) -> None:

        entries = [
            ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
            for k, v in set_.items()
        ]
        entries += [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete
        ]
        if not entries:
            return
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
        client = self._client()  # alive until its futures are done
        await self._wait(client.incremental_alter_configs([resource]))

    async def delete_topic(self, name: str) -> None:
        client = self._client()  # alive until its futures are done
        await self._wait(client.delete_topics([name], operation_timeout=ADMIN_TIMEOUT_S))

    # -- users: SCRAM credentials, ACLs and quotas (odradek.ops' ClusterClient) -----------------
    #
    # Odradek's own client, not librdkafka: each request goes to a bootstrap address (any broker
    # serves these APIs), so nothing depends on resolving the names brokers advertise.

    def cluster_client(self) -> ClusterClient:
        """Odradek's own client for one call's connections."""
        return ClusterClient(
            self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S, security=self.security
        )

    async def _send(self, what: str, api_key: int, version: int, make):
        try:
            async with self.cluster_client() as client:
                return await client.send_any(api_key, version, make)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"{what}: {e}") from e

    async def scram_mechanisms(self, user: str) -> dict[str, int]:
        def make(request_type):
            name = element_type(request_type, "users")
            return build(request_type, users=(build(name, name=user),))

        response = await self._send(
            "DescribeUserScramCredentials", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, make
        )
        if response.error_code:
            raise AdminRefused(f"DescribeUserScramCredentials: {response.error_message}")
        found: dict[str, int] = {}
        for result in response.results:
            if result.error_code == ErrorCode.resource_not_found:
                continue  # no credential at all
            if result.error_code:
                raise AdminRefused(f"DescribeUserScramCredentials {user}: {result.error_message}")
            for info in result.credential_infos:
                found[_SCRAM_BY_WIRE_TYPE[int(info.mechanism)].mechanism_name] = int(
                    info.iterations
                )
        return found

    async def _alter_scram(self, user: str, upsertions=(), deletions=()) -> None:
        def make(request_type):
            upsertion = element_type(request_type, "upsertions")
            deletion = element_type(request_type, "deletions")
            return build(
                request_type,
                upsertions=tuple(build(upsertion, name=user, **u) for u in upsertions),
                deletions=tuple(build(deletion, name=user, **d) for d in deletions),
            )

        response = await self._send(
            "AlterUserScramCredentials", ALTER_USER_SCRAM_CREDENTIALS, 0, make
        )
        for result in response.results:
            if result.error_code == ErrorCode.resource_not_found and deletions:
                continue  # deleting one that is not there: already done
            if result.error_code:
                raise AdminRefused(f"AlterUserScramCredentials {user}: {result.error_message}")

    async def upsert_scram(self, user: str, mechanism: str, iterations: int, password: str) -> None:
        scram = _scram_mechanism(mechanism)
        salt = os.urandom(SCRAM_SALT_BYTES)
        salted = salted_password(scram, password, salt, iterations)
        upsertion = {
            "mechanism": scram.wire_type,
            "iterations": iterations,
            "salt": salt,
            "salted_password": salted,
        }
        await self._alter_scram(user, upsertions=[upsertion])

    async def delete_scram(self, user: str, mechanism: str) -> None:
        await self._alter_scram(
            user, deletions=[{"mechanism": _scram_mechanism(mechanism).wire_type}]
        )

    async def acls_of(self, principal: str) -> frozenset[AclBinding]:
        def make(request_type):
            return build(
                request_type,
                resource_type_filter=int(ResourceType.ANY),
                resource_name_filter=None,
                pattern_type_filter=int(PatternType.ANY),
                principal_filter=principal,
                host_filter=None,
                operation=int(AclOperation.ANY),
                permission_type=int(AclPermissionType.ANY),
            )

        response = await self._send("DescribeAcls", DESCRIBE_ACLS, 3, make)
        _check_acl_error(response.error_code, response.error_message, "DescribeAcls")
        found = set()
        for resource in response.resources:
            for entry in resource.acls:
                if int(resource.resource_type) not in _USER_RESOURCE_TYPES:
                    continue  # delegation tokens, users: no rule of a user names them
                found.add(
                    AclBinding(
                        ResourcePattern(
                            ResourceType(int(resource.resource_type)),
                            resource.resource_name,
                            PatternType(int(resource.pattern_type)),
                        ),
                        AccessControlEntry(
                            entry.principal,
                            entry.host,
                            AclOperation(int(entry.operation)),
                            AclPermissionType(int(entry.permission_type)),
                        ),
                    )
                )
        return frozenset(found)

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        made = list(bindings)
        if not made:
            return

        def make(request_type):
            creation = element_type(request_type, "creations")
            return build(
                request_type,
                creations=tuple(
                    build(
                        creation,
                        resource_type=int(b.pattern.resource_type),
                        resource_name=b.pattern.name,
                        resource_pattern_type=int(b.pattern.pattern_type),
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission_type),
                    )
                    for b in made
                ),
            )

        response = await self._send("CreateAcls", CREATE_ACLS, 3, make)
        for result in response.results:
            _check_acl_error(result.error_code, result.error_message, "CreateAcls")

    async def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        gone = list(bindings)
        if not gone:
            return

        def make(request_type):
            selection = element_type(request_type, "filters")
            return build(
                request_type,
                filters=tuple(
                    build(
                        selection,
                        resource_type_filter=int(b.pattern.resource_type),
                        resource_name_filter=b.pattern.name,
                        pattern_type_filter=int(b.pattern.pattern_type),
                        principal_filter=b.entry.principal,
                        host_filter=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission_type),
                    )
                    for b in gone
                ),
            )

        response = await self._send("DeleteAcls", DELETE_ACLS, 3, make)
        for result in response.filter_results:
            _check_acl_error(result.error_code, result.error_message, "DeleteAcls")

    async def user_quotas(self, user: str) -> dict[str, float]:
        def make(request_type):
            component = element_type(request_type, "components")
            match = build(component, entity_type="user", match_type=MATCH_EXACT, match=user)
            return build(request_type, components=(match,), strict=True)

        response = await self._send("DescribeClientQuotas", DESCRIBE_CLIENT_QUOTAS, 1, make)
        if response.error_code:
            raise AdminRefused(f"DescribeClientQuotas: {response.error_message}")
        for entry in response.entries or ():
            if [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", user)]:
                return {v.key: float(v.value) for v in entry.values}
        return {}

    async def alter_user_quotas(
        self, user: str, set_: Mapping[str, float], remove: Iterable[str]
    ) -> None:
        ops = [(k, float(v), False) for k, v in set_.items()] + [(k, 0.0, True) for k in remove]
        if not ops:
            return

        def make(request_type):
            entry_type = element_type(request_type, "entries")
            entity_type = element_type(entry_type, "entity")
            op_type = element_type(entry_type, "ops")
            entry = build(
                entry_type,
                entity=(build(entity_type, entity_type="user", entity_name=user),),
                ops=tuple(build(op_type, key=k, value=v, remove=r) for k, v, r in ops),
            )
            return build(request_type, entries=(entry,), validate_only=False)

        response = await self._send("AlterClientQuotas", ALTER_CLIENT_QUOTAS, 1, make)
        for entry in response.entries:
            if entry.error_code:
                raise AdminRefused(f"AlterClientQuotas for user {user}: {entry.error_message}")


# Kafka's API keys of the users' requests (odradek.protocol.apis.ApiKey).
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
MATCH_EXACT = 0  # DescribeClientQuotas' match_type: this entity name
SCRAM_SALT_BYTES = 32  # a fresh salt per credential, as Kafka's ScramFormatter makes
_SCRAM_BY_WIRE_TYPE = {m.wire_type: m for m in ScramMechanism}
_USER_RESOURCE_TYPES = {
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
}


def _scram_mechanism(name: str) -> ScramMechanism:
    for mechanism in ScramMechanism:
        if mechanism.mechanism_name == name:
            return mechanism
    raise ValueError(f"unknown SCRAM mechanism {name}")


def _check_acl_error(code, message: str | None, what: str) -> None:
    if code == ErrorCode.security_disabled:
        raise AuthorizerDisabled(
            "the brokers have no authorizer (authorizer.class.name): ACLs are not kept"
        )
    if code:
        raise AdminRefused(f"{what}: {message or ErrorCode(int(code)).name}")


DYNAMIC_TOPIC_CONFIG = 1  # Kafka's ConfigSource of a topic's own override
RESOURCE_TOPIC = 2  # Kafka's ConfigResource.Type
DESCRIBE_CONFIGS = 32
DESCRIBE_CONFIGS_MAX_VERSION = 4


def _is_override(entry) -> bool:
    """Set on the topic itself: config_source (v1+), or not is_default (v0)."""
    source = getattr(entry, "config_source", None)
    if source is None:
        return not entry.is_default
    return int(source) == DYNAMIC_TOPIC_CONFIG


def _UNAVAILABLE_CODES() -> set[int]:

    return {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
        KafkaError._DESTROY,
    }
