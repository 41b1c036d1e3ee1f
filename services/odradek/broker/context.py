"""What a request handler may use: this broker's parts, and the request being served."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.broker.admin.producer_ids import ProducerIdManager
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.topic_configs import TopicConfigs
from odradek.config.broker import BrokerConfig
from odradek.observability.metrics import BrokerMetrics
from odradek.protocol.header import RequestHeader
from odradek.zk.client import ZkClient


@dataclass(slots=True)
class BrokerContext:
    """The broker's parts, shared by every connection."""

    broker_id: int
    replica_manager: ReplicaManager
    metadata: MetadataCache
    metrics: BrokerMetrics | None = None
    config: BrokerConfig | None = None
    zk: ZkClient | None = None  # None only in tests that run a broker without a cluster
    topic_configs: TopicConfigs | None = None
    producer_ids: ProducerIdManager | None = None
    # The highest controller epoch seen; requests from older controllers are refused.
    controller_epoch: int = 0
    # APIs advertised by ApiVersions: those the protocol layer reads and a handler serves.
    served_versions: Mapping[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    broker: BrokerContext

    @property
    def api_version(self) -> int:
        return self.header.api_version
