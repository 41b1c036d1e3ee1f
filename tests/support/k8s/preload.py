"""C shims the kubelet stand-in preloads into pods (``LD_PRELOAD``), compiled here with the
system's C compiler (scripts/setup.sh installs gcc): zkshim's ``connect`` from the pod's address,
libc_dns's ``getaddrinfo`` from the pod's hosts file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["COMPILE_TIMEOUT_S", "compile_library"]

COMPILE_TIMEOUT_S = 60


def compile_library(source: str, directory: Path, library_name: str) -> Path | None:
    """``source`` compiled into ``directory/library_name`` (the C file beside it); None without a
    C compiler, or when it fails."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    source_file = directory / (Path(library_name).stem + ".c")
    library = directory / library_name
    source_file.write_text(source)
    try:
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(library), str(source_file)]
            + ["-ldl"],
            capture_output=True,
            timeout=COMPILE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return library if done.returncode == 0 and library.exists() else None
