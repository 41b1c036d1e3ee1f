"""A replica missing while a log dir is offline is re-created on a healthy dir only when the
controller's state leaves it out of the ISR; in the ISR (or leading) it is refused with
KAFKA_STORAGE_ERROR, since its data may be on the offline dir."""

from __future__ import annotations

from odradek.broker.controller_requests import become_leader_or_follower
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import ErrorCode
from odradek.storage.manager import LogManager


def test_only_a_replica_out_of_the_isr_is_recreated_while_a_dir_is_offline(tmp_path):
    failed = tmp_path / "disk-0"
    failed.write_text("this disk is gone\n")
    manager = LogManager([failed, tmp_path / "disk-1"])
    manager.load()
    try:
        assert list(manager.offline_dirs) == [failed.absolute()]
        replicas = ReplicaManager(1, manager)
        in_isr = PartitionState(leader=2, leader_epoch=3, isr=(2, 1), replicas=(1, 2))
        leading = PartitionState(leader=1, leader_epoch=3, isr=(1,), replicas=(1, 2))
        out_of_isr = PartitionState(leader=2, leader_epoch=4, isr=(2,), replicas=(1, 2))

        assert (
            become_leader_or_follower(replicas, "orders", 0, in_isr, is_new=False)
            is ErrorCode.kafka_storage_error
        )
        assert (
            become_leader_or_follower(replicas, "orders", 1, leading, is_new=False)
            is ErrorCode.kafka_storage_error
        )
        assert ("orders", 0) not in replicas.partitions

        assert (
            become_leader_or_follower(replicas, "orders", 0, out_of_isr, is_new=False)
            is ErrorCode.none
        )
        assert manager.log_dir_of("orders", 0) == (tmp_path / "disk-1").absolute()
        assert manager.get_log("orders", 0).log_end_offset == 0
    finally:
        manager.shutdown()
