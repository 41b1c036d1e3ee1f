"""`odradek topics|produce|consume|local restart --rolling`, run as real processes against a real
two-broker cluster (and a closed port), interrupted with Ctrl-C as a user would."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.local import cluster
from odradek.local.cluster import pid_alive

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory whose ``var/local`` holds a running cluster, as after `odradek local up`."""
    root = tmp_path_factory.mktemp("cli")
    # One replica per partition (not `local up`'s default): these tests are about the commands.
    unreplicated = {"default.replication.factor": "1", "min.insync.replicas": "1"}
    state, started = cluster.up(root / "var" / "local", brokers=2, broker_overrides=unreplicated)
    assert started
    yield root
    cluster.down(root / "var" / "local")
    assert not [m for m in state.members if pid_alive(m.pid)]


def odradek(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def ok(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    result = odradek(cwd, *args, stdin=stdin)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


def failed(cwd: Path, *args: str) -> str:
    """Run a command that must fail; returns its stderr."""
    result = odradek(cwd, *args)
    assert result.returncode != 0, f"{args} succeeded: {result.stdout}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def partition_lines(describe_output: str) -> list[dict[str, str]]:
    rows = []
    for line in describe_output.splitlines():
        if line.startswith("\t"):
            rows.append(dict(field.split(": ", 1) for field in line.strip().split("\t")))
    return rows


def test_topic_lifecycle_create_list_describe_alter_delete(workdir):
    bootstrap = cluster.ClusterState.read(workdir / "var" / "local").bootstrap_servers
    created = ok(workdir, "topics", "create", "orders", "--partitions", "3",
                 "--config", "retention.ms=86400000")  # fmt: skip
    assert "Created topic orders." in created.stdout
    assert "orders" in ok(workdir, "topics", "list").stdout.split()
    # An explicit --bootstrap-server works as well as the local cluster's default.
    assert "orders" in ok(workdir, "topics", "list", "--bootstrap-server", bootstrap).stdout

    described = ok(workdir, "topics", "describe", "orders").stdout
    header = described.splitlines()[0]
    assert header.startswith("Topic: orders\tTopicId: ")
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: " in header
    # As kafka-topics.sh: every config not at its default, the topic's own and those the broker
    # was started with (the local cluster names min.insync.replicas=1: STATIC_BROKER_CONFIG).
    configs = header.split("Configs: ", 1)[1].split(",")
    assert sorted(configs) == ["min.insync.replicas=1", "retention.ms=86400000"]
    rows = partition_lines(described)
    assert [row["Partition"] for row in rows] == ["0", "1", "2"]
    assert {row["Leader"] for row in rows} <= {"1", "2"}
    assert all(row["Replicas"] == row["Leader"] == row["Isr"] for row in rows)

    ok(workdir, "topics", "alter", "orders", "--partitions", "5",
       "--config", "segment.bytes=1048576", "--delete-config", "retention.ms")  # fmt: skip
    described = ok(workdir, "topics", "describe", "orders").stdout
    assert "PartitionCount: 5" in described
    assert "Configs: min.insync.replicas=1,segment.bytes=1048576\n" in described
    assert {row["Leader"] for row in partition_lines(described)} == {"1", "2"}

    assert "Deleted topic orders." in ok(workdir, "topics", "delete", "orders").stdout
    assert "orders" not in ok(workdir, "topics", "list").stdout.split()
    ok(workdir, "topics", "delete", "orders", "--if-exists")


def test_generated_records_are_consumed_from_the_beginning(workdir):
    ok(workdir, "topics", "create", "perf", "--partitions", "4")
    produced = ok(workdir, "produce", "perf", "--num-records", "1000", "--record-size", "200")
    summary = produced.stdout.strip().splitlines()[-1]
    assert re.match(
        r"1000 records sent, [\d.]+ records/s \([\d.]+ MB/s\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency",
        summary,
    ), summary

    consumed = ok(workdir, "consume", "perf", "--from-beginning", "--max-messages", "1000",
                  "--timeout-ms", "10000", "--quiet")  # fmt: skip
    assert consumed.stdout == ""
    assert re.search(
        r"^1000 records, 0\.19 MB in [\d.]+ s: [\d.]+ records/s", consumed.stderr, re.M
    )


def test_stdin_lines_come_back_exactly(workdir):
    lines = ["first", "second line, with spaces", "", "naïve ☃", "last"]
    ok(workdir, "topics", "create", "console", "--partitions", "1")
    produced = ok(workdir, "produce", "console", "--from-stdin", stdin="\n".join(lines) + "\n")
    assert produced.stdout.startswith("5 records sent")

    consumed = ok(workdir, "consume", "console", "--from-beginning", "--timeout-ms", "2000")
    assert consumed.stdout.split("\n")[:-1] == lines
    assert consumed.stderr.startswith("5 records, ")


def test_keys_codec_and_acks_reach_the_consumer(workdir):
    ok(workdir, "topics", "create", "keyed", "--partitions", "2")
    ok(workdir, "produce", "keyed", "--num-records", "50", "--key-pattern", "user-{n}",
       "--compression", "lz4", "--acks", "1")  # fmt: skip
    consumed = ok(workdir, "consume", "keyed", "--from-beginning", "--print-metadata",
                  "--max-messages", "50", "--timeout-ms", "10000")  # fmt: skip
    rows = [line.split("\t") for line in consumed.stdout.splitlines()]
    assert sorted(row[2] for row in rows) == sorted(f"user-{n}" for n in range(50))
    assert {row[0] for row in rows} == {"Partition:0", "Partition:1"}


def test_errors_exit_non_zero_with_the_brokers_message(workdir):
    ok(workdir, "topics", "create", "taken")
    assert "already exists" in failed(workdir, "topics", "create", "taken")
    ok(workdir, "topics", "create", "taken", "--if-not-exists")

    error = failed(workdir, "topics", "create", "bad", "--config", "retention.ms=soon")
    assert "Invalid value soon for configuration retention.ms" in error
    error = failed(workdir, "topics", "alter", "taken", "--config", "segment.bytes=big")
    assert "Invalid value big for configuration segment.bytes" in error

    assert "topic 'ghost' does not exist" in failed(workdir, "topics", "describe", "ghost")
    assert "does not exist" in failed(workdir, "topics", "delete", "ghost")
    assert "does not exist" in failed(workdir, "produce", "ghost", "--num-records", "1")
    assert "does not exist" in failed(workdir, "consume", "ghost", "--timeout-ms", "1000")
    assert "has no partition 9" in failed(workdir, "consume", "taken", "--partition", "9")

    ok(workdir, "topics", "create", "tight", "--config", "max.message.bytes=500")
    error = failed(workdir, "produce", "tight", "--num-records", "3", "--record-size", "1000")
    assert "3 records failed: Broker: Message size too large" in error


def test_without_a_cluster_the_user_is_told_what_to_do(tmp_path):
    error = failed(tmp_path, "topics", "list")
    assert "--bootstrap-server" in error
    # Started as `python -m odradek.cli`: the hint names that, which works here as written.
    assert f"`{sys.executable} -m odradek.cli local up`" in error


def test_ctrl_c_during_produce_reports_the_delivered_count_without_a_traceback(workdir):
    ok(workdir, "topics", "create", "interrupted", "--partitions", "2")
    endless = ["produce", "interrupted", "--num-records", "100000000", "--record-size", "100"]
    process = subprocess.Popen(
        [sys.executable, "-m", "odradek.cli", *endless],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        # Mid-stream: once it has printed a progress line with records delivered.
        first = b""
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not re.search(rb"^[1-9]\d* records sent", first, re.M):
            assert time.monotonic() < deadline and process.poll() is None, first
            if select.select([process.stderr], [], [], 1.0)[0]:
                first += os.read(process.stderr.fileno(), 65536)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = (first + stderr).decode()
    assert "Traceback" not in stderr and "SystemError" not in stderr, stderr
    assert process.returncode == 130, stderr
    summary = re.search(r"^(\d+) records sent, ", stdout.decode(), re.M)
    assert summary and int(summary.group(1)) > 0, stdout
    interrupted = re.search(
        r"^odradek produce: interrupted: (\d+) of (\d+) records sent were delivered", stderr, re.M
    )
    assert interrupted and interrupted.group(1) == summary.group(1), stderr
    assert int(interrupted.group(2)) < 100_000_000


def test_an_unreachable_cluster_is_one_line_naming_its_address(tmp_path):
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        host, port = closed.getsockname()
        address = f"{host}:{port}"
        commands = {
            "consume": ["consume", "orders", "--bootstrap-server", address],
            "topics describe": ["topics", "describe", "orders", "--bootstrap-server", address],
        }
        processes = {
            name: subprocess.Popen(
                [sys.executable, "-m", "odradek.cli", *args],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, args in commands.items()
        }
        try:
            results = {
                name: (*p.communicate(timeout=COMMAND_TIMEOUT_S), p.returncode)
                for name, p in processes.items()
            }
        finally:
            for p in processes.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
    for name, (stdout, stderr, code) in results.items():
        assert code == 1 and stdout == "", (name, stdout, stderr)
        lines = stderr.splitlines()
        assert len(lines) == 1, (name, stderr)
        assert lines[0].startswith(f"odradek {name}: error: cannot reach a broker at {address} ")
        assert "local status` to see the local cluster's address" in lines[0]


def test_local_restart_rolling_restarts_each_broker_and_records_survive(workdir):
    ok(workdir, "topics", "create", "rolled", "--partitions", "2")
    ok(workdir, "produce", "rolled", "--num-records", "100", "--acks", "all")
    before = cluster.ClusterState.read(workdir / "var" / "local")
    refused = odradek(workdir, "local", "restart")
    assert refused.returncode == 2 and "only --rolling" in refused.stdout
    result = ok(workdir, "local", "restart", "--rolling")
    for broker_id in (1, 2):
        assert f"broker {broker_id} stopped" in result.stdout
        assert f"broker {broker_id} in-sync" in result.stdout
    assert "2 brokers restarted one at a time" in result.stdout
    after = cluster.ClusterState.read(workdir / "var" / "local")
    pids = {m.id: m.pid for m in before.members if m.role == "broker"}
    assert all(m.pid != pids[m.id] and m.is_ours() for m in after.members if m.role == "broker")
    consumed = ok(workdir, "consume", "rolled", "--from-beginning", "--max-messages", "100",
                  "--timeout-ms", "10000", "--quiet")  # fmt: skip
    assert re.search(r"^100 records", consumed.stderr, re.M), consumed.stderr
