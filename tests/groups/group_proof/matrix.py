"""Which client libraries a scenario runs with: one in CI, all three under ``make soak``.

Each scenario names the library CI runs it with, chosen so that CI still runs every library
through the proofs (each in different scenarios); ``ODRADEK_GROUP_LIBRARIES=all`` (set by
``make soak``) runs every scenario with every library. The suite must stay under 30 minutes on
two cores, and each member process of a library costs seconds per scenario.
"""

from __future__ import annotations

import os

__all__ = ["ALL_LIBRARIES", "libraries"]

ALL_LIBRARIES = ("confluent", "kafka-python", "aiokafka")


def libraries(ci: str, *, among: tuple[str, ...] = ALL_LIBRARIES) -> list[str]:
    """``among`` under soak, ``[ci]`` otherwise."""
    if ci not in among:
        raise ValueError(f"{ci} is not one of {among}")
    return list(among) if os.environ.get("ODRADEK_GROUP_LIBRARIES") == "all" else [ci]
