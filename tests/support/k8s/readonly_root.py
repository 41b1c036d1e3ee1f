"""A container's ``readOnlyRootFilesystem: true`` for a local process: run it in a mount
namespace of its own where every filesystem is read-only but its writable volumes.

``python readonly_root.py [--writable DIR]... -- ARGV...`` (what the kubelet stand-in runs in
front of such a container's command) unshares the mount namespace (``unshare(CLONE_NEWNS)``,
propagation private so nothing leaks back to the host), remounts every mount read-only except
the kernel's ``/proc``, ``/sys`` and ``/dev`` trees (a container runtime gives those separately:
``/dev/shm`` stays writable), bind-mounts each ``DIR`` (the host directories of the container's
emptyDir and PersistentVolumeClaim mounts, not marked ``readOnly``) onto itself read-write, then
``execvp``s ARGV: the same PID, so the stand-in's process group and signals are unchanged, and a
write anywhere else fails with EROFS as in a real container. Mount flags a remount must keep
(nosuid, nodev, noexec, atime) are read from ``statvfs`` and kept.

It needs CAP_SYS_ADMIN (the tests run as root here, MACHINE.md); without it, or on any mount
that cannot be made read-only, it exits 126 saying why, before the command runs: a container
that asked for a read-only root never runs with a writable one.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
# statvfs f_flag bits (ST_*) -> the mount flags that keep them on a remount
KEPT_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}
KERNEL_TREES = ("/proc", "/sys", "/dev")
EXIT_CANNOT = 126  # as a shell's "found but cannot execute"

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def _mount(source: str | None, target: str, flags: int) -> None:
    src = source.encode() if source is not None else None
    if _libc.mount(src, target.encode(), None, ctypes.c_ulong(flags), None) != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"mount {target} (flags {flags:#x}): {os.strerror(errno)}")


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) + 1 and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points() -> list[str]:
    """This namespace's mount points, parents before children (mountinfo's order)."""
    with open("/proc/self/mountinfo") as f:
        return [_unescape(line.split()[4]) for line in f if line.strip()]


def _kept(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(mount_flag for st, mount_flag in KEPT_FLAGS.items() if flags & st)


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def seal(writable: list[str]) -> None:
    """In a new mount namespace: everything read-only but ``writable`` (and the kernel's)."""
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise SetupError(f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for point in mount_points():
        if _under(point, KERNEL_TREES) or not os.path.isdir(point):
            continue
        _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept(point))
    for directory in writable:
        real = os.path.realpath(directory)
        if not os.path.isdir(real):
            raise SetupError(f"writable volume {directory} is not a directory")
        _mount(real, real, MS_BIND | MS_REC)
        _mount(None, real, MS_REMOUNT | MS_BIND | (_kept(real) & ~MS_RDONLY))


def main(argv: list[str]) -> None:
    writable: list[str] = []
    while argv and argv[0] == "--writable":
        writable.append(argv[1])
        argv = argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("usage: readonly_root.py [--writable DIR]... -- ARGV...\n")
        sys.exit(2)
    command = argv[1:]
    try:
        seal(writable)
    except (SetupError, OSError) as e:
        sys.stderr.write(f"readOnlyRootFilesystem: cannot seal the root: {e}\n")
        sys.exit(EXIT_CANNOT)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write(f"cannot run {command[0]}: {e}\n")
        sys.exit(EXIT_CANNOT + 1)


if __name__ == "__main__":
    main(sys.argv[1:])
