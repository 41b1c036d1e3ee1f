"""Client quotas (broker.quotas): Kafka's precedence of entities and sensor tags, its Rate with
padded windows, the throttle arithmetic and its bound, on a fake clock."""

from __future__ import annotations

import asyncio
import math

import pytest

from odradek.broker.admin.client_quotas import Op, _apply, describe, entity_of, entity_parts
from odradek.broker.admin.errors import AdminRequestError
from odradek.broker.quotas import (
    DEFAULT_ENTITY,
    NANOS_TO_PERCENTAGE,
    ClientQuotas,
    FetchQuota,
    QuotaEntity,
    QuotaRate,
    QuotaType,
    TimedHandler,
    sanitize,
)
from odradek.common.clock import ManualClock
from odradek.zk.errors import NoNodeError
from odradek.zk.paths import EntityConfig

D = DEFAULT_ENTITY
P = "producer_byte_rate"


def quotas(
    entities: dict[QuotaEntity, dict[str, str]], **kwargs
) -> tuple[ClientQuotas, ManualClock]:
    clock = ManualClock(now_ms=1_000_000.0)
    q = ClientQuotas(clock_ms=clock, **kwargs)
    for entity, config in entities.items():
        q.set_entity(entity, config)
    return q, clock


# Kafka's eight levels, most specific first (ClientQuotaManager's docs).
LEVELS = [
    (QuotaEntity("alice", "app"), ("alice", "app")),
    (QuotaEntity("alice", D), ("alice", "app")),
    (QuotaEntity("alice", None), ("alice", "")),
    (QuotaEntity(D, "app"), ("alice", "app")),
    (QuotaEntity(D, D), ("alice", "app")),
    (QuotaEntity(D, None), ("alice", "")),
    (QuotaEntity(None, "app"), ("", "app")),
    (QuotaEntity(None, D), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_entity_that_sets_the_key_wins(level):
    # Every level from ``level`` on sets a quota; the first of them must win.
    entities = {entity: {P: str(1000 + i)} for i, (entity, _) in enumerate(LEVELS) if i >= level}
    q, _ = quotas(entities)
    bound, tags = q.quota(QuotaType.PRODUCE, "alice", "app")
    assert bound == 1000 + level
    assert tags == LEVELS[level][1]


def test_each_quota_type_is_looked_up_on_its_own():
    q, _ = quotas(
        {
            QuotaEntity("alice", None): {P: "100"},
            QuotaEntity(None, D): {"consumer_byte_rate": "200"},
        }
    )
    assert q.quota(QuotaType.PRODUCE, "alice", "x") == (100, ("alice", ""))
    assert q.quota(QuotaType.FETCH, "alice", "x") == (200, ("", "x"))
    assert q.quota(QuotaType.PRODUCE, "bob", "x") is None


def test_users_are_matched_by_their_sanitized_name_and_other_keys_are_ignored():
    q, _ = quotas({QuotaEntity(sanitize("CN=a b,O=*"), None): {P: "5", "SCRAM-SHA-256": "x"}})
    assert sanitize("CN=a b,O=*") == "CN%3Da%20b%2CO%3D%2A"
    assert q.quota(QuotaType.PRODUCE, "CN=a b,O=*", "")[0] == 5
    q.set_entity(QuotaEntity(sanitize("CN=a b,O=*"), None), {"SCRAM-SHA-256": "x"})
    assert not q.enabled


def test_client_ids_are_matched_by_their_sanitized_name():
    seen = []

    class Metrics:
        def observe(self, quota, user, client_id, value, throttle_ms):
            seen.append((user, client_id))

    q, _ = quotas({QuotaEntity(None, sanitize("rdkafka#producer-1")): {P: "5"}}, metrics=Metrics())
    assert q.quota(QuotaType.PRODUCE, "ANONYMOUS", "rdkafka#producer-1")[0] == 5
    q.record(QuotaType.PRODUCE, "ANONYMOUS", "rdkafka#producer-1", 1)
    assert seen == [("", "rdkafka#producer-1")]  # labels read as the client sent them


def test_rate_pads_to_window_num_minus_one_windows():
    rate = QuotaRate(11, 1000)
    rate.record(1000, 0)
    assert rate.window_ms(0) == 10_000  # 10 whole windows of padding
    assert rate.measure(0) == pytest.approx(100)
    assert rate.window_ms(10_500) == 10_500  # no padding once 10 windows have passed
    assert rate.measure(22_000) == 0  # every sample expired


def test_throttle_is_kafkas_time_to_fall_back_under_the_bound():
    q, clock = quotas({QuotaEntity(None, D): {P: "100"}})
    assert q.record(QuotaType.PRODUCE, "u", "c", 1000).throttle_ms == 0  # 100/s: at the bound
    t = q.record(QuotaType.PRODUCE, "u", "c", 500)
    # rate 150/s over a 10 s window: (150 - 100) / 100 * 10 s
    assert t.throttle_ms == 5000
    assert t.tags == ("", "c")
    clock.now_ms += 5000
    # 1500 bytes over 10 s padded... now 5 s elapsed: still padded to 10 s, 150/s
    assert q.record(QuotaType.PRODUCE, "u", "c", 0).throttle_ms == 5000
    clock.now_ms += 10_000
    assert q.record(QuotaType.PRODUCE, "u", "c", 100).throttle_ms == 0


def test_a_throttle_never_exceeds_the_windows_together():
    q, _ = quotas({QuotaEntity(None, D): {P: "1"}}, window_num=3, window_size_s=1)
    assert q.max_throttle_ms == 3000
    assert q.record(QuotaType.PRODUCE, "u", "c", 10**9).throttle_ms == 3000


def test_a_user_quota_is_shared_by_its_clients_a_default_client_quota_is_not():
    q, _ = quotas({QuotaEntity("alice", None): {P: "100"}, QuotaEntity(None, D): {P: "100"}})
    assert q.record(QuotaType.PRODUCE, "alice", "a", 1000).throttle_ms == 0
    assert q.record(QuotaType.PRODUCE, "alice", "b", 500).throttle_ms > 0  # same sensor
    assert q.record(QuotaType.PRODUCE, "bob", "a", 1000).throttle_ms == 0
    assert q.record(QuotaType.PRODUCE, "bob", "b", 1000).throttle_ms == 0  # its own sensor


def test_a_throttled_fetch_takes_its_bytes_back_and_followers_are_exempt():
    class Result:
        records = object()

        def __init__(self, size: int) -> None:
            self.size = size

    q, _ = quotas({QuotaEntity(None, D): {"consumer_byte_rate": "100"}})
    fetch = FetchQuota.of(q, "u", "c")
    assert fetch.max_bytes(1 << 20, replica_id=-1) == 1000  # 100/s x 10 windows
    assert fetch.max_bytes(1 << 20, replica_id=2) == 1 << 20
    assert fetch.record([Result(1000)], -1) == 0
    assert fetch.record([Result(500)], -1) == 5000
    assert fetch.record([Result(0)], -1) == 0  # the 500 were taken back
    assert fetch.record([Result(10**6)], 2) == 0
    assert FetchQuota.of(ClientQuotas(), "u", "c").max_bytes(7, -1) == 7
    assert math.isinf(q.max_value_in_window(QuotaType.PRODUCE, "u", "c"))


def test_metric_labels_are_bounded(monkeypatch):
    seen = []

    class Metrics:
        def observe(self, quota, user, client_id, value, throttle_ms):
            seen.append((user, client_id))

    monkeypatch.setattr("odradek.broker.quotas.METRIC_ENTITIES_MAX", 2)
    q, _ = quotas({QuotaEntity(None, D): {P: "100"}}, metrics=Metrics())
    for client in ("a", "b", "c", "a"):
        q.record(QuotaType.PRODUCE, "u", client, 1)
    assert seen == [("", "a"), ("", "b"), ("<other>", "<other>"), ("", "a")]


def test_alter_validation_has_kafkas_words():
    with pytest.raises(AdminRequestError, match="Invalid empty client quota entity"):
        entity_of([])
    with pytest.raises(AdminRequestError, match="Empty user not supported"):
        entity_of([("user", "")])
    with pytest.raises(AdminRequestError, match="Unhandled client quota entity type: x"):
        entity_of([("x", "a")])
    assert entity_of([("user", "a b"), ("client-id", None)]) == QuotaEntity("a%20b", D)
    config = {"SCRAM-SHA-256": "kept"}
    with pytest.raises(AdminRequestError, match="Invalid configuration key nope"):
        _apply(config, [Op("nope", 1, False)])
    with pytest.raises(AdminRequestError, match="Configuration producer_byte_rate must be a LONG"):
        _apply(config, [Op(P, 1.5, False)])
    _apply(
        config,
        [
            Op(P, 1024.0, False),
            Op("request_percentage", 12.5, False),
            Op("controller_mutation_rate", 0.5, False),  # a DOUBLE
        ],
    )
    assert config == {
        "SCRAM-SHA-256": "kept",
        P: "1024",
        "request_percentage": "12.5",
        "controller_mutation_rate": "0.5",
    }
    _apply(
        config,
        [
            Op(P, 0, True),
            Op("request_percentage", 0, True),
            Op("controller_mutation_rate", 0, True),
        ],
    )
    assert config == {"SCRAM-SHA-256": "kept"}


def test_entity_paths_round_trip():
    for entity, _ in LEVELS:
        assert QuotaEntity.from_path(entity.path) == entity
    assert QuotaEntity("alice", "app").path == "users/alice/clients/app"
    with pytest.raises(ValueError):
        QuotaEntity.from_path("users/alice/x/app")


def test_request_percentage_is_handler_time_and_its_throttle_is_one_window():
    q, _ = quotas({QuotaEntity(None, D): {"request_percentage": "10"}})
    # 10 % of one loop over a 10 s window is 1 s of handler time; 3 s is well over it.
    t = q.record(QuotaType.REQUEST, "u", "c", 3e9 * NANOS_TO_PERCENTAGE)
    assert t.throttle_ms == 1000  # (30 - 10) / 10 x 10 s, cut to one window as Kafka's


def test_timed_handler_counts_its_steps_not_its_waits():
    ticks = iter(range(0, 10_000, 10))  # each clock read: 10 ns later

    async def handler() -> str:
        await asyncio.sleep(0.05)  # a wait: not counted beyond the reads around it
        await asyncio.sleep(0)
        return "done"

    async def main() -> tuple[str, int]:
        timed = TimedHandler(handler(), clock_ns=lambda: next(ticks))
        return await timed, timed.elapsed_ns

    result, elapsed_ns = asyncio.run(main())
    assert result == "done"
    assert elapsed_ns == 30  # three steps, each timed by two reads 10 ns apart

    async def failing() -> None:
        await asyncio.sleep(0)
        raise KeyError("x")

    async def main_failing() -> None:
        await TimedHandler(failing())

    with pytest.raises(KeyError):
        asyncio.run(main_failing())


def test_timed_handler_passes_cancellation_in():
    seen = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def timed() -> None:
        await TimedHandler(handler())

    async def main() -> None:
        task = asyncio.ensure_future(timed())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["cancelled"]


class FakeZk:
    """The two reads ``client_quotas.read_all`` makes, over a dict of path -> config."""

    def __init__(self, nodes: dict[str, dict[str, str]]) -> None:
        self.nodes = nodes

    async def achildren(self, path: str) -> list[str]:
        depth = path.count("/") + 1
        kids = {p.split("/")[depth] for p in self.nodes if p.startswith(path + "/")}
        if not kids:
            raise NoNodeError(path)
        return sorted(kids)

    async def aget(self, path: str):
        if path not in self.nodes:
            raise NoNodeError(path)
        return EntityConfig(self.nodes[path]).encode(), type("Stat", (), {"version": 0})()


NODES = {
    "/config/users/alice": {P: "1", "SCRAM-SHA-256": "secret"},
    "/config/users/alice/clients/app": {P: "2"},
    "/config/users/%3Cdefault%3E": {P: "9"},  # a user literally named <default>
    "/config/users/<default>": {P: "3"},
    "/config/users/bob": {"SCRAM-SHA-256": "secret"},  # credentials only: not listed
    "/config/clients/app": {P: "4"},
    "/config/clients/<default>": {P: "5"},
}


@pytest.mark.parametrize(
    ("components", "strict", "expected"),
    [
        ([], False, {"u=alice", "u=alice,c=app", "u=<default>", "u=*", "c=app", "c=*"}),
        ([], True, set()),
        ([("user", 0, "alice")], False, {"u=alice", "u=alice,c=app"}),
        ([("user", 0, "alice")], True, {"u=alice"}),
        ([("user", 0, "<default>")], True, {"u=<default>"}),  # the user of that name
        ([("user", 1, None)], True, {"u=*"}),
        ([("user", 2, None)], True, {"u=alice", "u=<default>", "u=*"}),
        ([("client-id", 0, "app")], False, {"u=alice,c=app", "c=app"}),
        ([("user", 0, "alice"), ("client-id", 2, None)], True, {"u=alice,c=app"}),
    ],
)
def test_describe_filters_as_kafka(components, strict, expected):
    found = asyncio.run(describe(FakeZk(NODES), components, strict))

    def show(entity: QuotaEntity) -> str:
        parts = []
        for kind, name in entity_parts(entity):
            parts.append(f"{kind[0]}={'*' if name is None else name}")
        return ",".join(parts)

    assert {show(e) for e, _ in found} == expected  # "*": the <default> entity
    assert all("SCRAM-SHA-256" not in quotas for _, quotas in found)
    with pytest.raises(AdminRequestError, match="Duplicate user filter component"):
        asyncio.run(describe(FakeZk(NODES), [("user", 2, None), ("user", 2, None)], False))
