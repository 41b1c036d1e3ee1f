"""The ListGroups, DescribeGroups and DeleteGroups handlers at every version they serve, over a
real coordinator runtime whose shards hold test doubles (``support.group_doubles``): one answer
across shards, filters by version, per-group errors, shards loading or led elsewhere."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import pytest

from odradek.broker.handlers import delete_groups, describe_groups, list_groups
from odradek.common.topics import OFFSETS_TOPIC
from odradek.coordinator.result import Result
from odradek.errors import ErrorCode
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import GroupCoordinator, group_runtime
from odradek.groups.shard import ShardContext
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.security.acl import AclOperation, ResourceType
from support.authorizer import MemoryAuthorizer, handler_context
from support.coordinator_memory import MemoryLog, loaded
from support.group_doubles import DoubleShard, group_record, offset_record

PARTITIONS = 3
BROKER_ID = 1


def versions(api_key: ApiKey) -> list[int]:
    low, high = SUPPORTED_VERSIONS[api_key]
    return list(range(low, high + 1))


class Cluster:
    """A broker as the handlers see it: its coordinator, its metadata of __consumer_offsets."""

    def __init__(self) -> None:
        self.log = MemoryLog()
        self.config = GroupCoordinatorConfig(offsets_topic_num_partitions=PARTITIONS)
        self.runtime = group_runtime(
            self.log,
            lambda p, timer: ShardContext(p, self.config, timer, None, lambda: 0),  # type: ignore[arg-type]
            new_shard=DoubleShard,
            write_timeout_ms=50,
        )
        self.coordinator = GroupCoordinator(self.runtime, self.config)
        self.leaders = dict.fromkeys(range(PARTITIONS), BROKER_ID)
        metadata = SimpleNamespace(topic=self._topic)
        self.broker = SimpleNamespace(
            broker_id=BROKER_ID, groups=self.coordinator, metadata=metadata
        )

    def _topic(self, name: str):
        if name != OFFSETS_TOPIC:
            return None
        return SimpleNamespace(
            partitions={p: SimpleNamespace(leader=leader) for p, leader in self.leaders.items()}
        )

    async def start(self) -> None:
        for p in range(PARTITIONS):
            self.log.leader_epoch[p] = 1
            self.runtime.on_elected(p, 1)
            await loaded(self.runtime, p)

    async def write(self, *records) -> None:
        for record in records:
            group_id = record.key.group
            await self.coordinator.write(group_id, lambda shard, r=record: Result(records=[r]))

    async def call(self, module, version: int, authorizer=None, **fields):
        request_type = schemas.request_schema(module.API_KEY, version)
        known = request_type.__dataclass_fields__
        request = request_type(**{k: v for k, v in fields.items() if k in known})
        ctx = handler_context(self.broker, version, authorizer=authorizer)
        return await module.handle(ctx, request)


def run(test):
    def wrapper(*args, **kwargs):
        async def body():
            cluster = Cluster()
            await cluster.start()
            await cluster.write(
                group_record("stable", state="Stable", protocol_name="range", members=["m1"]),
                group_record("idle"),
                group_record("kip848", state="Stable", type="consumer", members=["c1"]),
                offset_record("idle", "t", 0, 5),
                offset_record("simple", "t", 0, 7),
            )
            try:
                await test(cluster, *args, **kwargs)
            finally:
                await cluster.runtime.close()

        asyncio.run(asyncio.wait_for(body(), 10))

    wrapper.__name__ = test.__name__
    signature = inspect.signature(test)
    wrapper.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    return wrapper


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
@run
async def test_list_groups_answers_across_shards(cluster, version):
    response = await cluster.call(list_groups, version)
    assert response.error_code == ErrorCode.none
    assert [(g.group_id, g.protocol_type) for g in response.groups] == [
        ("idle", "consumer"),
        ("kip848", "consumer"),
        ("simple", ""),
        ("stable", "consumer"),
    ]
    if version >= 4:
        assert [g.group_state for g in response.groups] == ["Empty", "Stable", "Empty", "Stable"]
    if version >= 5:
        assert [g.group_type for g in response.groups] == [
            "classic",
            "consumer",
            "classic",
            "classic",
        ]


@run
async def test_list_groups_filters_v4_states_v5_types(cluster):
    v4 = await cluster.call(list_groups, 4, states_filter=("Empty",))
    assert [g.group_id for g in v4.groups] == ["idle", "simple"]
    v5 = await cluster.call(list_groups, 5, states_filter=("stable",), types_filter=("classic",))
    assert [g.group_id for g in v5.groups] == ["stable"]


@run
async def test_list_groups_skips_shards_led_elsewhere_and_waits_for_loading_ones(cluster):
    moved = cluster.coordinator.partition_for("stable")
    cluster.runtime.on_resigned(moved)
    response = await cluster.call(list_groups, 5)
    assert "stable" not in [g.group_id for g in response.groups]
    cluster.leaders[moved] = 2
    cluster.runtime.on_elected(moved, 2)
    cluster.leaders[moved] = BROKER_ID  # leads it again, still loading
    loading = cluster.runtime._slots[moved]
    loading.load_task.cancel()
    response = await cluster.call(list_groups, 5)
    assert response.error_code == ErrorCode.coordinator_load_in_progress
    assert response.groups == ()


@run
async def test_list_groups_without_the_offsets_topic_lists_nothing(cluster):
    cluster.broker.metadata = SimpleNamespace(topic=lambda name: None)
    response = await cluster.call(list_groups, 3)
    assert (response.error_code, response.groups) == (ErrorCode.none, ())


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
@run
async def test_describe_groups(cluster, version):
    response = await cluster.call(
        describe_groups,
        version,
        groups=("stable", "simple", "nobody", ""),
        include_authorized_operations=False,
    )
    stable, simple, nobody, empty = response.groups
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
        ErrorCode.none,
        "Stable",
        "consumer",
        "range",
    )
    member = stable.members[0]
    assert (member.member_id, member.client_id, member.client_host) == (
        "m1",
        "client-m1",
        "/127.0.0.1",
    )
    assert (member.member_metadata, member.member_assignment) == (b"meta", b"assignment")
    if version >= 4:
        assert member.group_instance_id is None
    assert (simple.error_code, simple.group_state, simple.protocol_type) == (
        ErrorCode.none,
        "Empty",
        "",
    )
    assert (nobody.error_code, nobody.group_state) == (ErrorCode.none, "Dead")
    assert (empty.error_code, empty.group_state) == (ErrorCode.none, "Dead")  # as Kafka


@run
async def test_describe_a_group_not_coordinated_here(cluster):
    cluster.runtime.on_resigned(cluster.coordinator.partition_for("stable"))
    response = await cluster.call(
        describe_groups, 5, groups=("stable",), include_authorized_operations=False
    )
    assert response.groups[0].error_code == ErrorCode.not_coordinator


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_GROUPS))
@run
async def test_delete_groups(cluster, version):
    response = await cluster.call(
        delete_groups, version, groups_names=("idle", "simple", "stable", "nobody", "", "idle")
    )
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("idle", ErrorCode.none),
        ("simple", ErrorCode.none),
        ("stable", ErrorCode.non_empty_group),
        ("nobody", ErrorCode.group_id_not_found),
        ("", ErrorCode.group_id_not_found),
    ]
    listed = await cluster.call(list_groups, 5)
    assert [g.group_id for g in listed.groups] == ["kip848", "stable"]


@run
async def test_delete_groups_not_coordinated_here(cluster):
    cluster.runtime.on_resigned(cluster.coordinator.partition_for("idle"))
    response = await cluster.call(delete_groups, 2, groups_names=("idle",))
    assert response.results[0].error_code == ErrorCode.not_coordinator


# -- authorization (Kafka's KafkaApis): DESCRIBE, DELETE on groups; DESCRIBE on the cluster


@run
async def test_list_groups_without_describe_on_the_cluster_lists_only_describable_groups(cluster):
    authorizer = MemoryAuthorizer().allow(AclOperation.DESCRIBE, ResourceType.GROUP, "idle")
    response = await cluster.call(list_groups, 5, authorizer)
    assert response.error_code == ErrorCode.none
    assert [g.group_id for g in response.groups] == ["idle"]
    authorizer.allow(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    response = await cluster.call(list_groups, 5, authorizer)
    assert len(response.groups) == 4


@run
async def test_describe_groups_refuses_groups_not_describable_and_gives_operations(cluster):
    authorizer = (
        MemoryAuthorizer()
        .allow(AclOperation.DESCRIBE, ResourceType.GROUP, "stable")
        .allow(AclOperation.READ, ResourceType.GROUP, "stable")
    )
    response = await cluster.call(
        describe_groups,
        5,
        authorizer,
        groups=("stable", "idle"),
        include_authorized_operations=True,
    )
    stable, idle = response.groups
    assert stable.error_code == ErrorCode.none and stable.group_state == "Stable"
    assert stable.authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE
    assert idle.error_code == ErrorCode.group_authorization_failed
    assert idle.group_state == "" and idle.members == ()
    assert idle.authorized_operations == -2147483648
    plain = await cluster.call(
        describe_groups, 5, authorizer, groups=("stable",), include_authorized_operations=False
    )
    assert plain.groups[0].authorized_operations == -2147483648


@run
async def test_delete_groups_needs_delete_on_each_group(cluster):
    authorizer = MemoryAuthorizer().allow(AclOperation.DELETE, ResourceType.GROUP, "idle")
    response = await cluster.call(delete_groups, 2, authorizer, groups_names=("idle", "simple"))
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("idle", ErrorCode.none),
        ("simple", ErrorCode.group_authorization_failed),
    ]
    listed = await cluster.call(list_groups, 5)
    assert "simple" in [g.group_id for g in listed.groups]
