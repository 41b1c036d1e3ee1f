"""Every package of odradek has its place in the top-level layers contract, so none escapes it."""

import pkgutil
import tomllib
from pathlib import Path

import odradek
import odradek.security

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _layered_modules() -> set[str]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["name"].startswith("The top-level layers")]
    named = set()
    for layer in layers["layers"]:
        named |= {m.strip() for m in layer.replace(":", "|").split("|")}
    return named


def test_every_top_level_package_and_module_is_in_a_layer():
    named = _layered_modules()
    top = {f"odradek.{m.name}" for m in pkgutil.iter_modules(odradek.__path__)}
    top = {m for m in top if not m.rsplit(".", 1)[1].startswith("_")} - {"odradek.security"}
    assert top - named == set(), "place the new package in the layers contract"


def test_security_is_layered_module_by_module():
    named = _layered_modules()
    parts = {f"odradek.security.{m.name}" for m in pkgutil.iter_modules(odradek.security.__path__)}
    assert parts - named == set(), "place the new security module in the layers contract"
