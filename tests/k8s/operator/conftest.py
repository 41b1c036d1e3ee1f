"""The operator's end-to-end tests use the harness's fixtures (tests/support/k8s/fixtures.py)."""

from support.k8s.fixtures import *  # noqa: F403
