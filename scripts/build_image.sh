#!/usr/bin/env bash
# Build the container image localhost/odradek:<version> here, without a Docker engine or a registry
# (docs/image.md). Three steps, each timed (1 and 2 side by side):
#   1. base     localhost/debian-python:bookworm, Debian's python3 + python3-venv made with
#               debootstrap from the mirror apt already uses (no registry is reachable, so no
#               python:3.11-slim). Slow (about a minute), so it is cached twice: the imported image
#               carries a label with the cache key and is reused while the key matches, and the
#               root filesystem's tarball stays in the cache directory for a re-import.
#   2. wheels   on the host: odradek's own (gcc compiles the record walker) and the runtime
#               dependencies (cached by the dependency list's hash), because pip inside a RUN step
#               fails TLS verification here.
#   3. image    podman build --isolation chroot --build-arg BASE=localhost/debian-python:bookworm;
#               podman's layer cache keeps the dependencies' layer while their wheels are the same.
#
# The cache directory is per user, not per checkout, so a fresh clone (CI's) on the same machine
# finds it, as it finds podman's image store; the first build on a new machine takes about three
# minutes, later ones about twenty seconds.
#
# Environment: PYTHON (the host interpreter that builds the wheels; default .venv/bin/python, a
# CPython 3.11 like the base's), ODRADEK_IMAGE (default localhost/odradek:<version>),
# ODRADEK_IMAGE_CACHE (default ~/.cache/odradek-image), ODRADEK_IMAGE_REFRESH=1 (remake everything:
# the base, the dependencies' wheels, every layer; for a fresh Debian or new dependency releases).
# Prints the image's name on its last line.
#
# `build_image.sh --wheels-only` does step 2 alone, into wheels/ at the top of the repository (the
# context `docker build .` and skaffold use elsewhere; .dockerignore sends nothing else).
#
# `build_image.sh --spark` (make image-spark) builds the Dockerfile's `spark` target instead,
# localhost/odradek-spark:<version> (ODRADEK_SPARK_IMAGE): step 2 also makes the wheels of the
# `spark` extra (pyspark, pyarrow; cached by their list's hash, as the dependencies) into
# wheels/spark/, and the context gets spark/ (the jobs and the entrypoint). With --wheels-only it
# writes wheels/spark/ too. The image step also installs a JRE with apt inside the build (from the
# mirror the base names). Not run in CI: pyspark's wheel alone is about 450 MB.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

python="${PYTHON:-$repo_root/.venv/bin/python}"
cache_dir="${ODRADEK_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/odradek-image}"
refresh="${ODRADEK_IMAGE_REFRESH:-0}"
base_image="localhost/debian-python:bookworm"
suite="bookworm"
base_packages="python3,python3-venv,ca-certificates"
# Bump when the way the base is made or trimmed changes, so cached bases are remade.
base_recipe=1

log() { printf 'build_image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

wheels_only=0
spark=0
for arg in "$@"; do
    case "$arg" in
        --wheels-only) wheels_only=1 ;;
        --spark) spark=1 ;;
        *) die "usage: $0 [--wheels-only] [--spark]" ;;
    esac
done
if [ "$wheels_only" = 0 ]; then
    for tool in podman debootstrap; do
        command -v "$tool" >/dev/null || die "$tool is missing (scripts/setup.sh installs it)"
    done
    [ "$(id -u)" -eq 0 ] || die "debootstrap and podman's chroot isolation need root"
fi
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
    || die "$python is not CPython 3.11: the wheel's C extension must match the base's Python"

version="$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
image="${ODRADEK_IMAGE:-localhost/odradek:$version}"
target=()
if [ "$spark" = 1 ]; then
    image="${ODRADEK_SPARK_IMAGE:-localhost/odradek-spark:$version}"
    target=(--target spark)
fi
mkdir -p "$cache_dir"
work_dir="$(mktemp -d "$cache_dir/build.XXXXXX")"
# The base is made in the background while the wheels are built: on a failure, wait for it
# before removing the directory it works in.
trap 'wait; rm -rf "$work_dir"' EXIT

# Installers write to a log (one per concurrent step) that is shown only if they fail.
step_log="$work_dir/step.log"
quietly() {
    if ! "$@" >"$step_log" 2>&1; then
        log "failed: $*"
        tail -n 40 "$step_log" >&2
        exit 1
    fi
}

# The Debian mirror apt's own sources name (deb822 .sources or one-line .list), else Debian's CDN.
debian_mirror() {
    local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
    local uri
    uri="$(cat "${files[@]}" 2>/dev/null \
        | awk '/^[[:space:]]*#/ { next }
               $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }
               $1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }' \
        | grep -E '/debian/?$' | head -n 1 || true)"
    printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

