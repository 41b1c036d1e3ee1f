"""The file operations storage changes the disk with, behind one injected seam (``FileOps``).

As TigerBeetle's storage and Tansu's engines take their I/O through an object they are given,
every call of the storage engine that *changes* what is on disk goes through a ``FileOps``:
``LogManager(..., file_ops=...)`` hands it to each ``Log``, which hands it to its loader,
segments, indexes, producer-state snapshots and leader-epoch checkpoint; the manager's offset
checkpoints take it too. Production uses ``OS_FILE_OPS``; tests pass a fault-injecting one
(``tests/support/faulty_disk.py``) instead of monkeypatching ``os`` for the whole process.

What the seam covers (the method names are those of ``os`` and ``shutil``, with their
arguments and errors, so a call site reads as the system call it is):

- writes: ``pwritev`` and ``pwrite`` (segments, indexes), ``write`` (checkpoints, snapshots);
- durability: ``fsync`` (files and directories);
- renames: ``replace`` (segment files, checkpoints, snapshots, whole partition directories);
- truncations: ``ftruncate`` and ``truncate``;
- deletions: ``unlink`` and ``rmtree``.

What it does not cover, and why: reads (``pread``, the fetch path's ``sendfile`` of a
``FileSlice``, ``stat``) and descriptor bookkeeping (``open``, ``dup``, ``close``, creating a
directory or the empty clean-shutdown marker) stay direct calls of ``os``. Reads change nothing
a crash could tear, and the fetch path must stay a plain ``sendfile``; a failing ``open`` is
reported by the same ``disk_errors`` handlers as the calls above, and no test needs to inject
one yet (adding it is one more method here). ``tests/unit/storage/test_file_ops_seam.py`` keeps
every storage module's writes on the seam.

Cost: ``OS_FILE_OPS``'s methods *are* the ``os`` functions (static attributes, no wrapper), so
an append pays one attribute lookup per call, as ``os.pwritev`` did.

Stateless and thread-safe: any thread may call any method; a ``FileOps`` given to the storage
engine must be so too (flush threads, the housekeeping thread and the cleaner call it at once).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from typing import Protocol

__all__ = ["OS_FILE_OPS", "FileOps", "OsFileOps", "unlink_if_exists", "write_all"]

StrPath = str | os.PathLike[str]
Buffer = bytes | bytearray | memoryview  # collections.abc.Buffer from Python 3.12


class FileOps(Protocol):
    """The calls that change the disk; each behaves (and raises ``OSError``) as ``os``'s."""

    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int, /) -> int: ...

    def pwrite(self, fd: int, data: Buffer, offset: int, /) -> int: ...

    def write(self, fd: int, data: Buffer, /) -> int: ...

    def fsync(self, fd: int, /) -> None: ...

    def ftruncate(self, fd: int, length: int, /) -> None: ...

    def truncate(self, path: StrPath, length: int, /) -> None: ...

    def replace(
        self,
        src: StrPath,
        dst: StrPath,
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
    ) -> None: ...

    def unlink(self, path: StrPath, *, dir_fd: int | None = None) -> None: ...

    def rmtree(self, path: StrPath) -> None: ...


class OsFileOps:
    """The real disk: each method is the ``os`` (or ``shutil``) function itself."""

    pwritev = staticmethod(os.pwritev)
    pwrite = staticmethod(os.pwrite)
    write = staticmethod(os.write)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)
    truncate = staticmethod(os.truncate)
    replace = staticmethod(os.replace)
    unlink = staticmethod(os.unlink)
    rmtree = staticmethod(shutil.rmtree)

    def __repr__(self) -> str:
        return "OS_FILE_OPS"


OS_FILE_OPS: FileOps = OsFileOps()


def write_all(file_ops: FileOps, fd: int, data: Buffer) -> None:
    """``write`` until every byte of ``data`` is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        view = view[file_ops.write(fd, view) :]


def unlink_if_exists(file_ops: FileOps, path: StrPath) -> None:
    """``unlink``, a file already gone being no error (``Path.unlink(missing_ok=True)``)."""
    with contextlib.suppress(FileNotFoundError):
        file_ops.unlink(path)
