"""Reading the cluster: the view from Metadata, replica sizes from DescribeLogDirs.

``read_cluster`` asks any broker for Metadata (all topics, never auto-creating one) at the
highest version both speak (v1+ carry racks) and returns a ``ClusterView``; it also tells the
client every broker's address. A topic or partition the broker reports with an error other than
LEADER_NOT_AVAILABLE is left out of the view (it cannot be planned for) with a warning.

``replica_sizes`` asks each broker (DescribeLogDirs v1-4 goes to the broker whose disks it
describes) for the size of every replica it holds, summed over its log dirs, skipping "future"
replicas (an intra-broker move in progress). A broker that cannot be reached, or that does not
serve DescribeLogDirs, is left out: sizes are a progress display, not a safety rule, so a
missing size is shown as unknown rather than stopping the operation.

Async functions; one ``ClusterClient`` per task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from odradek.client.admin import DESCRIBE_LOG_DIRS, METADATA, ClusterClient, build
from odradek.client.errors import ClusterRequestError, UnsupportedByClusterError
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.ops.errors import OpsError
from odradek.ops.model import BrokerInfo, ClusterView, PartitionInfo

__all__ = ["read_cluster", "replica_sizes", "partition_sizes", "ReplicaSizes"]

log = logging.getLogger(__name__)

METADATA_MAX_VERSION = 12
DESCRIBE_LOG_DIRS_MAX_VERSION = 4

ReplicaSizes = dict[tuple[TopicPartition, int], int]  # (partition, broker) -> bytes


async def read_cluster(client: ClusterClient) -> ClusterView:
    """The cluster as Metadata shows it now."""
    response = await client.send_any(
        METADATA,
        METADATA_MAX_VERSION,
        lambda t: build(
            t,
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
    )
    brokers = {
        int(b.node_id): BrokerInfo(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
        for b in response.brokers
    }
    client.learn_brokers({b.id: (b.host, b.port) for b in brokers.values()})
    partitions = {}
    usable = (ErrorCode.none, ErrorCode.leader_not_available)
    for topic in response.topics:
        if topic.error_code not in usable or not topic.name:
            log.warning("Metadata: topic %s left out: %s", topic.name, topic.error_code.name)
            continue
        for p in topic.partitions:
            if p.error_code not in usable and not p.replica_nodes:
                name, index = topic.name, p.partition_index
                log.warning("Metadata: %s-%d left out: %s", name, index, p.error_code.name)
                continue
            info = PartitionInfo(
                str(topic.name),
                int(p.partition_index),
                tuple(int(r) for r in p.replica_nodes),
                int(p.leader_id),
                tuple(int(r) for r in p.isr_nodes),
                tuple(int(r) for r in getattr(p, "offline_replicas", ())),
            )
            partitions[info.tp] = info
    return ClusterView(
        brokers,
        partitions,
        int(getattr(response, "controller_id", -1)),
        getattr(response, "cluster_id", None),
    )


async def replica_sizes(
    client: ClusterClient, brokers: Iterable[int], answered: set[int] | None = None
) -> ReplicaSizes:
    """Bytes of every replica on ``brokers`` that answer (see the module docstring); the ids
    of those that answered go into ``answered`` (a replica they do not list has no bytes)."""
    sizes: ReplicaSizes = {}
    for broker_id in sorted(set(brokers)):
        try:
            response = await client.send_to(
                broker_id,
                DESCRIBE_LOG_DIRS,
                DESCRIBE_LOG_DIRS_MAX_VERSION,
                lambda t: build(t, topics=None),
            )
        except UnsupportedByClusterError:
            raise
        except OpsError as e:
            log.warning("DescribeLogDirs to broker %d failed: %s", broker_id, e)
            continue
        top = getattr(response, "error_code", ErrorCode.none)
        if top != ErrorCode.none:
            raise ClusterRequestError(f"DescribeLogDirs to broker {broker_id}: {top.name}", top)
        if answered is not None:
            answered.add(broker_id)
        for result in response.results:
            if result.error_code != ErrorCode.none:
                continue  # an offline dir: its replicas have no size to report
            for topic in result.topics:
                for p in topic.partitions:
                    if p.is_future_key:
                        continue
                    key = (TopicPartition(str(topic.name), int(p.partition_index)), broker_id)
                    sizes[key] = sizes.get(key, 0) + int(p.partition_size)
    return sizes


def partition_sizes(view: ClusterView, sizes: Mapping[tuple[TopicPartition, int], int]):
    """Each partition's size: its leader's replica, else the largest replica reported."""
    result: dict[TopicPartition, int] = {}
    for tp, p in view.partitions.items():
        if (tp, p.leader) in sizes:
            result[tp] = sizes[tp, p.leader]
        else:
            known = [sizes[tp, b] for b in p.replicas if (tp, b) in sizes]
            if known:
                result[tp] = max(known)
    return result
