"""cluster-dns.so (dns.py) gives C libraries the stand-in's cluster names: getaddrinfo answers a
name of the hosts table with all its addresses (IPv4, or mapped for AF_INET6), fails an unknown
.svc name like NXDOMAIN, passes other names on, and librdkafka connects where the table says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.k8s import dns

PROBE = r"""
import socket, sys
print(sorted({i[4][0] for i in socket.getaddrinfo("b-0.b.ns.svc.cluster.local", 9092)}))
print(socket.getaddrinfo("x.ns.svc.", 1, socket.AF_INET6)[0][4][0])
try:
    socket.getaddrinfo("nope.ns.svc.cluster.local", 1)
    print("resolved")
except socket.gaierror:
    print("nxdomain")
print(socket.getaddrinfo("localhost", 1, socket.AF_INET)[0][4][0])
sys.stdout.flush()
import confluent_kafka
producer = confluent_kafka.Producer(
    {"bootstrap.servers": "b-0.b.ns.svc.cluster.local:1", "debug": "broker",
     "socket.connection.setup.timeout.ms": 1000}
)
producer.poll(1.5)
"""


@pytest.fixture(scope="module")
def preload(tmp_path_factory) -> Path:
    library = dns.build_preload(tmp_path_factory.mktemp("dns"))
    if library is None:
        pytest.fail("no C compiler: the stand-in needs one (gcc is part of the build machine)")
    return library


def test_the_table_answers_c_lookups(tmp_path: Path, preload: Path) -> None:
    hosts = tmp_path / "hosts"
    dns.write_hosts(
        hosts,
        [
            ("127.0.5.1", "b-0.b.ns.svc.cluster.local"),
            ("127.0.5.2", "b-0.b.ns.svc.cluster.local"),
            ("127.0.5.3", "x.ns.svc"),
        ],
    )
    env = {**os.environ, "LD_PRELOAD": str(preload), "ODRADEK_STANDIN_HOSTS": str(hosts)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == [
        "['127.0.5.1', '127.0.5.2']",
        "::ffff:127.0.5.3",
        "nxdomain",
        "127.0.0.1",
    ]
    assert "Connecting to ipv4#127.0.5." in done.stderr  # librdkafka's own lookup (debug log)
    # Without the preload, the same process does not see the table (the positive control).
    env.pop("LD_PRELOAD")
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "gaierror" in done.stderr
