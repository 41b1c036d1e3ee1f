"""Every change storage makes to the disk goes through its injected ``FileOps``: no storage module
calls ``os``'s write, fsync, rename, truncate or delete functions itself, and a broker's whole
storage life cycle, given a ``FileOps``, makes all of its changes through that one."""

from __future__ import annotations

import ast
import os
import shutil
import sys
import threading
import types
from pathlib import Path

import odradek.storage
from odradek.config.topic import TopicConfig
from odradek.storage import file_ops as file_ops_module
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.manager import LogManager
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin
from support.faulty_disk import OPERATIONS, FaultyFileOps

STORAGE = Path(odradek.storage.__path__[0])
SEAM = STORAGE / "file_ops.py"

# ``os`` and ``shutil`` functions that change the disk: storage calls them through ``FileOps``.
OS_WRITES = {
    "fsync", "fdatasync", "sync", "pwritev", "pwrite", "write", "writev", "replace", "rename",
    "renames", "ftruncate", "truncate", "unlink", "remove", "rmdir", "removedirs", "link",
    "symlink", "posix_fallocate",
}  # fmt: skip
SHUTIL_WRITES = {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"}
# ``Path`` methods that change the disk (``rename``/``replace`` are not listed: storage's
# indexes have a ``rename`` of their own and ``str.replace`` is everywhere; the tripwire test
# below catches a ``Path.rename`` or ``Path.replace``, which call ``os.rename``/``os.replace``).
PATH_WRITES = {"unlink", "rmdir", "write_bytes", "write_text", "touch", "symlink_to"}
# Direct calls kept on purpose, by (module, what is called), with why.
ALLOWED = {
    # Creating an empty file, as an ``open(O_CREAT)`` does, stays outside the seam (file_ops's
    # docstring): the marker says "shut down cleanly", its absence only costs a recovery.
    ("manager.py", "touch"): "the clean-shutdown marker",
}


def _direct_writes(path: Path) -> list[tuple[str, int, str]]:
    """(module, line, what) of each disk-changing call in ``path`` that bypasses ``FileOps``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        what = None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = node.value.id
            if (module == "os" and node.attr in OS_WRITES) or (
                module == "shutil" and node.attr in SHUTIL_WRITES
            ):
                what = f"{module}.{node.attr}"
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil"):
            names = {a.name for a in node.names} & (OS_WRITES | SHUTIL_WRITES)
            what = f"from {node.module} import {', '.join(sorted(names))}" if names else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value)
            if node.func.attr in PATH_WRITES and "file_ops" not in receiver:
                what = node.func.attr
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "open"
        ):
            what = "open for writing" if _writable_mode(node) else what
        if what is not None and (path.name, what) not in ALLOWED:
            found.append((path.name, node.lineno, what))
    return found


def _writable_mode(call: ast.Call) -> bool:
    modes = [call.args[1]] if len(call.args) > 1 else []
    modes += [k.value for k in call.keywords if k.arg == "mode"]
    return any(
        not isinstance(m, ast.Constant) or any(c in str(m.value) for c in "wax+") for m in modes
    )


def test_no_storage_module_changes_the_disk_around_the_seam():
    modules = sorted(p for p in STORAGE.rglob("*.py") if p != SEAM)
    assert len(modules) > 20
    bypasses = [hit for module in modules for hit in _direct_writes(module)]
    assert bypasses == [], "call these through the module's FileOps (storage/file_ops.py)"


def test_the_allow_list_names_only_calls_still_there():
    stale = [
        key
        for key in ALLOWED
        if not any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == key[1]
            for n in ast.walk(ast.parse((STORAGE / key[0]).read_text()))
        )
    ]
    assert stale == []


def test_the_real_file_ops_are_the_os_functions_themselves():
    """No wrapper on the hot path: an append's ``pwritev`` is ``os.pwritev``."""
    real = file_ops_module.OS_FILE_OPS
    assert real.pwritev is os.pwritev and real.pwrite is os.pwrite and real.fsync is os.fsync
    assert real.rmtree is shutil.rmtree


# -- the injected FileOps is the only one a broker's storage uses -------------------------------


def _tripwires(monkeypatch) -> tuple[types.SimpleNamespace, list[str]]:
    """Replace ``os``'s and ``shutil``'s writes, and ``OS_FILE_OPS``'s, with functions that note
    every call made directly from a storage module (and still do it). Returns the real
    functions, for the ``FileOps`` the test injects, and the notes."""
    real = types.SimpleNamespace(
        **{op: getattr(file_ops_module.OsFileOps, op) for op in OPERATIONS}
    )
    bypasses: list[str] = []
    lock = threading.Lock()

    def tripwire(name: str, function):
        def called(*args, **kwargs):
            caller = sys._getframe(1)
            where = Path(caller.f_code.co_filename)
            if where.parent == STORAGE:  # the seam's helpers too, if given OS_FILE_OPS
                with lock:
                    bypasses.append(f"{name} from {where.name}:{caller.f_lineno}")
            return function(*args, **kwargs)

        return called

    for name in sorted(OS_WRITES):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, tripwire(f"os.{name}", getattr(os, name)))
    for name in sorted(SHUTIL_WRITES):
        monkeypatch.setattr(shutil, name, tripwire(f"shutil.{name}", getattr(shutil, name)))
    for op in OPERATIONS:
        wire = staticmethod(tripwire(f"OS_FILE_OPS.{op}", getattr(real, op)))
        monkeypatch.setattr(file_ops_module.OsFileOps, op, wire)
    return real, bypasses


