"""One local SparkSession (``local[2]``) and one replicated cluster for the whole Spark tier.

A session takes 6-12 s to start and about 1.1 GB, so every Spark test shares it. Its JVM is stopped
by PID when the tests end (``spark.stop()`` alone leaves the gateway JVM running until Python
exits). The cluster is ZooKeeper, a controller and three brokers; each test works on topics of its
own (``unique``). Executors import ``odradek.spark`` from the installed package (or PYTHONPATH),
as they would on a real cluster.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from odradek.local.cluster import ClusterState
from support.clusters import running_cluster

SPARK_STOP_TIMEOUT_S = 30

# Every Spark driver this tier starts is short-lived (the shared session, the drivers the kill
# tests start, the demo's job): the JVM's quick compiler alone roughly halves a cold start
# (session 14 s -> 6 s, first query 13 s -> 6 s, on 2 cores). pyspark reads this when it
# launches a JVM, here and in the child processes that inherit the environment.
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    "--driver-java-options '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' pyspark-shell",
)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    data_dir = tmp_path_factory.mktemp("spark-cluster")
    with running_cluster(data_dir, brokers=3) as state:
        yield state


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Spark's Python workers run `python3` from PATH unless told: make them run this venv's.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from odradek.spark import register

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # A Python worker must connect back within this (default 15 s): on a loaded 2-core
        # machine the streaming planner's worker took longer and the query failed at start.
        .config("spark.python.authenticate.socketTimeout", "60s")
        .getOrCreate()
    )
    register(session)
    gateway = session.sparkContext._gateway  # the JVM py4j started for this session
    try:
        yield session
    finally:
        session.stop()
        proc = gateway.proc
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(SPARK_STOP_TIMEOUT_S)
            except Exception:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(SPARK_STOP_TIMEOUT_S)
