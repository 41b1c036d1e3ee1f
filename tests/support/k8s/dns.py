"""Cluster DNS for the kubelet stand-in: hosts files, a ``sitecustomize`` and a resolver.

The stand-in writes hosts files (``/etc/hosts`` format, one address per line, a name may repeat
on several lines) into one directory:

- ``hosts``: fully qualified names only (``<svc>.<ns>.svc.cluster.local``, ``<svc>.<ns>.svc``,
  ``<pod>.<svc>.<ns>.svc.cluster.local``, ``<pod>.<svc>.<ns>.svc``), for the test process;
- ``hosts-<namespace>``: the same plus the short forms a pod of that namespace may use
  (``<svc>``, ``<svc>.<ns>``, ``<pod>.<svc>``), plus ``localhost`` and this machine's host name
  (the JVM's ``-Djdk.net.hosts.file`` replaces its resolver: a name missing there does not
  resolve at all).

Python processes started by the stand-in get ``sitecustomize.py`` (written next to the hosts
files) on ``PYTHONPATH`` and ``ODRADEK_STANDIN_HOSTS=<hosts file>``: it patches
``socket.getaddrinfo``, ``gethostbyname`` and ``gethostbyname_ex`` for names in the table, and
for any name ending in ``.svc.cluster.local`` or ``.svc`` (unknown ones fail like NXDOMAIN
instead of going to the real DNS); the file is re-read whenever its mtime changes. Everything
else goes to the real resolver. With ``ODRADEK_STANDIN_POD_IP`` it also plays the pod's network
namespace: an IPv4 socket bound to ``0.0.0.0`` (or ``""``) is bound to the pod's address.
``resolver(hosts_file)`` installs the DNS patch (only) in the test process. C libraries
(librdkafka in confluent_kafka) resolve by themselves and do not see it; for them the stand-in
preloads ``cluster-dns.so`` (``build_preload``, compiled with the system's C compiler): its
``getaddrinfo`` answers a name of the ``ODRADEK_STANDIN_HOSTS`` table with the table's addresses
(each through the real ``getaddrinfo`` as a numeric host, so the results are glibc's own and
``freeaddrinfo`` frees them), fails a ``.svc.cluster.local`` or ``.svc`` name not in it like
NXDOMAIN, and passes every other name on. It reads the table on each call (it is replaced
atomically) and keeps no state: librdkafka calls it from several threads.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PRELOAD_LIBRARY", "SITECUSTOMIZE", "build_preload", "install", "resolver", "write_hosts"]

PRELOAD_LIBRARY = "cluster-dns.so"
PRELOAD_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

static int ends_with(const char *name, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n > k && strncasecmp(name + n - k, suffix, k) == 0;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    getaddrinfo_fn real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    const char *table = getenv("ODRADEK_STANDIN_HOSTS");
    if (node == NULL || table == NULL) return real(node, service, hints, res);
    size_t n = strlen(node);
    if (n > 0 && node[n - 1] == '.') n--;  /* a fully qualified name's root */
    if (n == 0 || n > 253) return real(node, service, hints, res);
    struct addrinfo numeric = {0};
    if (hints != NULL) numeric = *hints;
    numeric.ai_flags = (numeric.ai_flags | AI_NUMERICHOST) & ~(AI_CANONNAME | AI_ADDRCONFIG);
    if (numeric.ai_family == AF_INET6) numeric.ai_flags |= AI_V4MAPPED;
    struct addrinfo *head = NULL, *tail = NULL;
    FILE *f = fopen(table, "r");
    if (f != NULL) {
        char line[1024];
        while (fgets(line, sizeof line, f) != NULL) {
            char *save = NULL;
            char *address = strtok_r(line, " \t\r\n", &save);
            if (address == NULL || address[0] == '#') continue;
            for (char *name = strtok_r(NULL, " \t\r\n", &save); name != NULL;
                 name = strtok_r(NULL, " \t\r\n", &save)) {
                if (strlen(name) != n || strncasecmp(name, node, n) != 0) continue;
                struct addrinfo *found = NULL;
                if (real(address, service, &numeric, &found) == 0 && found != NULL) {
                    if (tail == NULL) head = found; else tail->ai_next = found;
                    for (tail = found; tail->ai_next != NULL; tail = tail->ai_next) {}
                }
                break;
            }
        }
        fclose(f);
    }
    if (head != NULL) {
        *res = head;
        return 0;
    }
    if (ends_with(node, n, ".svc.cluster.local") || ends_with(node, n, ".svc"))
        return EAI_NONAME;
    return real(node, service, hints, res);
}
"""
COMPILE_TIMEOUT_S = 60

