"""What the offset handlers' unit tests (OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit)
stand on: a real group coordinator over the in-memory log with one ``__consumer_offsets``
partition, a topic ``orders`` of two partitions (in the shards' ``Topics`` and the handlers'
``Metadata``), a request context naming it, and ``nested`` to
find the kio class of a request's nested entries."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import GroupCoordinator, group_runtime
from odradek.groups.shard import ShardContext
from support.authorizer import handler_context
from support.coordinator_memory import MemoryLog, loaded

__all__ = ["TOPIC", "Metadata", "Topics", "coordinator", "context", "nested"]

TOPIC = "orders"


class Topics:
    def partition_count(self, topic: str) -> int | None:
        return 2 if topic == TOPIC else None

    def topic_id(self, topic: str) -> None:
        return None

    def topic_names(self) -> list[str]:
        return [TOPIC]


async def coordinator(log: MemoryLog) -> GroupCoordinator:
    config = replace(GroupCoordinatorConfig(), offsets_topic_num_partitions=1)
    log.leader_epoch[0] = 1
    runtime = group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, Topics(), lambda: 1000),
        write_timeout_ms=50,
    )
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    return GroupCoordinator(runtime, config)


class Metadata:
    """The broker's metadata cache as the handlers read it: the same topic as ``Topics``."""

    def topic(self, name: str) -> Any:
        count = Topics().partition_count(name)
        return None if count is None else SimpleNamespace(partitions=dict.fromkeys(range(count)))


def context(groups: GroupCoordinator | None, version: int) -> Any:
    return handler_context(SimpleNamespace(groups=groups, metadata=Metadata()), version)


def nested(cls: type, *path: str) -> type:
    for name in path:
        declared = cls.__dataclass_fields__[name].type  # tuple[X, ...], or that | None
        if type(None) in getattr(declared, "__args__", ()):
            declared = declared.__args__[0]
        cls = declared.__args__[0]
    return cls
