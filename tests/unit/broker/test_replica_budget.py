"""The replica budget: its math, its registration, the capacity check and a manager over budget."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from odradek.broker.admin.errors import PolicyViolationError
from odradek.broker.admin.replica_capacity import REQUEST_PARTITIONS_MAX, ReplicaCapacity
from odradek.broker.replica_budget import FILES_PER_REPLICA, replica_budget
from odradek.errors import KafkaStorageError
from odradek.storage import index as index_module
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.files import LEADER_EPOCH_CHECKPOINT
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin
from odradek.zk.paths import BrokerInfo, Endpoint

T0 = 1_700_000_000_000


def test_budget_is_the_unreserved_files_over_the_files_per_replica() -> None:
    assert FILES_PER_REPLICA == 1  # the active segment's .log (counted below)
    assert replica_budget(20_000) == 20_000 - 5_000  # a quarter reserved by default
    assert replica_budget(1_000, reserved=100) == 900
    assert replica_budget(1_000, reserved=100, max_broker_partitions=50) == 50
    assert replica_budget(10, reserved=100) == 0


def test_10000_replicas_a_broker_fit_a_hard_limit_of_20000_files() -> None:
    """Issue 26: 10,000 partitions at RF 3 on 3 brokers with 20,000 files each fit; 20,000
    partitions do not, and are refused before anything is written."""
    budget = replica_budget(20_000)
    capacity = ReplicaCapacity({1: budget, 2: budget, 3: budget}, {})
    assignment = {p: (1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3) for p in range(10_000)}
    capacity.check("big", assignment)
    full = ReplicaCapacity({1: budget, 2: budget, 3: budget}, {1: 10_000, 2: 10_000, 3: 10_000})
    with pytest.raises(PolicyViolationError, match="needs 30000 replicas.*only 15000 more"):
        full.check("bigger", assignment)


def _open_files(directory: Path) -> Counter[str]:
    """This process's descriptors on ``directory`` or anything below it, by suffix (the
    directories themselves count as ``"dir"``)."""
    found: Counter[str] = Counter()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if target == directory or directory in target.parents:
                found[target.suffix if target.is_file() else "dir"] += 1
    return found


def _use_every_file(log: Log) -> None:
    """Index entries, leader epochs, an aborted transaction, a flush: every file a replica has."""
    for n in range(4):  # 16 KiB batches: an index entry each (index.interval.bytes 4096)
        log.append(encode_batch([Record(0, T0 + n, b"k", b"v" * 16_384)], base_offset=0))
    log.assign_epoch_start_offset(3, log.log_end_offset)
    transactional = encode_batch(
        [Record(0, T0, b"k", b"t")],
        base_offset=0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_validated(log.validate(transactional, origin=AppendOrigin.COORDINATOR))
    abort = encode_marker(
        ControlType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=1, timestamp_ms=T0
    )
    log.append_as_coordinator(abort, leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    log.write_leader_epoch_checkpoint()


def test_a_loaded_replica_holds_files_per_replica_descriptors(tmp_path: Path, monkeypatch):
    """The figure the budget divides by, counted in /proc/self/fd: once loaded, a replica
    holds its active .log; while written, its indexes use the shared pool, bounded apart."""
    pool = index_module._WriteDescriptors(capacity=4)
    monkeypatch.setattr(index_module, "_WRITE_DESCRIPTORS", pool)
    replicas = 10
    manager = LogManager([tmp_path])
    manager.load()
    for p in range(replicas):
        _use_every_file(manager.get_or_create_log("t", p))
    assert all((tmp_path / f"t-{p}" / LEADER_EPOCH_CHECKPOINT).exists() for p in range(replicas))
    assert all(any((tmp_path / f"t-{p}").glob("*.txnindex")) for p in range(replicas))
    opened = _open_files(tmp_path)
    assert opened.pop(".log") == replicas * FILES_PER_REPLICA
    assert set(opened) <= {".index", ".timeindex"} and opened.total() <= pool.capacity
    manager.shutdown()
    assert _open_files(tmp_path) == Counter()

    reloaded = LogManager([tmp_path])
    reloaded.load()
    try:
        assert len(reloaded.logs()) == replicas
        assert _open_files(tmp_path) == Counter({".log": replicas * FILES_PER_REPLICA})
    finally:
        reloaded.shutdown()


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
