"""The Odradek cluster as the reconcilers ask it things: ``ClusterAdmin`` and its real adapter.

``ClusterAdmin`` is the small port (a ``typing.Protocol``) the reconcilers take, so their
decisions are unit-tested with a fake; ``UserAdmin`` is the OdradekUser reconciler's (SCRAM
credentials, the ACLs of one principal, the user entity's client quotas). ``OpsAdmin``
implements both for one bootstrap address: Metadata, drain, rebalance and reassignments
through ``odradek.ops`` (the same library the ``odradek cluster`` command uses), DescribeLogDirs
and client quotas through ``odradek.ops``' ``ClusterClient`` (confluent_kafka has no client
quota API), topics and their configs, SCRAM credentials and ACLs through confluent_kafka's
``AdminClient`` (its blocking futures waited for in a worker thread). An ACL API answering
SECURITY_DISABLED (no authorizer on the brokers) is ``AuthorizerDisabled``.

Every call opens its own connections and closes them, bounded by ``REQUEST_TIMEOUT_S``; an
unreachable cluster is ``ClusterUnavailable`` (the handlers turn it into a temporary error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import admin as ck
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek import ops
from odradek.errors import ErrorCode
from odradek.ops import ClusterView, OpsError
from odradek.ops.client import DESCRIBE_LOG_DIRS, ClusterClient, build, element_type
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

__all__ = [
    "AdminRefused",
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


class OpsAdmin:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    # -- odradek.ops --------------------------------------------------------------------------

    async def view(self) -> ClusterView:
        from odradek.ops.client import ClusterClient

        try:
            async with ClusterClient(self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S) as c:
                return await read_cluster(c)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"Metadata from {self.bootstrap}: {e}") from e

    async def reassignments_in_progress(self) -> int:
        from odradek.ops.client import ClusterClient

        try:
            async with ClusterClient(self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S) as c:
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
        return await self._run(ops.prepare_move(self.bootstrap, topics, remaining))

    async def rebalance(self) -> int:
        return await self._run(ops.prepare_rebalance(self.bootstrap))

    async def _run(self, preparing) -> int:
        try:
            prepared = await preparing
            if not len(prepared.plan):
                return 0
            await ops.execute(self.bootstrap, prepared.plan, request_timeout_s=REQUEST_TIMEOUT_S)
        except ops.ReassignmentInProgressError:
            return await self.reassignments_in_progress()
        except ops.PlacementError as e:
            raise AdminRefused(str(e)) from e
        except (ops.OpsError, OSError) as e:
            raise ClusterUnavailable(str(e)) from e
        return len(prepared.plan)

    async def log_dir_partitions(self, broker_ids: Iterable[int]) -> dict[int, dict[str, int]]:
        from odradek.ops import OpsError
        from odradek.ops.cluster import read_cluster

        result: dict[int, dict[str, int]] = {}
        try:
            async with ClusterClient(self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S) as c:
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

    async def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, tuple[str, bool]]]:
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in sorted(set(topics))]
        if not resources:
            return {}
        client = self._client()  # alive until its futures are done
        answers = await self._wait(client.describe_configs(resources))
        return {
            resource.name: {
                entry.name: (entry.value, _source(entry) == DYNAMIC_TOPIC_CONFIG)
                for entry in entries.values()
            }
            for resource, entries in answers.items()
        }

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

    # -- users: SCRAM credentials and ACLs (confluent_kafka), quotas (odradek.ops) ---------------

    async def scram_mechanisms(self, user: str) -> dict[str, int]:
        client = self._client()  # alive until its futures are done
        try:
            answers = await self._wait(
                client.describe_user_scram_credentials([user], request_timeout=ADMIN_TIMEOUT_S)
            )
        except AdminRefused as e:
            if "RESOURCE_NOT_FOUND" in str(e):  # no credential at all
                return {}
            raise
        description = answers.get(user)
        return {
            info.mechanism.name.replace("_", "-"): info.iterations
            for info in (description.scram_credential_infos if description else ())
        }

    async def upsert_scram(self, user: str, mechanism: str, iterations: int, password: str) -> None:
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations)
        upsertion = UserScramCredentialUpsertion(user, info, password.encode())
        client = self._client()
        await self._wait(
            client.alter_user_scram_credentials([upsertion], request_timeout=ADMIN_TIMEOUT_S)
        )

    async def delete_scram(self, user: str, mechanism: str) -> None:
        deletion = UserScramCredentialDeletion(user, ScramMechanism[mechanism.replace("-", "_")])
        client = self._client()
        try:
            await self._wait(
                client.alter_user_scram_credentials([deletion], request_timeout=ADMIN_TIMEOUT_S)
            )
        except AdminRefused as e:
            if "RESOURCE_NOT_FOUND" not in str(e):  # already gone: fine
                raise

    async def acls_of(self, principal: str) -> frozenset[AclBinding]:
        selection = ck.AclBindingFilter(
            ck.ResourceType.ANY,
            None,
            ck.ResourcePatternType.ANY,
            principal,
            None,
            ck.AclOperation.ANY,
            ck.AclPermissionType.ANY,
        )
        client = self._client()
        future = client.describe_acls(selection, request_timeout=ADMIN_TIMEOUT_S)
        found = (await self._acl_wait({"acls": future}))["acls"]
        return frozenset(_from_ck(b) for b in found if _from_ck(b) is not None)

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        made = [_to_ck(b) for b in bindings]
        if made:
            client = self._client()
            await self._acl_wait(client.create_acls(made, request_timeout=ADMIN_TIMEOUT_S))

    async def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        filters = [_to_ck(b, ck.AclBindingFilter) for b in bindings]
        if filters:
            client = self._client()
            await self._acl_wait(client.delete_acls(filters, request_timeout=ADMIN_TIMEOUT_S))

    async def _acl_wait(self, futures: Mapping) -> dict:
        try:
            return await self._wait(futures)
        except AdminRefused as e:
            if "SECURITY_DISABLED" in str(e):
                raise AuthorizerDisabled(
                    "the brokers have no authorizer (authorizer.class.name): ACLs are not kept"
                ) from e
            raise

    def cluster_client(self) -> ClusterClient:
        """Odradek's own client for one request's connections (quotas)."""
        return ClusterClient(self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S)

    async def user_quotas(self, user: str) -> dict[str, float]:
        def make(request_type):
            component = element_type(request_type, "components")
            match = build(component, entity_type="user", match_type=MATCH_EXACT, match=user)
            return build(request_type, components=(match,), strict=True)

        try:
            async with self.cluster_client() as client:
                response = await client.send_any(DESCRIBE_CLIENT_QUOTAS, 1, make)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"DescribeClientQuotas: {e}") from e
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

        try:
            async with self.cluster_client() as client:
                response = await client.send_any(ALTER_CLIENT_QUOTAS, 1, make)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"AlterClientQuotas: {e}") from e
        for entry in response.entries:
            if entry.error_code:
                raise AdminRefused(f"AlterClientQuotas for user {user}: {entry.error_message}")


DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT = 0  # DescribeClientQuotas' match_type: this entity name
# Odradek's (Kafka's) ACL vocabulary <-> librdkafka's, which calls the Cluster BROKER.
_CK_RESOURCE = {
    ResourceType.TOPIC: ck.ResourceType.TOPIC,
    ResourceType.GROUP: ck.ResourceType.GROUP,
    ResourceType.CLUSTER: ck.ResourceType.BROKER,
    ResourceType.TRANSACTIONAL_ID: ck.ResourceType.TRANSACTIONAL_ID,
}
_FROM_CK_RESOURCE = {v: k for k, v in _CK_RESOURCE.items()}


def _to_ck(binding: AclBinding, kind=ck.AclBinding):
    pattern, entry = binding.pattern, binding.entry
    return kind(
        _CK_RESOURCE[pattern.resource_type],
        pattern.name,
        ck.ResourcePatternType[pattern.pattern_type.name],
        entry.principal,
        entry.host,
        ck.AclOperation[entry.operation.name],
        ck.AclPermissionType[entry.permission_type.name],
    )


def _from_ck(binding) -> AclBinding | None:
    """None for an ACL of a resource type a user's rules cannot name (delegation tokens...)."""
    resource_type = _FROM_CK_RESOURCE.get(binding.restype)
    if resource_type is None:
        return None
    return AclBinding(
        ResourcePattern(
            resource_type, binding.name, PatternType[binding.resource_pattern_type.name]
        ),
        AccessControlEntry(
            binding.principal,
            binding.host,
            AclOperation[binding.operation.name],
            AclPermissionType[binding.permission_type.name],
        ),
    )


DYNAMIC_TOPIC_CONFIG = 1  # Kafka's ConfigSource of a topic's own override


def _source(entry) -> int:
    return int(getattr(entry.source, "value", entry.source))


def _UNAVAILABLE_CODES() -> set[int]:

    return {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
        KafkaError._DESTROY,
    }
