"""``odradek demo`` start to finish on the shared cluster, its last step included: the batch Spark
job over the records this run produced, its summary and rows printed, its Parquet written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

RECORDS = 3000
DEMO_TIMEOUT_S = 480
STOP_TIMEOUT_S = 30


def test_demo_ends_with_the_spark_batch_job(spark_cluster):
    data_dir = Path(spark_cluster.data_dir)  # the demo finds this cluster running and uses it
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek.cli",
            "demo",
            "--data-dir",
            str(data_dir),
            "--records",
            str(RECORDS),
            "--record-size",
            "100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = demo.communicate(timeout=DEMO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGINT: the demo stops the Spark job's own process group on the way out.
        os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.communicate(timeout=STOP_TIMEOUT_S)
        finally:
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.wait(STOP_TIMEOUT_S)
        raise
    assert demo.returncode == 0, out + err[-3000:]
    assert "cluster found running" in out
    assert f"every record came back: {RECORDS} records" in out
    # Only this run's records, whatever an earlier run left in the topic: 1000 keys, each with
    # RECORDS / 1000 records (one hour, or two if the run crossed one).
    assert f"batch_key_stats: {RECORDS} records of topic demo-events" in out
    assert "|hour" in out and "key_text" in out and "key-" in out
    assert "Spark job done in" in out
    output = data_dir / "spark" / "demo-events-key-stats"
    assert list(output.glob("date=*/*.parquet"))
