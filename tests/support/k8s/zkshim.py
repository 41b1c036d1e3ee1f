"""Stand-ins for the official ``zookeeper`` image's ``docker-entrypoint.sh`` and ``zkServer.sh``.

The kubelet stand-in (kubelet.py) puts executables with these names first on the PATH of a
``zookeeper:*`` container; they run this file. The container's env has the image's ``ZOO_*``
defaults with the image directories (``/conf``, ``/data``, ``/datalog``) already rewritten to the
pod's local directories.

``docker-entrypoint.sh CMD...`` does what the image's entrypoint does (3.8/3.9): when
``$ZOO_CONF_DIR/zoo.cfg`` does not exist, write it from ``ZOO_DATA_DIR``, ``ZOO_DATA_LOG_DIR``,
``ZOO_TICK_TIME``, ``ZOO_INIT_LIMIT``, ``ZOO_SYNC_LIMIT``, ``ZOO_AUTOPURGE_*``,
``ZOO_MAX_CLIENT_CNXNS``, ``ZOO_STANDALONE_ENABLED``, ``ZOO_ADMINSERVER_ENABLED``,
``ZOO_SERVERS`` (default ``server.1=localhost:2888:3888;2181``),
``ZOO_4LW_COMMANDS_WHITELIST``, ``ZOO_CFG_EXTRA``; write ``$ZOO_DATA_DIR/myid`` from
``ZOO_MY_ID`` (default 1) unless it exists; then exec CMD.

``zkServer.sh start-foreground [CONFIG]`` runs Debian's ZooKeeper (``QuorumPeerMain``, like the
image) on CONFIG (default ``$ZOOCFGDIR`` or ``$ZOO_CONF_DIR``/zoo.cfg), through a copy of the
config that binds what a container would bind on its own network namespace to the pod's
address: ``clientPortAddress``, ``secureClientPortAddress`` and ``admin.serverAddress`` (unless
set), and the client part of ``server.N`` lines without an address. The classpath has
netty-codec besides zookeeper.jar (the image's lib/ has it; a TLS port's Netty pipeline needs it
and Debian's zookeeper.jar manifest leaves it out). The JVM resolves cluster names from the
stand-in's hosts file (``-Djdk.net.hosts.file``) with a 1 s address cache. The heap is
``ZK_SERVER_HEAP`` MiB (as zkEnv.sh reads it) capped at 256, 192 without it; ``JVMFLAGS`` and
``SERVER_JVMFLAGS`` are passed on.

A pod's own network namespace would also make its outgoing connections come from the pod's
address; here they would come from 127.0.0.1, and a TLS quorum's host name check of the peer
(ZooKeeper's ``ssl.quorum.hostnameVerification``: the peer's address, looked up, must be named
by its certificate) would see ``localhost``. So the JVM runs with ``pod-source.so`` preloaded
(``build_pod_source``, compiled by the kubelet stand-in with the system's C compiler at start):
its ``connect()`` binds a socket to ``ODRADEK_STANDIN_POD_IP`` first when it goes to another
loopback address (IPv4 or IPv4-mapped IPv6) and is not bound yet. Without a compiler it is
left out, and only a one-server TLS ensemble runs.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

CLASSPATH = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-simple.jar",
    "/usr/share/java/netty-codec.jar",
)
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
HEAP_DEFAULT_MIB = 192
HEAP_MAX_MIB = 256


POD_SOURCE_LIBRARY = "pod-source.so"
POD_SOURCE_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static struct in_addr pod;
static int have_pod = -1;

static int unbound(int fd) {
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &len) != 0) return 0;
    if (local.ss_family == AF_INET) return ((struct sockaddr_in *)&local)->sin_port == 0;
    if (local.ss_family == AF_INET6) return ((struct sockaddr_in6 *)&local)->sin6_port == 0;
    return 0;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    if (have_pod < 0) {
        const char *ip = getenv("ODRADEK_STANDIN_POD_IP");
        have_pod = ip != NULL && inet_pton(AF_INET, ip, &pod) == 1;
        real_connect = dlsym(RTLD_NEXT, "connect");
    }
    if (have_pod && addr != NULL && unbound(fd)) {
        int saved = errno;
        if (addr->sa_family == AF_INET) {
            const struct sockaddr_in *to = (const struct sockaddr_in *)addr;
            if ((ntohl(to->sin_addr.s_addr) >> 24) == 127) {
                struct sockaddr_in local = {.sin_family = AF_INET, .sin_addr = pod};
                bind(fd, (struct sockaddr *)&local, sizeof local);
            }
        } else if (addr->sa_family == AF_INET6) {
            const struct sockaddr_in6 *to = (const struct sockaddr_in6 *)addr;
            if (IN6_IS_ADDR_V4MAPPED(&to->sin6_addr) && to->sin6_addr.s6_addr[12] == 127) {
                struct sockaddr_in6 local = {.sin6_family = AF_INET6};
                local.sin6_addr.s6_addr[10] = 0xff;
                local.sin6_addr.s6_addr[11] = 0xff;
                memcpy(&local.sin6_addr.s6_addr[12], &pod, sizeof pod);
                bind(fd, (struct sockaddr *)&local, sizeof local);
            }
        }
        errno = saved;
    }
    return real_connect(fd, addr, len);
}
"""


