"""What a request handler may use: this broker's parts, and the request being served."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.broker.admin.producer_ids import ProducerIdManager
from odradek.broker.controller_link import ControllerLink
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.internal_topics import InternalTopics
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.mutation_quota import UNBOUNDED, MutationQuota
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.topic_configs import TopicConfigs
from odradek.broker.txn_markers import TxnMarkerSender
from odradek.config.broker import BrokerConfig
from odradek.config.endpoints import Listener
from odradek.groups.coordinator import GroupCoordinator
from odradek.observability.metrics import BrokerMetrics
from odradek.protocol.header import RequestHeader
from odradek.security.acl import AclOperation, Authorizer, ResourceType
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.transactions.coordinator import TransactionCoordinator
from odradek.zk.client import ZkClient


@dataclass(slots=True)
class BrokerContext:
    """The broker's parts, shared by every connection of every listener."""

    broker_id: int
    replica_manager: ReplicaManager
    metadata: MetadataCache
    metrics: BrokerMetrics | None = None
    config: BrokerConfig | None = None
    zk: ZkClient | None = None  # None only in tests that run a broker without a cluster
    topic_configs: TopicConfigs | None = None
    # Client quotas per user and client id (``quotas``): bytes, handler time, partition
    # mutations; None: none.
    client_quotas: ClientQuotas | None = None
    producer_ids: ProducerIdManager | None = None
    # The highest controller epoch seen; requests from older controllers are refused.
    controller_epoch: int = 0
    # Kafka's broker epoch: the czxid of this broker's /brokers/ids/<id> registration, set by
    # the registrar at each (re-)registration; None until then. Controller requests must carry
    # it (controller_requests.accept_broker_epoch).
    broker_epoch: int | None = None
    # fetch.max.bytes: the most a fetch is answered with (config.fetch_max_bytes, read once).
    fetch_max_bytes: int = BrokerConfig.KEYS["fetch.max.bytes"].default  # type: ignore[assignment]
    # KIP-227 sessions of the fetchers of this broker's partitions, sized by the config.
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache.of)
    # Requests to the active controller (forwarded admin requests, ControlledShutdown).
    controller: ControllerLink | None = None
    # Consumer groups and committed offsets (None: tests that run a broker without groups).
    groups: GroupCoordinator | None = None
    # Transactions (None: tests that run a broker without a transaction coordinator).
    transactions: TransactionCoordinator | None = None
    # __consumer_offsets and __transaction_state, created on first use, once at a time each.
    internal_topics: InternalTopics = field(default_factory=InternalTopics)
    # The transaction coordinator's WriteTxnMarkers to partition leaders (None: tests without).
    txn_markers: TxnMarkerSender | None = None
    # authorizer.class.name's authorizer; None (no authorizer configured) allows everything.
    authorizer: Authorizer | None = None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request: its header, the broker, and the listener (and what it serves) it came on.

    Everything a handler needs to know about who asked comes from here: the listener and the
    connection's principal (``security.principal``), which ``authorize`` and ``authorize_any``
    put to the broker's authorizer.
    """

    header: RequestHeader
    broker: BrokerContext
    listener: Listener
    served_versions: Mapping[int, tuple[int, int]]
    # The client's address as Kafka reports a member's host ("/127.0.0.1"), "" if unknown.
    client_host: str = ""
    principal: KafkaPrincipal = ANONYMOUS
    # Names the connection among the broker's live ones (per-connection bounds: groups.limits).
    connection_id: str = ""

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def host(self) -> str:
        """The client's address as an ACL names a host ("127.0.0.1"; "" if unknown)."""
        return self.client_host.removeprefix("/")

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal do ``operation`` to ``name``? True without an authorizer."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def mutation_quota(self, strict_since_version: int | None) -> MutationQuota:
        """This request's ``controller_mutation_rate`` quota (``broker.mutation_quota``): strict
        from ``strict_since_version`` on, permissive below it (or always, for None), as Kafka's
        ``newQuotaFor`` and ``newPermissiveQuotaFor``."""
        quotas = self.broker.client_quotas
        if quotas is None or not quotas.enabled:
            return UNBOUNDED
        return quotas.mutation_quota(
            self.principal.name,
            self.header.client_id or "",
            strict=strict_since_version is not None and self.api_version >= strict_since_version,
        )

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May it do ``operation`` to some resource of ``resource_type`` (KIP-679)?"""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_any(self.principal, self.host, operation, resource_type)


@dataclass(frozen=True, slots=True)
class DeferredAnswer:
    """What a handler returns when its work is done but its answer must wait (an ``acks=all``
    produce waiting for replication): the connection handles the next request meanwhile and
    writes this answer, in request order, once ``response`` completes (``broker.connection``).
    ``response`` must not hold views of the request's frame: that buffer is reused."""

    response: Awaitable[Any]
