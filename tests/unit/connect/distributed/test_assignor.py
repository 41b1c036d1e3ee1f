"""The incremental cooperative assignor: after at most two rounds every configured connector and
task runs on exactly one live member, balanced within one, with no more moves than balance
needs; a departed member's work is held for the scheduled delay and reassigned once it expires."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.connect.distributed.assignor import IncrementalCooperativeAssignor, balance
from odradek.connect.distributed.protocol import CONFIG_MISMATCH, NO_ERROR, MemberMetadata
from odradek.connect.herder import ConnectorTaskId

T = ConnectorTaskId


class Group:
    """Members that apply their assignments, as workers do, and a leader that assigns."""

    def __init__(self, delay_ms: int = 0, members: tuple[str, ...] = ()):
        self.assignor = IncrementalCooperativeAssignor(delay_ms)
        self.generation = 0
        self.running: dict[str, tuple[set[str], set[T]]] = {m: (set(), set()) for m in members}
        self.last = {}

    def round(self, connectors, tasks, now_ms: int = 0):
        self.generation += 1
        metadata = {
            m: MemberMetadata(f"http://{m}", 0, tuple(c), tuple(t))
            for m, (c, t) in self.running.items()
        }
        self.last = self.assignor.assign(
            leader=min(self.running),
            leader_url="http://leader",
            generation=self.generation,
            config_offset=0,
            members=metadata,
            connectors=connectors,
            tasks=tasks,
            now_ms=now_ms,
        )
        for member, a in self.last.items():
            c, t = self.running[member]
            assert not (set(a.revoked_connectors) - c) and not (set(a.revoked_tasks) - t)
            # Cooperative: nothing new starts on a member while another still runs it.
            others = {x for m, (oc, ot) in self.running.items() if m != member for x in oc | ot}
            for item in (set(a.connectors) - c) | (set(a.tasks) - t):
                assert item not in others
        for member, a in self.last.items():
            self.running[member] = (set(a.connectors), set(a.tasks))
        return self.last

    def owners(self):
        owners: dict = {}
        for member, (c, t) in self.running.items():
            for item in c | t:
                owners.setdefault(item, []).append(member)
        return owners


def tasks_of(name: str, n: int) -> list[T]:
    return [T(name, i) for i in range(n)]


def assert_balanced(group: Group, connectors, tasks):
    owners = group.owners()
    assert set(owners) == set(connectors) | set(tasks)
    assert all(len(o) == 1 for o in owners.values())
    for index in (0, 1):
        counts = [len(work[index]) for work in group.running.values()]
        assert max(counts) - min(counts) <= 1


def test_three_workers_share_one_connector_and_its_tasks():
    group = Group(members=("a", "b", "c"))
    connectors, tasks = ["conn"], tasks_of("conn", 6)
    first = group.round(connectors, tasks)
    assert all(a.error == NO_ERROR and a.delay_ms == 0 for a in first.values())
    assert [len(a.tasks) for a in first.values()] == [2, 2, 2]
    assert_balanced(group, connectors, tasks)
    again = group.round(connectors, tasks)  # a stable group: nothing moves, nothing revoked
    assert {m: (a.connectors, a.tasks) for m, a in again.items()} == {
        m: (a.connectors, a.tasks) for m, a in first.items()
    }
    assert not any(a.revoked_connectors or a.revoked_tasks for a in again.values())


def test_a_new_member_gets_work_revoked_from_the_others_in_the_next_round():
    group = Group(members=("a", "b"))
    connectors, tasks = ["x", "y"], tasks_of("x", 4) + tasks_of("y", 2)
    group.round(connectors, tasks)
    group.running["c"] = (set(), set())
    revoking = group.round(connectors, tasks)
    assert sum(len(a.revoked_tasks) for a in revoking.values()) == 2
    assert revoking["c"].tasks == ()  # revoked work is not handed over in the same round
    group.round(connectors, tasks)
    assert_balanced(group, connectors, tasks)
    assert len(group.running["c"][1]) == 2


def test_a_departed_members_work_is_held_for_the_delay_then_reassigned():
    group = Group(delay_ms=1000, members=("a", "b", "c"))
    connectors, tasks = ["conn"], tasks_of("conn", 6)
    group.round(connectors, tasks, now_ms=0)
    lost = group.running.pop("c")
    held = group.round(connectors, tasks, now_ms=100)
    assert {a.delay_ms for a in held.values()} == {1000}
    assert not (set().union(*(set(a.tasks) for a in held.values())) & lost[1])
    early = group.round(connectors, tasks, now_ms=600)  # a rejoin for another reason
    assert {a.delay_ms for a in early.values()} == {500}
    expired = group.round(connectors, tasks, now_ms=1100)
    assert {a.delay_ms for a in expired.values()} == {0}
    assert_balanced(group, connectors, tasks)
    assert [len(t) for _, t in group.running.values()] == [3, 3]


def test_a_member_back_within_the_delay_keeps_its_work():
    group = Group(delay_ms=1000, members=("a", "b", "c"))
    connectors, tasks = ["conn"], tasks_of("conn", 6)
    group.round(connectors, tasks, now_ms=0)
    c_work = group.running.pop("c")
    group.round(connectors, tasks, now_ms=10)
    group.running["c"] = c_work  # it reports its work again (a short partition)
    back = group.round(connectors, tasks, now_ms=20)
    assert back["c"].tasks == tuple(sorted(c_work[1])) and back["c"].delay_ms == 0
    assert_balanced(group, connectors, tasks)


def test_a_restarted_member_gets_the_held_work_when_the_delay_expires():
    group = Group(delay_ms=1000, members=("a", "b", "c"))
    connectors, tasks = ["conn"], tasks_of("conn", 6)
    group.round(connectors, tasks, now_ms=0)
    group.running.pop("c")
    group.round(connectors, tasks, now_ms=10)
    group.running["c2"] = (set(), set())  # the same worker, restarted: a new member, no work
    joined = group.round(connectors, tasks, now_ms=20)
    assert not any(a.revoked_tasks for a in joined.values())  # the held work is its share
    group.round(connectors, tasks, now_ms=1020)
    assert_balanced(group, connectors, tasks)
    assert len(group.running["c2"][1]) == 2


def test_deleted_work_is_revoked_and_zero_delay_reassigns_at_once():
    group = Group(members=("a", "b"))
    group.round(["x", "y"], tasks_of("x", 2) + tasks_of("y", 2))
    result = group.round(["x"], tasks_of("x", 2))
    revoked = set().union(*({*a.revoked_connectors, *a.revoked_tasks} for a in result.values()))
    assert revoked == {"y", T("y", 0), T("y", 1)}
    group.running.pop("b")
    group.round(["x"], tasks_of("x", 2))
    assert group.running["a"] == ({"x"}, set(tasks_of("x", 2)))


def test_duplicates_stay_with_one_member():
    assignor = IncrementalCooperativeAssignor(0)
    members = {
        "a": MemberMetadata("u", 0, ("x",), (T("x", 0),)),
        "b": MemberMetadata("u", 0, ("x",), (T("x", 0),)),
    }
    result = assignor.assign(
        leader="a", leader_url="u", generation=1, config_offset=0, members=members,
        connectors=["x"], tasks=[T("x", 0)], now_ms=0,
    )  # fmt: skip
    assert result["a"].connectors == ("x",) and result["a"].tasks == (T("x", 0),)
    assert result["b"].revoked_connectors == ("x",) and result["b"].revoked_tasks == (T("x", 0),)


def test_a_member_ahead_of_the_leaders_config_gets_config_mismatch():
    assignor = IncrementalCooperativeAssignor(0)
    members = {"a": MemberMetadata("u", 5), "b": MemberMetadata("u", 7)}
    result = assignor.assign(
        leader="a", leader_url="u", generation=1, config_offset=5, members=members,
        connectors=["x"], tasks=[], now_ms=0,
    )  # fmt: skip
    assert {a.error for a in result.values()} == {CONFIG_MISMATCH}
    assert all(a.connectors == () for a in result.values())


def test_balance_gives_the_ceiling_to_the_members_that_run_most():
    after, revoked = balance({"a": {1, 2, 3, 4}, "b": {5}, "c": set()}, [6])
    assert after == {"a": {1, 2}, "b": {5}, "c": {6}}
    assert revoked == {"a": {3, 4}, "b": set(), "c": set()}


def minimum_moves(counts: list[int], total: int) -> int:
    floor, ceiled = divmod(total, len(counts))
    ordered = sorted(counts, reverse=True)
    return sum(max(0, c - floor - (1 if i < ceiled else 0)) for i, c in enumerate(ordered))


@st.composite
def scenarios(draw):
    members = draw(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5, unique=True))
    spec = draw(st.dictionaries(st.sampled_from("pqrstu"), st.integers(0, 6), max_size=5))
    connectors = sorted(spec)
    tasks = [T(c, i) for c, n in spec.items() for i in range(n)]
    # What each member runs now: a random (possibly stale, duplicated) subset of everything.
    universe = connectors + tasks + ["gone", T("gone", 0)]
    running = {
        m: draw(st.lists(st.sampled_from(universe), max_size=8, unique=True)) for m in members
    }
    return members, connectors, tasks, running


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_every_item_on_exactly_one_member_balanced_after_two_rounds(scenario):
    members, connectors, tasks, running = scenario
    group = Group(members=tuple(members))
    for m, items in running.items():
        group.running[m] = (
            {i for i in items if isinstance(i, str)},
            {i for i in items if isinstance(i, T)},
        )
    before = {m: set(c) | set(t) for m, (c, t) in group.running.items()}
    group.round(connectors, tasks)
    group.round(connectors, tasks)
    assert_balanced(group, connectors, tasks)
    third = group.round(connectors, tasks)  # stable afterwards
    assert not any(a.revoked_connectors or a.revoked_tasks for a in third.values())

    # Nothing moved that need not move: per kind, the items that left a member they were
    # validly (configured, first owner) running on are exactly the minimum balance needs.
    for kind, configured in ((str, set(connectors)), (T, set(tasks))):
        kept: dict[str, set] = {}
        seen: set = set()
        for m in sorted(before):
            kept[m] = {i for i in before[m] if isinstance(i, kind) and i in configured} - seen
            seen |= kept[m]
        now = {m: (c if kind is str else t) for m, (c, t) in group.running.items()}
        moved = sum(len(kept[m] - now[m]) for m in kept)
        assert moved == minimum_moves([len(k) for k in kept.values()], len(configured))


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.integers(0, 4))
def test_a_dead_members_work_returns_after_the_delay(scenario, dead_index):
    members, connectors, tasks, _ = scenario
    if len(members) < 2:
        members = [*members, "z"]
    group = Group(delay_ms=50, members=tuple(members))
    group.round(connectors, tasks, now_ms=0)
    group.round(connectors, tasks, now_ms=1)
    dead = members[dead_index % len(members)]
    lost = group.running.pop(dead)
    held = group.round(connectors, tasks, now_ms=2)
    if lost[0] or lost[1]:
        assert {a.delay_ms for a in held.values()} == {50}
    group.round(connectors, tasks, now_ms=60)
    group.round(connectors, tasks, now_ms=61)
    assert_balanced(group, connectors, tasks)