# --- 2. wheels (a function: --wheels-only runs it alone) -----------------------------------------
# Into $1: odradek's wheel, and deps/ with the dependencies' wheels and their SHA256SUMS.
build_wheels() {
    local wheels_dir="$1" started
    started="$(now)"
    mkdir -p "$wheels_dir/deps"
    local dependencies deps_key deps_dir deps_note source_dir
    # The runtime dependencies and the `connect` extra's (the SQL and Parquet connectors' workers
    # run from this image on Kubernetes).
    mapfile -t dependencies < <("$python" -c 'import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["connect"]))')
    deps_key="$(printf '%s\n' "${dependencies[@]}" | sha256sum | cut -c1-16)"
    deps_dir="$cache_dir/wheels-$deps_key"
    if [ "$refresh" = 1 ]; then
        rm -rf "$deps_dir"
    fi
    if [ -n "$(ls "$deps_dir" 2>/dev/null)" ]; then
        deps_note="cached dependencies $deps_key"
    else
        rm -rf "$deps_dir.partial"
        quietly "$python" -m pip wheel --disable-pip-version-check -w "$deps_dir.partial" "${dependencies[@]}"
        mv "$deps_dir.partial" "$deps_dir"
        deps_note="dependencies built"
    fi
    cp -l "$deps_dir"/*.whl "$wheels_dir/deps/" 2>/dev/null || cp "$deps_dir"/*.whl "$wheels_dir/deps/"
    # Their checksums, with the paths the Dockerfile mounts them at.
    (cd "$wheels_dir/deps" && sha256sum -- *.whl) | sed 's|  |  /mnt/|' >"$wheels_dir/deps/SHA256SUMS"
    # From a copy of the working tree's sources (tracked or not, without build products): setuptools
    # reuses an in-tree build/ directory, where a module deleted since would still be picked up.
    source_dir="$work_dir/source"
    mkdir -p "$source_dir"
    tar -c --exclude=__pycache__ --exclude='*.so' --exclude='*.egg-info' \
        pyproject.toml README.md services operator | tar -x -C "$source_dir"
    quietly "$python" -m pip wheel --disable-pip-version-check --no-deps -w "$wheels_dir" "$source_dir"
    if [ "$spark" = 1 ]; then
        build_spark_wheels "$wheels_dir/spark"
    fi
    log "wheels: odradek + $(ls "$wheels_dir/deps"/*.whl | wc -l) dependencies ($deps_note) in $(elapsed "$started")"
}

# Into $1: the wheels of odradek's `spark` extra and their SHA256SUMS (as /mnt/NAME.whl).
build_spark_wheels() {
    local spark_dir="$1" started extra key cached
    started="$(now)"
    mapfile -t extra < <("$python" -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]))')
    key="$(printf '%s\n' "${extra[@]}" | sha256sum | cut -c1-16)"
    cached="$cache_dir/wheels-spark-$key"
    if [ "$refresh" = 1 ]; then
        rm -rf "$cached"
    fi
    if [ -z "$(ls "$cached" 2>/dev/null)" ]; then
        rm -rf "$cached.partial"
        quietly "$python" -m pip wheel --disable-pip-version-check -w "$cached.partial" "${extra[@]}"
        mv "$cached.partial" "$cached"
    fi
    mkdir -p "$spark_dir"
    cp -l "$cached"/*.whl "$spark_dir/" 2>/dev/null || cp "$cached"/*.whl "$spark_dir/"
    (cd "$spark_dir" && sha256sum -- *.whl) | sed 's|  |  /mnt/|' >"$spark_dir/SHA256SUMS"
    log "spark wheels: $(ls "$spark_dir"/*.whl | wc -l) ($key) in $(elapsed "$started")"
}

if [ "$wheels_only" = 1 ]; then
    rm -rf "$repo_root/wheels"
    build_wheels "$repo_root/wheels"
    exit 0
fi

# --- 1. base (a function: run in the background, beside step 2) ---------------------------------
make_base() {
    local started base_key base_tar have_key base_note mirror rootfs
    local step_log="$work_dir/base.log"
    started="$(now)"
    base_key="$(printf '%s\n' "$suite" minbase "$base_packages" "$base_recipe" | sha256sum | cut -c1-16)"
    base_tar="$cache_dir/debian-python-$suite-$base_key.tar"
    have_key="$(podman image inspect --format '{{index .Labels "odradek.base-key"}}' "$base_image" 2>/dev/null || true)"
    if [ "$refresh" = 1 ]; then
        rm -f "$base_tar"
        have_key=""
    fi
    if [ "$have_key" = "$base_key" ]; then
        base_note="cached image $base_key"
    else
        if [ ! -s "$base_tar" ]; then
            mirror="$(debian_mirror)"
            log "base: debootstrap $suite ($base_packages) from $mirror"
            rootfs="$work_dir/rootfs"
            quietly debootstrap --variant=minbase --include="$base_packages" "$suite" "$rootfs" "$mirror"
            # What only installing packages needs: the downloaded .debs and the package lists
            # (100 MB), documentation and translations. apt and dpkg themselves stay.
            rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
                "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
                "$rootfs"/usr/share/locale/*
            tar -C "$rootfs" --numeric-owner -cf "$base_tar.partial" .
            mv "$base_tar.partial" "$base_tar"
            rm -rf "$rootfs"
            base_note="debootstrap"
        else
            base_note="cached rootfs"
        fi
        quietly podman import --change "LABEL odradek.base-key=$base_key" \
            --change 'CMD ["/usr/bin/python3"]' "$base_tar" "$base_image"
        base_note="$base_note, imported"
    fi
    log "base: $base_image ($base_note) in $(elapsed "$started")"
}

# --- 3. image, once 1 and 2 (side by side: debootstrap and pip wheel both wait on the network) ---
context="$work_dir/context"
make_base &
base_pid=$!
build_wheels "$context/wheels"
wait "$base_pid" || die "the base failed (see above)"
started="$(now)"
cp Dockerfile "$context/Dockerfile"
if [ "$spark" = 1 ]; then
    mkdir -p "$context/spark/k8s"
    cp spark/*.py "$context/spark/"
    cp spark/k8s/entrypoint.sh "$context/spark/k8s/"
fi
previous="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
no_cache=()
if [ "$refresh" = 1 ]; then
    no_cache=(--no-cache)
fi
quietly podman build --isolation chroot "${no_cache[@]}" "${target[@]}" --build-arg "BASE=$base_image" -t "$image" "$context"
# The image this tag named before is dangling now: drop it unless a container still uses it.
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
fi
size="$(podman image inspect --format '{{.Size}}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
log "image: $image ($size) in $(elapsed "$started")"
printf '%s\n' "$image"
