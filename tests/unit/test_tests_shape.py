"""The tests keep their shared shape: waits come from ``support.waiting`` (no local poll helpers
but the few adapters listed here, each with its reason), and no test edits ``sys.path`` (the
helper folders are on pytest's ``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
WAIT_NAMES = {"wait_for", "_wait", "eventually", "wait_until", "_wait_until", "until", "poll_until"}
# (file, function): why it is not simply support.waiting.
WAIT_ADAPTERS = {
    ("support/waiting.py", "wait_until"): "the one home",
    ("support/k8s_operator.py", "wait_for"): "the operator tests' argument order, over the home",
    ("support/connect_workers.py", "wait_for"): "ends at once when a worker process exits",
    ("replication/proof/clusters.py", "wait_until"): "the proofs' bound by default, over the home",
    ("unit/broker/test_txn_marker_sender.py", "wait_for"): "awaits an asyncio.Event, no polling",
    ("spark/test_write.py", "wait_for"): "one deadline across the waits of a driver it kills",
}


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_wait_helpers_are_the_shared_ones_or_a_listed_adapter():
    found = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in WAIT_NAMES:
                found.add((str(path.relative_to(TESTS)), node.name))
    assert found == set(WAIT_ADAPTERS), "use support.waiting (or list the adapter and why)"


def test_no_test_edits_sys_path():
    offenders = [
        str(path.relative_to(TESTS))
        for path in _python_files()
        if path != Path(__file__).resolve()
        and "sys.path.insert" in (text := path.read_text(encoding="utf-8"))
        or "sys.path.append" in text
    ]
    assert offenders == [], "put the folder on [tool.pytest.ini_options] pythonpath instead"


def test_pythonpath_holds_folders_that_exist_and_never_the_root():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    paths = config["tool"]["pytest"]["ini_options"]["pythonpath"]
    for entry in paths:
        assert (ROOT / entry).is_dir(), entry
        # The root would make operator/ importable as a package named operator.
        assert (ROOT / entry).resolve() != ROOT, entry


def test_no_module_imported_by_name_has_two_homes_on_the_pythonpath():
    # A module imported by name (``from test_faults import run_scenario``, ``import proof``) would
    # otherwise come from whichever folder is listed first. Test modules of the same name in two
    # folders are fine while nobody imports them by name.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    homes: dict[str, list[str]] = {}
    for entry in config["tool"]["pytest"]["ini_options"]["pythonpath"]:
        for child in sorted((ROOT / entry).iterdir()):
            if child.suffix == ".py" or (child.is_dir() and child.name != "__pycache__"):
                homes.setdefault(child.stem, []).append(entry)
    imported = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
    clashes = {name: homes[name] for name in imported & set(homes) if len(homes[name]) > 1}
    assert clashes == {}
