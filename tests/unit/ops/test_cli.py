"""`odradek reassign` and `odradek cluster` refuse bad arguments and files with one clear line
(exit 2 from argparse, 1 from the command), before or without touching a cluster."""

from __future__ import annotations

import socket

import pytest

from odradek.cli import main
from odradek.commands.reassign import broker_list, rollback_path, throttle
from odradek.common.partitions import TopicPartition


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["reassign", "plan", "--topics", "t"],  # no --broker-list
        ["reassign", "plan", "--broker-list", "1,2"],  # no topics
        [
            "reassign",
            "plan",
            "--topics",
            "t",
            "--topics-to-move-json-file",
            "f",
            "--broker-list",
            "1",
        ],
        ["reassign", "plan", "--topics", "t", "--broker-list", "1,x"],
        ["reassign", "plan", "--topics", "t", "--broker-list", "1,1"],
        ["reassign", "execute"],  # no --reassignment-json-file
        ["reassign", "execute", "--reassignment-json-file", "f", "--throttle", "0"],
        ["reassign", "execute", "--reassignment-json-file", "f", "--throttle", "10MB"],
        ["reassign", "status", "--reassignment-json-file", "f", "--timeout", "-1"],
        ["cluster", "drain"],  # no --broker
        ["cluster", "drain", "--broker", "two"],
        ["cluster", "rebalance", "--throttle", "-5"],
    ],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_argument_types():
    assert broker_list("4,5,6") == [4, 5, 6]
    assert throttle("50000000") == 50_000_000
    assert str(rollback_path(__import__("pathlib").Path("d/plan.json"))) == "d/plan.rollback.json"


def test_missing_plan_file_is_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    argv = ["reassign", "cancel", "--reassignment-json-file", str(missing)]
    assert main([*argv, "--bootstrap-server", f"127.0.0.1:{closed_port()}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("odradek reassign cancel: error: cannot read") and str(missing) in err


def test_malformed_plan_file_is_refused_before_connecting(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}')
    argv = ["reassign", "status", "--reassignment-json-file", str(plan)]
    assert main([*argv, "--bootstrap-server", f"127.0.0.1:{closed_port()}"]) == 1
    err = capsys.readouterr().err
    assert "may not contain duplicate entries" in err
    assert "[INVALID_REPLICA_ASSIGNMENT]" in err


def test_malformed_topics_file_is_refused(tmp_path, capsys):
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": []}')
    argv = ["reassign", "plan", "--topics-to-move-json-file", str(topics), "--broker-list", "1"]
    assert main([*argv, "--bootstrap-server", f"127.0.0.1:{closed_port()}"]) == 1
    assert '"topics" must be a non-empty list' in capsys.readouterr().err


def test_unreachable_cluster_is_one_line(capsys):
    argv = ["cluster", "rebalance", "--dry-run", "--bootstrap-server", f"127.0.0.1:{closed_port()}"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("odradek cluster rebalance: error: cannot connect to 127.0.0.1:")
    assert "[NETWORK_EXCEPTION]" in err


def test_malformed_bootstrap_is_one_line(capsys):
    assert main(["cluster", "drain", "--broker", "1", "--bootstrap-server", "nohostport"]) == 1
    assert "is not HOST:PORT" in capsys.readouterr().err


def test_no_cluster_anywhere_says_how_to_name_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no var/local here
    assert main(["cluster", "rebalance", "--dry-run"]) == 1
    assert "no --bootstrap-server given" in capsys.readouterr().err


def test_progress_display_shows_bytes_and_percent(capsys):
    from odradek import ops
    from odradek.commands.reassign import print_plan, print_report

    move = ops.PartitionMove("orders", 2, (1, 4), (3, 4))
    other = ops.PartitionMove("orders", 3, (2, 1), (2, 3))
    view = ops.ClusterView.build({("orders", 2): [1, 4], ("orders", 3): [2, 1]}, [1, 2, 3, 4])
    sizes = {TopicPartition("orders", 2): 4 * 1024 * 1024, ("orders", 3): 1024}
    print_plan(ops.PreparedPlan(view, ops.Plan((move, other)), sizes))
    out = capsys.readouterr().out
    assert "orders-2: [1,4] -> [3,4]  (+3 -1)" in out
    assert "2 partitions change: 2 replica moves, 0 leader-only reorders; 4.0 MiB to copy" in out

    progress = ops.PartitionProgress(
        move, ops.PartitionState.IN_PROGRESS, (1, 4, 3), (3,), 1024 * 1024, 4 * 1024 * 1024
    )
    done = ops.PartitionProgress(other, ops.PartitionState.DONE, (2, 3), (), 1024, 1024)
    report = ops.StatusReport((progress, done))
    assert progress.percent == 25.0 and not report.finished
    print_report(report)
    out = capsys.readouterr().out
    assert "orders-2: in progress, adding [3]: 1.0 MiB / 4.0 MiB (25.0%)" in out
    assert "orders-3: done [2,3]" in out
    assert "1 of 2 partitions finished; 1.0 MiB of 4.0 MiB copied" in out
