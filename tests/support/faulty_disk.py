"""A disk for unit tests that fails, records or holds chosen storage operations, through storage's
injected ``FileOps`` seam (``odradek.storage.file_ops``) rather than by patching ``os`` for the
whole process (TigerBeetle's and Tansu's pattern: the fault lives in the object storage is given).

``FaultyFileOps`` passes every call to a real ``FileOps`` and, per operation name (``"pwritev"``,
``"fsync"``, ``"replace"``, ... as ``FileOps`` names them):

- ``fail(op, errno.EIO, path=..., after=N, times=M, torn=True)``: the matching calls raise
  ``OSError(errno)``: those whose path the predicate accepts, from the (N+1)th on, M times
  (``None``: for ever). ``torn`` writes part of the bytes first, as a disk failing mid-write;
- ``before(op, hook)``: ``hook(call)`` runs on the caller's thread before the real call (to
  record what the caller held, or to hold the call: a slow disk);
- ``record(*ops)``: a list that fills with the calls;
- ``heal()``: every rule and hook gone, the disk healthy again.

A call's path is the file it acts on as the kernel names it (``/proc/self/fd`` for a descriptor,
resolved when the call is made, so a ``.tmp`` file fsynced before its rename shows as the
``.tmp``); for ``replace`` it is the source and ``target`` the destination. Paths are only
resolved for operations a rule or hook watches: the other calls cost one dictionary lookup.

Thread-safe: storage calls it from flush, housekeeping and cleaner threads at once.
"""

from __future__ import annotations

import errno as errnos
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.storage.file_ops import OS_FILE_OPS, FileOps

__all__ = ["FaultyFileOps", "FileCall"]

OPERATIONS = (
    "pwritev",
    "pwrite",
    "write",
    "fsync",
    "ftruncate",
    "truncate",
    "replace",
    "unlink",
    "rmtree",
)
_FD_OPERATIONS = {"pwritev", "pwrite", "write", "fsync", "ftruncate"}


@dataclass(frozen=True, slots=True)
class FileCall:
    """One call storage made: the operation, the file it acts on, and on which thread."""

    op: str
    path: str
    thread: str
    target: str | None = None  # ``replace``'s destination


@dataclass(slots=True)
class _Fault:
    op: str
    errno: int
    path: Callable[[str], bool] | None
    after: int
    times: int | None
    torn: bool
    seen: int = 0  # matching calls so far
    raised: int = 0

    def fires(self, call: FileCall) -> bool:
        if self.path is not None and not (
            self.path(call.path) or (call.target is not None and self.path(call.target))
        ):
            return False
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.raised >= self.times):
            return False
        self.raised += 1
        return True


