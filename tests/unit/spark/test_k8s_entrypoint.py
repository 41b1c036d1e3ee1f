"""spark/k8s/entrypoint.sh (the Spark image's ENTRYPOINT) turns Spark's pod arguments and SPARK_*
variables into the driver's spark-submit and the executor's java command, as Spark's own script
does; a stand-in Spark home and java print what they were run with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ENTRYPOINT = Path(__file__).resolve().parents[3] / "spark" / "k8s" / "entrypoint.sh"
PRINT_ARGS = '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n'


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, str]:
    spark_home = tmp_path / "spark"
    java_home = tmp_path / "java"
    for tool in (spark_home / "bin" / "spark-submit", java_home / "bin" / "java"):
        tool.parent.mkdir(parents=True)
        tool.write_text(PRINT_ARGS)
        tool.chmod(0o755)
    return {
        "PATH": os.environ["PATH"],
        "SPARK_HOME": str(spark_home),
        "JAVA_HOME": str(java_home),
    }


def run(env: dict[str, str], *args: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [str(ENTRYPOINT), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_driver_runs_spark_submit_in_client_mode_on_the_pod_address(fake, tmp_path):
    env = {**fake, "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3"}
    argv = run(env, "driver", "--properties-file", "/opt/spark/conf/spark.properties", "x.py",
               "--topic", "a b", cwd=tmp_path)  # fmt: skip
    assert argv == [
        "--conf", "spark.driver.bindAddress=10.1.2.3",
        "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=10.1.2.3",
        "--deploy-mode", "client",
        "--properties-file", "/opt/spark/conf/spark.properties", "x.py", "--topic", "a b",
    ]  # fmt: skip


def test_executor_runs_the_backend_with_options_in_numeric_order(fake, tmp_path):
    env = {
        **fake,
        "SPARK_CONF_DIR": "/opt/spark/conf",
        "SPARK_EXECUTOR_MEMORY": "512m",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-abc",
        "SPARK_EXECUTOR_POD_IP": "10.1.2.4",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "app-exec-3",
        **{f"SPARK_JAVA_OPT_{i}": f"-Dopt{i}=with space" for i in range(12)},
    }
    argv = run(env, "executor", cwd=tmp_path)
    assert argv[:12] == [f"-Dopt{i}=with space" for i in range(12)]  # 10 after 9, not after 1
    assert argv[12:] == [
        "-Xms512m", "-Xmx512m",
        "-cp", f"/opt/spark/conf:{fake['SPARK_HOME']}/jars/*:{tmp_path}",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", "spark://CoarseGrainedScheduler@driver-svc:7078",
        "--executor-id", "3",
        "--cores", "2",
        "--app-id", "spark-abc",
        "--hostname", "10.1.2.4",
        "--resourceProfileId", "0",
        "--podName", "app-exec-3",
    ]  # fmt: skip


def test_executor_without_spark_variables_fails_naming_one(fake, tmp_path):
    done = subprocess.run(
        [str(ENTRYPOINT), "executor"], env=fake, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode != 0 and "SPARK_EXECUTOR_MEMORY" in done.stderr


def test_other_commands_pass_through(fake, tmp_path):
    assert run(fake, "echo", "spark", cwd=tmp_path) == ["spark"]
