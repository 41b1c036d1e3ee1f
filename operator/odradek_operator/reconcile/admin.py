"""The Odradek cluster as the reconcilers ask it things: ``ClusterAdmin`` and its real adapter.

``ClusterAdmin`` is the small port (a ``typing.Protocol``) the reconcilers take, so their
decisions are unit-tested with a fake. ``OpsAdmin`` implements it for one bootstrap address:
Metadata, drain, rebalance and reassignments through ``odradek.ops`` (the same library the
``odradek cluster`` command uses), DescribeLogDirs and DescribeConfigs through ``odradek.ops``'
``ClusterClient``, and topics and their config changes through confluent_kafka's
``AdminClient`` (its blocking futures waited for in a worker thread).

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
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode
from odradek.ops import ClusterView, OpsError
from odradek.ops.client import DESCRIBE_LOG_DIRS, ClusterClient, build, element_type
from odradek.ops.cluster import read_cluster
from odradek.ops.reassign import list_reassignments

__all__ = ["AdminRefused", "AdminTls", "ClusterAdmin", "ClusterUnavailable", "OpsAdmin"]

REQUEST_TIMEOUT_S = 15.0
ADMIN_TIMEOUT_S = 30.0


class ClusterUnavailable(Exception):
    """The cluster did not answer (retry later)."""


class AdminRefused(Exception):
    """The cluster refused a request for a reason retrying will not change (bad config...)."""


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
        from odradek.ops.client import ClusterClient

        try:
            async with ClusterClient(
                self.bootstrap, request_timeout_s=REQUEST_TIMEOUT_S, security=self.security
            ) as c:
                return await read_cluster(c)
        except (OpsError, OSError) as e:
            raise ClusterUnavailable(f"Metadata from {self.bootstrap}: {e}") from e

    async def reassignments_in_progress(self) -> int:
        from odradek.ops.client import ClusterClient

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
