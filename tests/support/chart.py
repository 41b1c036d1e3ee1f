"""Shared by tests/chart: the chart's paths, the real helm, and the scripts that render it."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "odradek"
CI_VALUES = CHART / "ci"
BAD_VALUES = ROOT / "tests" / "chart" / "values"
MANIFESTS = ROOT / "manifests"
# The oldest Kubernetes the chart supports (Chart.yaml: kubeVersion) that kubernetes-validate knows.
KUBERNETES_VERSION = "1.30.0"


def script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (scripts/ is on pytest's ``pythonpath``, not a package)."""
    return importlib.import_module(name)


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the real helm; never raises on a non-zero exit (the caller checks returncode)."""
    binary = script("render_manifests").helm()
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render(values: Path, *, crds_served: bool = False, extra: tuple[str, ...] = ()) -> list[dict]:
    """The chart's objects as `helm template` renders them with ``values`` (CRDs included)."""
    text = script("render_manifests").template(values, crds_served=crds_served, extra=extra)
    return documents(text)


def validate_builtin(obj: dict[str, Any]) -> None:
    """Strict schema check of a built-in kind (unknown fields fail); raises on a bad object."""
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]
