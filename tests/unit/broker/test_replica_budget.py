"""The replica budget: its math, its registration, the capacity check and a manager over budget."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odradek.broker.admin.errors import PolicyViolationError
from odradek.broker.admin.replica_capacity import REQUEST_PARTITIONS_MAX, ReplicaCapacity
from odradek.broker.replica_budget import FILES_PER_REPLICA, replica_budget
from odradek.errors import KafkaStorageError
from odradek.storage.manager import LogManager
from odradek.zk.paths import BrokerInfo, Endpoint


def test_budget_is_the_unreserved_files_over_the_files_per_replica() -> None:
    assert FILES_PER_REPLICA == 5
    assert replica_budget(20_000) == (20_000 - 5_000) // 5  # a quarter reserved by default
    assert replica_budget(1_000, reserved=100) == 180
    assert replica_budget(1_000, reserved=100, max_broker_partitions=50) == 50
    assert replica_budget(10, reserved=100) == 0


def test_scenario_4_does_not_fit_a_default_limit() -> None:
    """10,000 partitions at RF 3 on 3 brokers with 20,000 files each: refused, not written."""
    budget = replica_budget(20_000)
    capacity = ReplicaCapacity({1: budget, 2: budget, 3: budget}, {})
    assignment = {p: (1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3) for p in range(10_000)}
    with pytest.raises(PolicyViolationError, match="needs 30000 replicas.*only 9000 more"):
        capacity.check("big", assignment)


def test_capacity_checks_the_sum_then_each_broker_and_counts_earlier_topics() -> None:
    capacity = ReplicaCapacity({1: 4, 2: 4}, {1: 2, 3: 7})  # broker 3 is not live
    assert capacity.remaining(1) == 2 and capacity.remaining(2) == 4
    capacity.check("fits", {0: (1, 2), 1: (2, 1)})
    with pytest.raises(PolicyViolationError, match="broker 1, which can host only 2 more"):
        capacity.check("lopsided", {0: (1,), 1: (1,), 2: (1,)})
    capacity.add({0: (1, 2), 1: (2, 1)})
    with pytest.raises(PolicyViolationError, match="needs 3 replicas.*only 2 more"):
        capacity.check("second", {0: (2,), 1: (2,), 2: (1,)})


def test_a_broker_without_a_budget_is_unbounded() -> None:
    capacity = ReplicaCapacity({1: None, 2: 1}, {})
    capacity.check("t", {p: (1,) for p in range(1000)})
    with pytest.raises(PolicyViolationError, match="broker 2"):
        capacity.check("t", {0: (2,), 1: (2,)})


def test_registration_carries_the_budget_and_old_ones_decode_without() -> None:
    info = BrokerInfo((Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),), None)
    with_budget = BrokerInfo(info.endpoints, max_broker_partitions=3750)
    assert BrokerInfo.decode(with_budget.encode()).max_broker_partitions == 3750
    assert BrokerInfo.decode(info.encode()).max_broker_partitions is None


def test_manager_loads_up_to_its_budget_and_refuses_more(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.load()
    for p in range(5):
        manager.get_or_create_log("t", p)
    manager.shutdown()
    over = LogManager([tmp_path], max_logs=3)
    over.load()
    try:
        assert len(over.logs()) == 3 and len(over.unloaded) == 2
        assert over.offline_dirs == {}
        with pytest.raises(KafkaStorageError, match="budget"):
            over.get_or_create_log("u", 0)
        assert over.offline_dirs == {}
    finally:
        over.shutdown()


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    code = (
        "import resource;"
        "from odradek.broker.replica_budget import raise_open_files_limit as r;"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 256));"
        "l = r(); assert (l.soft_before, l.soft, l.hard) == (64, 256, 256), l;"
        "l = r(128); assert (l.soft, l.hard) == (128, 128), l;"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(128, 128)"


def test_one_request_adds_at_most_kafkas_10000_partitions() -> None:
    capacity = ReplicaCapacity({1: None}, {})
    half = {p: (1,) for p in range(REQUEST_PARTITIONS_MAX // 2)}
    capacity.check("a", half)
    capacity.add(half)
    capacity.check("b", half)
    capacity.add(half)
    with pytest.raises(PolicyViolationError, match="Excessively large number of partitions"):
        capacity.check("c", {0: (1,)})