def build_pod_source(directory: Path) -> Path | None:
    """Compile ``pod-source.so`` into ``directory``; None without a C compiler (or on failure).
    Called by the kubelet stand-in only: the pods run this file alone (``runpy``), without
    the test support package."""
    from support.k8s.preload import compile_library

    return compile_library(POD_SOURCE_C, directory, POD_SOURCE_LIBRARY)


def entrypoint(here: str, argv: list[str]) -> None:
    env = os.environ
    conf_dir = Path(env.get("ZOO_CONF_DIR", "/conf"))
    data_dir = Path(env.get("ZOO_DATA_DIR", "/data"))
    config = conf_dir / "zoo.cfg"
    if not config.exists():
        conf_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"dataDir={data_dir}",
            f"dataLogDir={env.get('ZOO_DATA_LOG_DIR', '/datalog')}",
            f"tickTime={env.get('ZOO_TICK_TIME', '2000')}",
            f"initLimit={env.get('ZOO_INIT_LIMIT', '5')}",
            f"syncLimit={env.get('ZOO_SYNC_LIMIT', '2')}",
            f"autopurge.snapRetainCount={env.get('ZOO_AUTOPURGE_SNAPRETAINCOUNT', '3')}",
            f"autopurge.purgeInterval={env.get('ZOO_AUTOPURGE_PURGEINTERVAL', '0')}",
            f"maxClientCnxns={env.get('ZOO_MAX_CLIENT_CNXNS', '60')}",
            f"standaloneEnabled={env.get('ZOO_STANDALONE_ENABLED', 'true')}",
            f"admin.enableServer={env.get('ZOO_ADMINSERVER_ENABLED', 'true')}",
        ]
        servers = env.get("ZOO_SERVERS") or "server.1=localhost:2888:3888;2181"
        lines += servers.split()
        if env.get("ZOO_4LW_COMMANDS_WHITELIST"):
            lines.append(f"4lw.commands.whitelist={env['ZOO_4LW_COMMANDS_WHITELIST']}")
        lines += (env.get("ZOO_CFG_EXTRA") or "").split()
        config.write_text("".join(f"{line}\n" for line in lines))
    data_dir.mkdir(parents=True, exist_ok=True)
    myid = data_dir / "myid"
    if not myid.exists():
        myid.write_text(f"{env.get('ZOO_MY_ID', '1')}\n")
    if not argv:
        argv = ["zkServer.sh", "start-foreground"]
    program = argv[0]
    if os.sep not in program:
        candidate = Path(here) / program
        program = str(candidate) if candidate.exists() else shutil.which(program) or program
    os.execv(program, [program, *argv[1:]])