def _batch(pid: int, sequence: int, *, transactional: bool = False) -> bytes:
    records = [Record(i, 1_700_000_000_000, b"k%d" % (i % 3), b"v" * 40) for i in range(3)]
    return encode_batch(
        records,
        base_offset=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=transactional,
    )


def test_a_storage_life_cycle_changes_the_disk_only_through_the_file_ops_it_was_given(
    tmp_path, monkeypatch
):
    real, bypasses = _tripwires(monkeypatch)
    disk = FaultyFileOps(real)
    calls = disk.record(*OPERATIONS)
    config = TopicConfig(
        segment_bytes=600, index_interval_bytes=0, cleanup_policy="compact", file_delete_delay_ms=0
    )
    dirs = [tmp_path / "disk-0", tmp_path / "disk-1"]

    def open_manager() -> LogManager:
        manager = LogManager(dirs, topic_config=lambda topic: config, file_ops=disk)
        manager.load()
        return manager

    manager = open_manager()
    log = manager.get_or_create_log("orders", 0)
    other = manager.get_or_create_log("orders", 1)
    for sequence in range(0, 60, 3):  # rolls: indexes trimmed, producer snapshots written
        log.append(_batch(7, sequence))
        other.append(_batch(8, sequence))
    log.append_validated(
        log.validate(_batch(9, 0, transactional=True), origin=AppendOrigin.COORDINATOR)
    )
    abort = encode_marker(
        ControlType.ABORT, producer_id=9, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1
    )
    log.append_as_coordinator(abort, leader_epoch=1)  # a .txnindex entry, an epoch checkpoint
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    log.truncate_to(log.segments()[-1].base_offset)  # ftruncate, snapshots above it unlinked
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    manager.cleaner.clean(log)  # .cleaned, .swap, .deleted renames and deletions
    log.advance_log_start_offset(log.segments()[1].base_offset)
    log.delete_old_segments()
    manager.write_checkpoints()
    manager.delete_log("orders", 1).result(10)  # the directory renamed and removed
    manager.shutdown()
    manager = open_manager()  # a clean restart
    manager.shutdown()

    assert bypasses == []
    ops = {call.op for call in calls}
    assert ops >= {"pwritev", "pwrite", "write", "fsync", "ftruncate", "replace", "unlink"}
    assert "rmtree" in ops
