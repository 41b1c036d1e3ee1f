"""The storage layers contract in pyproject.toml names every module of odradek.storage, so none
escapes it (an unlisted module may import anything)."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import odradek.storage

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
CONTRACT = "Storage layers import only downwards"


def _layered_modules() -> set[str]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (storage,) = [c for c in contracts if c["name"].startswith(CONTRACT)]
    return {
        name.strip().strip("()")
        for layer in storage["layers"]
        for name in layer.split("|")
        if name.strip()
    }


def _python_modules() -> set[str]:
    """Every module and package under odradek.storage written in Python (the compiled
    ``_recordwalk`` imports nothing, and import-linter cannot see into it)."""
    found = set()
    for info in pkgutil.walk_packages(odradek.storage.__path__, "odradek.storage."):
        relative = Path(*info.name.split(".")[2:])
        root = Path(odradek.storage.__path__[0])
        if (root / relative).with_suffix(".py").exists() or (root / relative).is_dir():
            found.add(info.name)
    return found


def test_every_storage_module_is_in_the_layers_contract():
    missing = _python_modules() - _layered_modules()
    assert not missing, f"add to the storage layers contract in pyproject.toml: {sorted(missing)}"


def test_the_contract_names_no_module_that_does_not_exist():
    assert not _layered_modules() - _python_modules()
