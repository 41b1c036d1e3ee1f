"""The operator's end-to-end tests use the harness's fixtures (tests/support/k8s/fixtures.py).

The operator's periodic passes are shortened for them (read when the handlers are imported)."""

import os

os.environ.setdefault("ODRADEK_OPERATOR_CLUSTER_INTERVAL_S", "5")
os.environ.setdefault("ODRADEK_OPERATOR_TOPIC_INTERVAL_S", "3")
os.environ.setdefault("ODRADEK_OPERATOR_CONNECT_INTERVAL_S", "3")
os.environ.setdefault("ODRADEK_OPERATOR_CONNECTOR_INTERVAL_S", "2")
os.environ.setdefault("ODRADEK_OPERATOR_USER_INTERVAL_S", "3")

from support.k8s.fixtures import *  # noqa: E402, F403
