"""What the job scripts in ``spark/`` share: their session, the ``--kafka KEY=VALUE`` settings and
``--command-config FILE``.

``--command-config`` takes a Kafka client properties file as Kafka's tools do, say the
``client.properties`` of an OdradekUser's Secret mounted in the driver and executor pods
(docs/kubernetes.md): each key becomes the option ``kafka.<key>``, so the data source maps its
Java security keys as it maps options written by hand (docs/spark.md); ``--kafka`` and
``--bootstrap-servers`` win over the file.

A job runs alone (``python spark/<job>.py``: a ``local[2]`` session unless ``--master`` says
otherwise) or under ``spark-submit`` (the JVM is already running and gave the master, so none is
set here: setting one would override ``--master k8s://...``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "command_config_options", "kafka_options", "start_session"]

DEFAULT_MASTER = "local[2]"


def start_session(
    app_name: str,
    master: str | None,
    conf: Mapping[str, str] = {},
    *,
    local_conf: Mapping[str, str] = {},
) -> SparkSession:
    """The job's session; ``local_conf`` only with a local master, then ``conf``, so the caller's
    settings win."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    master = master or (None if "PYSPARK_GATEWAY_PORT" in os.environ else DEFAULT_MASTER)
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers run `python3` from PATH unless told; this interpreter has the package.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.ui.enabled", "false").config(
            "spark.ui.showConsoleProgress", "false"
        )
        for key, value in local_conf.items():
            builder = builder.config(key, value)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def command_config_options(path: str | None) -> dict[str, str]:
    """``--command-config FILE`` as ``kafka.*`` options (module docstring); {} without one.
    Raises ``InvalidConfigError`` naming the file and line of a malformed entry."""
    if path is None:
        return {}
    from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
    from odradek.errors import InvalidConfigError

    file = Path(path)
    if file.stat().st_size > PROPERTIES_FILE_MAX_BYTES:
        raise InvalidConfigError(f"{path}: larger than {PROPERTIES_FILE_MAX_BYTES} bytes")
    return {f"kafka.{p.key}": p.value for p in parse_properties(file.read_text("utf-8"), path)}


def kafka_options(settings: Iterable[str]) -> dict[str, str]:
    """``["acks=all"]`` (checked as KEY=VALUE by the job) -> ``{"kafka.acks": "all"}``."""
    options = {}
    for setting in settings:
        key, value = setting.split("=", 1)
        options[f"kafka.{key.strip()}"] = value
    return options
