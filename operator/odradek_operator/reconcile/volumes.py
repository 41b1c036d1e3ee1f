"""JBOD volumes of the brokers: adding one, refusing to remove one that still holds partitions.

A StatefulSet's volumeClaimTemplates cannot change, so when the desired templates differ from the
live StatefulSet's, the StatefulSet is deleted with propagationPolicy Orphan (its pods keep
running and serving) and created anew by the next apply; the new template's config hash differs
(it covers the volumes), so restarts.py then rolls the pods onto the new layout one at a time.
A volume is removed only when no broker keeps a partition in it (DescribeLogDirs): otherwise the
change is refused (``VolumeStillInUse``) until the partitions are moved off it with
AlterReplicaLogDirs (docs/operations/disks.md). A PVC is never deleted here.
"""

from __future__ import annotations

import re

from odradek_operator.kube import Kube
from odradek_operator.reconcile.admin import ClusterAdmin
from odradek_operator.reconcile.status import Refused

__all__ = ["claim_names", "reconcile_volumes", "volume_of_dir"]

# The volume's directory: ``.../data-N`` (its mount path), or a directory named after the claim
# (``data-N-<statefulset>-<ordinal>...``, where a host path stands for the mount), then ``log``.
_DIR = re.compile(r"(?:^|/)data-(\d+)(?:-[^/]*)?(?:/log)?/?$")


def claim_names(sts: dict) -> list[str]:
    return sorted(
        t["metadata"]["name"] for t in sts.get("spec", {}).get("volumeClaimTemplates") or []
    )


def volume_of_dir(log_dir: str) -> str | None:
    """``/var/lib/odradek/data-1/log`` -> ``data-1`` (the claim template's name)."""
    match = _DIR.search(log_dir)
    return f"data-{match.group(1)}" if match else None


async def reconcile_volumes(
    kube: Kube, admin: ClusterAdmin | None, live: dict | None, desired: dict
) -> str | None:
    """Make the live brokers StatefulSet's claim templates the desired ones; what it did
    ("Recreating" while the orphaning delete runs), or None when nothing needs doing."""
    if live is None:
        return None
    have, want = set(claim_names(live)), set(claim_names(desired))
    if have == want:
        return None
    removed = sorted(have - want)
    if removed:
        if admin is None:
            raise Refused("VolumeStillInUse", f"cannot check volumes {removed}: no broker answers")
        replicas = int(live.get("spec", {}).get("replicas", 0))
        usage = await admin.log_dir_partitions(range(replicas))
        holding = sorted(
            (broker, volume_of_dir(d), n)
            for broker, dirs in usage.items()
            for d, n in dirs.items()
            if n and volume_of_dir(d) in removed
        )
        if holding or len(usage) < replicas:
            detail = ", ".join(f"broker {b} has {n} partition(s) on {v}" for b, v, n in holding)
            raise Refused(
                "VolumeStillInUse",
                f"volume(s) {removed} cannot be removed yet: "
                + (detail or "not every broker answered DescribeLogDirs")
                + "; move the partitions off with AlterReplicaLogDirs first",
            )
    meta = live["metadata"]
    await kube.delete("StatefulSet", meta["name"], meta.get("namespace"), propagation="Orphan")
    return "Recreating"
