"""``pid_alive``: a zombie counts as gone, also one that is not our child (its parent, not us,
must reap it), so ``odradek local down`` does not report a stopped member as still running."""

from __future__ import annotations

import subprocess

from odradek.local.cluster import pid_alive
from support.waiting import wait_until


def test_a_zombie_that_is_not_our_child_counts_as_gone():
    # ``sleep 0.1`` becomes the child of ``sleep 3`` (exec'd by sh), which never reaps it.
    parent = subprocess.Popen(
        ["sh", "-c", "sleep 0.1 & echo $!; exec sleep 3"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        wait_until(lambda: not pid_alive(grandchild), "the grandchild gone", 2.0, poll_s=0.02)
        assert pid_alive(parent.pid)
    finally:
        parent.kill()
        parent.wait()
    assert not pid_alive(parent.pid)
