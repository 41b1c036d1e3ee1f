"""The command a hint tells the user to run is the one that works from their directory."""

from __future__ import annotations

import os
import sys

from odradek.commands.invocation import odradek_command


def test_a_checkouts_venv_script_is_named_by_its_relative_path(tmp_path, monkeypatch):
    script = tmp_path / ".venv" / "bin" / "odradek"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert odradek_command(".venv/bin/odradek") == ".venv/bin/odradek"
    assert odradek_command(str(script)) == ".venv/bin/odradek"


def test_the_script_on_path_is_named_odradek(tmp_path, monkeypatch):
    script = tmp_path / "bin" / "odradek"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(script.parent) + os.pathsep + os.environ.get("PATH", ""))
    assert odradek_command(str(script)) == "odradek"


def test_outside_the_current_directory_the_path_is_absolute(tmp_path, monkeypatch):
    script = tmp_path / "elsewhere" / "odradek"
    script.parent.mkdir()
    script.write_text("")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert odradek_command(str(script)) == str(script)


def test_python_dash_m_is_named_as_such():
    assert odradek_command("/x/odradek/cli.py") == f"{sys.executable} -m odradek.cli"
