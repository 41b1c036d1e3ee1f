"""JBOD: a new volume recreates the brokers' StatefulSet orphaning its pods; removing a volume
that still holds partitions is refused."""

from __future__ import annotations

import asyncio

import pytest

from odradek_operator.reconcile.status import Refused
from odradek_operator.reconcile.volumes import reconcile_volumes, volume_of_dir
from support.operator_doubles import FakeAdmin, FakeKube, statefulset, view


def test_log_dir_to_volume():
    assert volume_of_dir("/var/lib/odradek/data-1/log") == "data-1"
    assert volume_of_dir("/tmp/pods/demo-broker-0/data-12/log/") == "data-12"
    assert volume_of_dir("/pvcs/ns/data-1-demo-broker-0-1a2b/log") == "data-1"
    assert volume_of_dir("/elsewhere") is None
    assert volume_of_dir("/x/metadata-1/log") is None


def test_same_volumes_nothing_to_do():
    kube = FakeKube()
    live = kube.put(statefulset("demo-broker", 3))
    assert asyncio.run(reconcile_volumes(kube, None, live, statefulset("demo-broker", 3))) is None
    assert kube.actions == []


def test_added_volume_deletes_the_statefulset_orphaning_pods():
    kube = FakeKube()
    live = kube.put(statefulset("demo-broker", 3))
    wanted = statefulset("demo-broker", 3, volumes=("data-0", "data-1"))
    assert asyncio.run(reconcile_volumes(kube, None, live, wanted)) == "Recreating"
    assert kube.actions == [("delete", "StatefulSet", "demo-broker", "Orphan")]


def test_removing_a_volume_in_use_is_refused():
    kube = FakeKube()
    live = kube.put(statefulset("demo-broker", 2, volumes=("data-0", "data-1")))
    admin = FakeAdmin(view({}, range(2)))
    admin.log_dirs = {0: {"/x/data-0/log": 3, "/x/data-1/log": 2}, 1: {"/x/data-0/log": 5}}
    with pytest.raises(Refused) as refused:
        asyncio.run(reconcile_volumes(kube, admin, live, statefulset("demo-broker", 2)))
    assert refused.value.reason == "VolumeStillInUse"
    assert "broker 0 has 2 partition(s) on data-1" in str(refused.value)
    assert kube.actions == []
    admin.log_dirs[0]["/x/data-1/log"] = 0
    assert asyncio.run(reconcile_volumes(kube, admin, live, statefulset("demo-broker", 2)))
