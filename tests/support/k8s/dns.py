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
(librdkafka in confluent_kafka) resolve by themselves and do not see it: in the stand-in's pods
a preloaded ``getaddrinfo`` reads the same hosts file for them (libc_dns.py); in the test
process they do not resolve cluster names.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SITECUSTOMIZE", "install", "resolver", "write_hosts"]

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
