"""The README's quick tour works as written: each line of its code block, run in order by a shell
against the local cluster its first line starts, succeeds (and its group and drain do what the
comments say)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.local.cluster import ClusterState
from support.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
COMMAND_TIMEOUT_S = 300
KILL_TIMEOUT_S = 10
# The one placeholder of the tour: the user copies it from `local status`, the test from the
# cluster's state file.
BOOTSTRAP_PLACEHOLDER = "<bootstrap>"


def tour_commands(readme: str) -> list[str]:
    """The commands of the first ``sh`` block after "## Quick tour", comments and blanks dropped."""
    section = readme.split("\n## Quick tour\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: no ```sh block in the quick tour"
    commands = []
    for line in block.group(1).splitlines():
        command = re.split(r"\s+#", " " + line, maxsplit=1)[0].strip()
        if command:
            commands.append(command)
    return commands


def test_tour_parser_keeps_commands_and_drops_comments():
    commands = tour_commands(
        "x\n## Quick tour\n\n```sh\na --b 1   # c\n          # more comment\nd e\n```\n"
        "```sh\nz\n```"
    )
    assert commands == ["a --b 1", "d e"]


@pytest.fixture
def tour_dir(tmp_path):
    """A directory like a checkout: ``.venv`` there is this interpreter's virtualenv. Whatever
    the tour leaves running is killed by PID at the end."""
    venv = ROOT / ".venv" if (ROOT / ".venv").exists() else Path(sys.prefix)
    (tmp_path / ".venv").symlink_to(venv.resolve())
    yield tmp_path
    state = ClusterState.read(tmp_path / "var" / "local")
    members = state.members if state else []
    for member in members:
        if member.is_ours():
            os.kill(member.pid, signal.SIGKILL)
    wait_until(  # init reaps them: nothing to wait on by PID
        lambda: not any(m.is_ours() for m in members),
        "the tour's members gone",
        KILL_TIMEOUT_S,
        poll_s=0.05,
    )


def run_line(cwd: Path, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_readme_quick_tour_runs_as_written(tour_dir):
    commands = tour_commands(README.read_text(encoding="utf-8"))
    assert commands[0].startswith(".venv/bin/odradek local up"), commands[0]
    assert commands[-1] == ".venv/bin/odradek local down", commands[-1]
    outputs: dict[str, str] = {}
    for command in commands:
        if BOOTSTRAP_PLACEHOLDER in command:
            state = ClusterState.read(tour_dir / "var" / "local")
            command = command.replace(BOOTSTRAP_PLACEHOLDER, state.bootstrap_servers)
        result = run_line(tour_dir, command)
        shown = f"$ {command}\n{result.stdout}\n{result.stderr}"
        assert result.returncode == 0, shown
        assert "Traceback" not in result.stderr, shown
        outputs[command.split("  #")[0]] = result.stdout + result.stderr

    def output_of(prefix: str) -> str:
        return next(out for command, out in outputs.items() if command.startswith(prefix))

    # The group the tour's consumer joined committed every record it read: no lag is left.
    described = output_of(".venv/bin/odradek groups describe --group billing")
    assert re.search(r"^Group billing: Empty, .* total lag 0$", described, re.M), described
    committed = [
        int(fields[3])
        for fields in (line.split() for line in described.splitlines())
        if fields[:2] == ["billing", "orders"]
    ]
    produced = re.search(r"--num-records (\d+)", " ".join(outputs)).group(1)
    assert sum(committed) == int(produced), described  # a partition that got no record: no row
    # The drain moved every replica off its broker.
    assert re.search(r"partition reassignments", output_of(".venv/bin/odradek cluster drain"))
