"""How to tell a user to run ``odradek`` again: the command as this process was started.

A checkout has ``.venv/bin/odradek`` and no ``odradek`` on ``PATH``, so a hint that says
"run `odradek local status`" fails as written. ``odradek_command()`` gives the name that works
from the user's current directory: ``odradek`` when that is what ``PATH`` finds, else the path
the process was started by (relative when it lies below the current directory).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def odradek_command(argv0: str | None = None) -> str:
    """The shell words that start ``odradek`` again from the current directory."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    started = Path(argv0)
    if started.name != "odradek":  # `python -m odradek.cli`, or a test calling main()
        return f"{shlex.quote(sys.executable)} -m odradek.cli"
    on_path = shutil.which("odradek")
    if on_path and started.exists() and os.path.samefile(on_path, started):
        return "odradek"
    absolute = started.absolute()
    try:
        shown = str(absolute.relative_to(Path.cwd()))
    except ValueError:
        shown = str(absolute)
    return shlex.quote(shown if os.sep in shown else f".{os.sep}{shown}")
