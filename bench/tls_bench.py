"""What TLS costs (issue 22): 1 KiB records produced and consumed over an SSL listener, next to
the same broker's PLAINTEXT listener, driven by confluent-kafka.

One local cluster (ZooKeeper, a controller, one broker) whose broker has both listeners; the
certificates are made for the run (trustme, a test dependency: ``pip install -e '.[test]'``).
Each round produces ``--records`` records of 1 KiB (acks=1, no compression, linger.ms 5) to a
1-partition topic of its own over one listener, then reads them back from offset 0 over the
same listener; the two listeners take turns and the order flips each round; the best round of
each is shown. The phases and their clocks are ``cluster_bench``'s (``produce_phase``,
``consume_phase``): produce from the first ``produce()`` to the end of ``flush()``, consume from
``assign()`` to the last record. Broker CPU seconds per million records come from
``/proc/<pid>/stat``.

On plaintext a fetch answer's records go out with ``sendfile``; on TLS they are read from the
segment and encrypted in the broker's process, so consume is where TLS costs most. The target
of issue 22 is TLS throughput at least 0.5 of plaintext, produce and consume.

Usage: ``.venv/bin/python bench/tls_bench.py [--records 300000] [--repeat 2] [--json PATH]``
(``make bench-tls``). Every process started is stopped by pid at the end, on error too; every
phase is bounded by ``--phase-timeout``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_bench import (  # noqa: E402
    REPO_ROOT,
    Broker,
    consume_phase,
    create_topic,
    make_pool,
    produce_phase,
    run_header,
)

try:
    import trustme
except ImportError:  # pragma: no cover - the test extra installs it
    raise SystemExit("trustme is missing: pip install -e '.[test]'") from None

RECORD_BYTES = 1024
TARGET = 0.5


class Listener(Broker):
    """One listener of the cluster's broker, seen as a target of its own (same process)."""

    def __init__(self, name: str, bootstrap: str, pid: int, client: dict[str, object]):
        self.name, self.bootstrap, self.pid, self.client = name, bootstrap, pid, client

    def describe(self) -> str:
        return f"{self.name} listener {self.bootstrap} of broker pid {self.pid}"


def start_cluster(data_dir: Path) -> tuple[Listener, Listener]:
    from odradek.listeners import read_listeners_file
    from odradek.local import cluster

    ca = trustme.CA()
    keystore, trust = data_dir / "broker.pem", data_dir / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(keystore)
    )
    ca.cert_pem.write_to_path(str(trust))
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    state, _ = cluster.up(data_dir / "cluster", brokers=1, broker_overrides=overrides)
    broker = next(m for m in state.members if m.role == "broker")
    bound = read_listeners_file(Path(broker.data_dir) / "listeners.json")
    if bound is None:
        raise RuntimeError("the broker wrote no listeners.json")
    tls_client = {"security.protocol": "SSL", "ssl.ca.location": str(trust)}
    return (
        Listener("plaintext", bound[0]["PLAINTEXT"], broker.pid, {}),
        Listener("tls", bound[0]["SSL"], broker.pid, tls_client),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000, help="per phase (default 300k)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--phase-timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="write the figures there too")
    args = parser.parse_args(argv)

    print(run_header())
    pool = make_pool(RECORD_BYTES, seed=22)
    best: dict[tuple[str, str], object] = {}
    (REPO_ROOT / "var").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tls-bench-", dir=REPO_ROOT / "var"))
    from odradek.local import cluster

    try:
        plaintext, tls = start_cluster(work)
        for round_ in range(args.repeat):
            order = (plaintext, tls) if round_ % 2 == 0 else (tls, plaintext)
            for target in order:
                topic = f"tls-bench-{target.name}-{round_}"
                create_topic(target, topic, args.phase_timeout)
                client_cpu = time.process_time()
                produced = produce_phase(
                    target, topic, pool, args.records, "none", args.phase_timeout
                )
                client_cpu, started = time.process_time() - client_cpu, time.process_time()
                consumed = consume_phase(
                    target, topic, RECORD_BYTES, "none", produced.records, args.phase_timeout
                )
                clients = (client_cpu, time.process_time() - started)
                for phase, cpu_s in zip((produced, consumed), clients, strict=True):
                    print(
                        f"round {round_ + 1} {target.name:9} {phase.kind:7} "
                        f"{phase.records_s:12,.0f} records/s {phase.mb_s:7.1f} MB/s "
                        f"broker CPU {phase.cpu_s_per_m:5.2f} s/M "
                        f"client CPU {cpu_s / max(phase.records, 1) * 1e6:5.2f} s/M"
                        + (" (timed out)" if phase.timed_out else "")
                    )
                    key = (target.name, phase.kind)
                    if key not in best or phase.records_s > best[key].records_s:
                        best[key] = phase
    finally:
        cluster.down(work / "cluster")
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"best of {args.repeat}, 1 KiB records, one partition:")
    ratios = {}
    for kind in ("produce", "consume"):
        plain, secure = best[("plaintext", kind)], best[("tls", kind)]
        ratios[kind] = secure.records_s / plain.records_s if plain.records_s else 0.0
        print(
            f"  {kind:7} plaintext {plain.records_s:10,.0f}/s ({plain.cpu_s_per_m:.2f} s/M)  "
            f"tls {secure.records_s:10,.0f}/s ({secure.cpu_s_per_m:.2f} s/M)  "
            f"tls/plaintext {ratios[kind]:.2f}  "
            + ("met" if ratios[kind] >= TARGET else "NOT met")
            + f" (target >= {TARGET})"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "header": run_header(),
                    "phases": [p.as_dict() for p in best.values()],
                    "ratios": ratios,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
