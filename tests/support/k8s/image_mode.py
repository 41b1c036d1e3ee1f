"""The kubelet stand-in's image mode: containers of the Odradek image run from the built image.

``KubeletStandIn(..., odradek_image="localhost/odradek:<version>")`` runs every container whose
image is an Odradek image (``odradek:*``, ``localhost/odradek:*``, ...) from that built image,
as a pod would on a real node, instead of from the venv's commands:

- one buildah working container per pod container (``buildah from``; named
  ``<prefix><namespace>-<pod>-<pod uid>-<container>``, ``prefix`` unique to the stand-in), kept
  across the container's restarts and removed (``buildah rm``) once the pod's processes are
  gone, or by ``KubeletStandIn.stop()``;
- the command runs with ``buildah run --isolation chroot --network host`` (support/buildah.py):
  the image's files and its ``USER`` (uid 10001), the host's network, so the pod binds its
  loopback address as a local process does; argv is the pod's command and args after ``$(VAR)``
  expansion only, env is the container's env on top of the image's;
- the pod's volumes are bind-mounted at their real ``mountPath`` (ConfigMaps, PVC and emptyDir
  directories; ``readOnly`` mounts read-only), so nothing is rewritten: the broker reads
  ``/etc/odradek/broker.properties`` and writes ``/var/lib/odradek/data-0/log`` inside the
  container. PVC and emptyDir directories are given to the image's user (its uid and gid, as
  the chart's ``fsGroup`` would);
- cluster DNS: the stand-in's DNS directory (``sitecustomize.py`` and the hosts tables, replaced
  atomically, so a directory mount sees every new table) is mounted read-only at ``DNS_MOUNT``
  and put on ``PYTHONPATH``, with ``ODRADEK_STANDIN_HOSTS`` naming the namespace's table there.

Signals reach the command by PID: ``buildah run``, its two helpers and the command share one
process group (the stand-in starts each container in a session of its own); SIGTERM, SIGSTOP
and SIGCONT go to the command's processes only (SIGTERM to ``buildah run`` can orphan the
command), SIGKILL to the command and then to the whole group.

Called from the stand-in's loop thread and from tests (``kill``); each call is on one container.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from ..buildah import RUN_TIMEOUT_S, Container, ContainerProcess, containers_named

__all__ = ["DNS_MOUNT", "ImageMode"]

DNS_MOUNT = "/odradek-standin/dns"
COMMAND_START_WAIT_S = 2.0  # buildah sets the container up in about 0.3 s
LEFTOVERS_WAIT_S = 5.0
POLL_S = 0.05
_ids = itertools.count(1)


def image_user(image: str) -> tuple[int, int]:
    """The numeric uid and gid of the image's ``USER`` (``uid:gid``, or ``uid`` alone)."""
    result = subprocess.run(
        ["buildah", "inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}}", image],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        timeout=RUN_TIMEOUT_S,
    )
    match = re.fullmatch(r"(\d+)(?::(\d+))?", result.stdout.strip())
    if match is None:
        raise ValueError(f"{image}: USER {result.stdout.strip()!r} is not numeric uid[:gid]")
    uid = int(match.group(1))
    return uid, int(match.group(2) or uid)


class ImageMode:
    """The built image ``image`` and the buildah containers made from it for one stand-in."""

    def __init__(self, image: str, dns_dir: Path) -> None:
        self.image = image
        self.dns_dir = dns_dir
        self.prefix = f"odradek-standin-{os.getpid()}-{next(_ids)}-"
        self.uid, self.gid = image_user(image)

    def create(self, namespace: str, pod: str, pod_uid: str, container: str) -> Container:
        """``buildah from`` the image: the pod container's working container."""
        return Container(self.image, f"{self.prefix}{namespace}-{pod}-{pod_uid[:8]}-{container}")

    def remove(self, container: Container) -> str | None:
        """``buildah rm``; an error message if it failed."""
        try:
            container.remove()
        except (subprocess.SubprocessError, OSError) as e:
            stderr = getattr(e, "stderr", b"") or b""
            return f"buildah rm {container.name}: {e} {stderr.decode(errors='replace')}"
        return None

    def containers(self) -> list[str]:
        """The names of this stand-in's buildah containers that exist (none after ``stop()``)."""
        return containers_named(self.prefix)

    def env(self, namespace: str) -> dict[str, str]:
        """What the stand-in adds to a container's env inside the image: the DNS hook."""
        return {
            "PYTHONPATH": DNS_MOUNT,
            "ODRADEK_STANDIN_HOSTS": f"{DNS_MOUNT}/hosts-{namespace}",
        }

    def dns_volume(self) -> tuple[Path, str]:
        return self.dns_dir, f"{DNS_MOUNT}:ro"

    def give_to_user(self, directory: Path) -> None:
        """A writable volume (PVC, emptyDir) owned by the image's user, as fsGroup would make it;
        world-writable if this process may not chown (not root)."""
        try:
            os.chown(directory, self.uid, self.gid)
        except PermissionError:
            directory.chmod(0o777)

    def signal(self, process: ContainerProcess, sig: int) -> None:
        """``sig`` to the command's processes (see the module's docstring); SIGKILL then to the
        whole process group. A SIGTERM sent while buildah is still setting up waits (a little)
        for the command to exist."""
        pids = process.command_pids()
        if not pids and sig == signal.SIGTERM and process.running():
            deadline = time.monotonic() + COMMAND_START_WAIT_S
            while not pids and process.running() and time.monotonic() < deadline:
                time.sleep(POLL_S)
                pids = process.command_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                if sig == signal.SIGTERM:
                    # a command paused by a fault test (SIGSTOP) would not see SIGTERM
                    os.kill(pid, signal.SIGCONT)
        if sig == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.session, signal.SIGKILL)

    def kill_leftovers(self, process: ContainerProcess) -> None:
        """SIGKILL whatever is left in the session of a ``buildah run`` that has exited, and
        wait (bounded) until it is gone."""
        deadline = time.monotonic() + LEFTOVERS_WAIT_S
        while (left := process.remaining()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(POLL_S)
