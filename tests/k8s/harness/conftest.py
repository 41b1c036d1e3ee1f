"""The harness's own tests share its fixtures (tests/support/k8s/fixtures.py)."""

from support.k8s.fixtures import *  # noqa: F403