# The patch, as source: written as sitecustomize.py for child processes, exec'd for resolver().
SITECUSTOMIZE = r"""
import os as _os
import socket as _socket

def _odradek_standin_dns(hosts_file):
    state = {"mtime": None, "table": {}}
    real_getaddrinfo = _socket.getaddrinfo
    real_gethostbyname = _socket.gethostbyname
    real_gethostbyname_ex = _socket.gethostbyname_ex

    def table():
        try:
            mtime = _os.stat(hosts_file).st_mtime_ns
        except OSError:
            return state["table"]
        if mtime != state["mtime"]:
            entries = {}
            try:
                with open(hosts_file) as f:
                    for line in f:
                        parts = line.split("#", 1)[0].split()
                        for name in parts[1:]:
                            entries.setdefault(name.lower().rstrip("."), []).append(parts[0])
            except OSError:
                return state["table"]
            state["table"], state["mtime"] = entries, mtime
        return state["table"]

    def lookup(host):
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        if not isinstance(host, str):
            return None
        name = host.lower().rstrip(".")
        addresses = table().get(name)
        if addresses:
            return addresses
        if name.endswith(".svc.cluster.local") or name.endswith(".svc"):
            raise _socket.gaierror(_socket.EAI_NONAME, "Name or service not known")
        return None

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        addresses = lookup(host)
        if addresses is None:
            return real_getaddrinfo(host, port, family, type, proto, flags)
        if family not in (0, _socket.AF_INET, _socket.AF_UNSPEC):
            raise _socket.gaierror(_socket.EAI_ADDRFAMILY, "no address of that family")
        result = []
        for address in addresses:
            for info in real_getaddrinfo(address, port, _socket.AF_INET, type, proto, flags):
                result.append(info)
        return result

    def gethostbyname(host):
        addresses = lookup(host)
        return real_gethostbyname(host) if addresses is None else addresses[0]

    def gethostbyname_ex(host):
        addresses = lookup(host)
        if addresses is None:
            return real_gethostbyname_ex(host)
        return (host, [], list(addresses))

    _socket.getaddrinfo = getaddrinfo
    _socket.gethostbyname = gethostbyname
    _socket.gethostbyname_ex = gethostbyname_ex

    def uninstall():
        _socket.getaddrinfo = real_getaddrinfo
        _socket.gethostbyname = real_gethostbyname
        _socket.gethostbyname_ex = real_gethostbyname_ex

    return uninstall

if _os.environ.get("ODRADEK_STANDIN_HOSTS"):
    _odradek_standin_dns(_os.environ["ODRADEK_STANDIN_HOSTS"])

def _odradek_standin_pod_network(pod_ip):
    real_bind = _socket.socket.bind

    def bind(self, address):
        wildcard = isinstance(address, tuple) and address[0] in ("", "0.0.0.0")
        if self.family == _socket.AF_INET and wildcard:
            address = (pod_ip, *address[1:])
        return real_bind(self, address)

    _socket.socket.bind = bind

if _os.environ.get("ODRADEK_STANDIN_POD_IP"):
    _odradek_standin_pod_network(_os.environ["ODRADEK_STANDIN_POD_IP"])
"""


def install(directory: Path) -> Path:
    """Write ``sitecustomize.py`` into ``directory`` (to be put on PYTHONPATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sitecustomize.py"
    path.write_text(SITECUSTOMIZE.lstrip())
    return path


def build_preload(directory: Path) -> Path | None:
    """Compile ``cluster-dns.so`` into ``directory``; None without a C compiler (or on failure)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "cluster-dns.c"
    library = directory / PRELOAD_LIBRARY
    source.write_text(PRELOAD_C)
    try:
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
            capture_output=True,
            timeout=COMPILE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return library if done.returncode == 0 and library.exists() else None


def write_hosts(path: Path, entries: list[tuple[str, str]]) -> bool:
    """Write (address, name) pairs atomically if they differ from the file's; True if written."""
    text = "".join(f"{address} {name}\n" for address, name in entries)
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return False
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".hosts-")
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide it from a container's non-root user
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


@contextlib.contextmanager
def resolver(hosts_file: Path) -> Iterator[None]:
    """Resolve the cluster names of ``hosts_file`` in this process (for an in-process operator)."""
    namespace: dict[str, object] = {"__name__": "odradek_standin_dns"}
    exec(compile(SITECUSTOMIZE, "<standin-dns>", "exec"), namespace)
    uninstall = namespace["_odradek_standin_dns"](str(hosts_file))  # type: ignore[operator]
    try:
        yield
    finally:
        uninstall()
        assert socket.getaddrinfo is not None