class FaultyFileOps:
    """A ``FileOps`` over ``real`` that fails, records or holds chosen calls (module docstring)."""

    def __init__(self, real: FileOps = OS_FILE_OPS):
        self.real = real
        self._lock = threading.Lock()
        self._faults: dict[str, list[_Fault]] = {}
        self._hooks: dict[str, list[Callable[[FileCall], object]]] = {}

    # -- arranging ---------------------------------------------------------------------------

    def fail(
        self,
        op: str,
        errno: int = errnos.EIO,
        *,
        path: Callable[[str], bool] | None = None,
        after: int = 0,
        times: int | None = None,
        torn: bool = False,
    ) -> None:
        """Make matching ``op`` calls raise ``OSError(errno)`` (module docstring)."""
        _check(op)
        if torn and op not in ("pwritev", "pwrite", "write"):
            raise ValueError(f"only a write can be torn, not {op}")
        with self._lock:
            self._faults.setdefault(op, []).append(_Fault(op, errno, path, after, times, torn))

    def before(self, op: str, hook: Callable[[FileCall], object]) -> None:
        """Run ``hook(call)`` before every ``op`` call, on the calling thread."""
        _check(op)
        with self._lock:
            self._hooks.setdefault(op, []).append(hook)

    def record(self, *ops: str) -> list[FileCall]:
        """The calls of ``ops`` from now on, in order (appended as they are made)."""
        calls: list[FileCall] = []
        for op in ops:
            self.before(op, calls.append)
        return calls

    def heal(self) -> None:
        """Drop every fault and hook: each call goes straight to the real disk again."""
        with self._lock:
            self._faults.clear()
            self._hooks.clear()

    # -- FileOps -----------------------------------------------------------------------------

    def pwritev(self, fd: int, buffers: Sequence[Any], offset: int, /) -> int:
        return self._call("pwritev", fd, None, self.real.pwritev, fd, buffers, offset)

    def pwrite(self, fd: int, data: Any, offset: int, /) -> int:
        return self._call("pwrite", fd, None, self.real.pwrite, fd, data, offset)

    def write(self, fd: int, data: Any, /) -> int:
        return self._call("write", fd, None, self.real.write, fd, data)

    def fsync(self, fd: int, /) -> None:
        return self._call("fsync", fd, None, self.real.fsync, fd)

    def ftruncate(self, fd: int, length: int, /) -> None:
        return self._call("ftruncate", fd, None, self.real.ftruncate, fd, length)

    def truncate(self, path: Any, length: int, /) -> None:
        return self._call("truncate", path, None, self.real.truncate, path, length)

    def replace(
        self,
        src: Any,
        dst: Any,
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
    ) -> None:
        return self._call(
            "replace",
            _in_dir(src, src_dir_fd),
            _in_dir(dst, dst_dir_fd),
            self.real.replace,
            src,
            dst,
            src_dir_fd=src_dir_fd,
            dst_dir_fd=dst_dir_fd,
        )

    def unlink(self, path: Any, *, dir_fd: int | None = None) -> None:
        return self._call(
            "unlink", _in_dir(path, dir_fd), None, self.real.unlink, path, dir_fd=dir_fd
        )

    def rmtree(self, path: Any) -> None:
        return self._call("rmtree", path, None, self.real.rmtree, path)

    # -- the one path of every call ----------------------------------------------------------

    def _call(
        self, op: str, where: Any, target: Any, real: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        hooks, faults = self._hooks.get(op), self._faults.get(op)
        if not hooks and not faults:
            return real(*args, **kwargs)
        path = _fd_path(where) if op in _FD_OPERATIONS else os.fspath(where)
        call = FileCall(
            op, path, threading.current_thread().name, None if target is None else str(target)
        )
        for hook in list(hooks or ()):
            hook(call)
        with self._lock:
            fault = next((f for f in faults or () if f.fires(call)), None)
        if fault is not None:
            if fault.torn:
                _write_part(self.real, op, *args)
            raise OSError(fault.errno, os.strerror(fault.errno), path)
        return real(*args, **kwargs)


def _check(op: str) -> None:
    if op not in OPERATIONS:
        raise ValueError(f"{op!r} is no FileOps operation: one of {OPERATIONS}")


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # closed under the caller: the real call says so
        return f"<closed descriptor {fd}>"


def _in_dir(path: Any, dir_fd: int | None) -> str:
    """``path`` as an absolute path when it is relative to ``dir_fd``."""
    if dir_fd is None:
        return os.fspath(path)
    return os.path.join(_fd_path(dir_fd), os.fspath(path))


def _write_part(real: FileOps, op: str, fd: int, data: Any, *rest: Any) -> None:
    """What a write torn by a failing disk leaves: the first buffer of a ``pwritev``, the first
    half of a ``pwrite`` or ``write``."""
    if op == "pwritev":
        real.pwrite(fd, data[0], rest[0])
    elif op == "pwrite":
        real.pwrite(fd, memoryview(data)[: len(data) // 2], rest[0])
    else:
        real.write(fd, memoryview(data)[: len(data) // 2])