def effective_config(text: str, pod_ip: str) -> str:
    keys = {line.split("=", 1)[0].strip() for line in text.splitlines() if "=" in line}
    out = []
    for line in text.splitlines():
        match = re.match(r"^(server\.\d+\s*=\s*[^;]*);\s*(\d+)\s*$", line)
        if match:
            host = match.group(1).split("=", 1)[1].split(":", 1)[0].strip()
            line = f"{match.group(1)};{host}:{match.group(2)}"
        out.append(line)
    # clientPortAddress without clientPort is refused by ZooKeeper ("clientPortAddress is set
    # but clientPort is not set"): without clientPort the address is the server line's.
    if "clientPort" in keys and "clientPortAddress" not in keys:
        out.append(f"clientPortAddress={pod_ip}")
    if "secureClientPort" in keys and "secureClientPortAddress" not in keys:
        out.append(f"secureClientPortAddress={pod_ip}")
    if "admin.serverAddress" not in keys:
        out.append(f"admin.serverAddress={pod_ip}")
    return "\n".join(out) + "\n"


def zk_server(here: str, argv: list[str]) -> None:
    env = os.environ
    if not argv or argv[0] not in ("start-foreground", "start"):
        sys.exit(f"zkServer.sh stand-in: only start-foreground is supported, not {argv!r}")
    conf_dir = env.get("ZOOCFGDIR") or env.get("ZOO_CONF_DIR", "/conf")
    config = Path(argv[1]) if len(argv) > 1 else Path(conf_dir) / "zoo.cfg"
    pod_ip = env.get("ODRADEK_STANDIN_POD_IP", "127.0.0.1")
    # the pod's /tmp (the kubelet's $TMPDIR): writable under a read-only root
    effective = Path(env.get("TMPDIR") or env.get("HOME", "/tmp")) / "zoo-standin.cfg"
    effective.write_text(effective_config(config.read_text(), pod_ip))
    java = env.get("ODRADEK_STANDIN_JAVA") or shutil.which("java") or "java"
    # zkEnv.sh's ZK_SERVER_HEAP (MiB), capped: a test host runs several servers
    heap = min(int(env.get("ZK_SERVER_HEAP") or HEAP_DEFAULT_MIB), HEAP_MAX_MIB)
    flags = [
        f"-Xmx{heap}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dsun.net.inetaddr.ttl=1",
        "-Dsun.net.inetaddr.negative.ttl=0",
        "-Dnetworkaddress.cache.ttl=1",
        "-Dzookeeper.admin.serverAddress=" + pod_ip,
    ]
    if env.get("TMPDIR"):  # the pod's /tmp volume (the stand-in's /tmp is the host's)
        flags.append(f"-Djava.io.tmpdir={env['TMPDIR']}")
    if env.get("ODRADEK_STANDIN_HOSTS"):
        flags.append(f"-Djdk.net.hosts.file={env['ODRADEK_STANDIN_HOSTS']}")
    flags += (env.get("JVMFLAGS", "") + " " + env.get("SERVER_JVMFLAGS", "")).split()
    argv_java = [java, *flags, "-cp", os.pathsep.join(CLASSPATH), MAIN, str(effective)]
    pod_source = Path(here) / POD_SOURCE_LIBRARY
    if pod_source.exists() and "ODRADEK_STANDIN_POD_IP" in env:
        preload = " ".join(p for p in (str(pod_source), env.get("LD_PRELOAD", "")) if p)
        env["LD_PRELOAD"] = preload
    sys.stdout.flush()
    os.execv(java, argv_java)


def run(shim: str, argv: list[str]) -> None:
    """The entry point of the executables the kubelet stand-in writes (``shim``: their path)."""
    name = os.path.basename(shim)
    if name == "docker-entrypoint.sh":
        entrypoint(os.path.dirname(shim), argv)
    elif name == "zkServer.sh":
        zk_server(os.path.dirname(shim), argv)
    else:
        sys.exit(f"zkshim: unknown name {name}")
