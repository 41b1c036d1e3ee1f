"""Every metric family Odradek registers (broker, controller, Connect, operator) is documented in
docs/observability.md, and every metric documented there is registered."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from odradek.observability import metrics

DOC = Path(__file__).resolve().parents[3] / "docs" / "observability.md"


def exported_name(family) -> str:
    """The name a scrape shows: prometheus_client drops a counter's ``_total`` from its family."""
    return f"{family.name}_total" if family.type == "counter" else family.name


def registered_names() -> set[str]:
    """The families of every ``*_metrics(registry)`` builder in ``odradek.observability.metrics``
    (the one module that defines them) and of the operator's registry."""
    names = set()
    builders = [
        function
        for name, function in inspect.getmembers(metrics, inspect.isfunction)
        if name.endswith("_metrics") and function.__module__ == metrics.__name__
    ]
    assert len(builders) >= 6, builders
    for build in builders:
        registry = CollectorRegistry()
        build(registry)
        names |= {exported_name(f) for f in registry.collect()}
    from odradek_operator import metrics as operator_metrics

    names |= {exported_name(f) for f in operator_metrics.REGISTRY.collect()}
    return names


def documented_names() -> set[str]:
    rows = re.findall(r"^\| `(odradek_[a-z0-9_]+)` \|", DOC.read_text(encoding="utf-8"), re.M)
    return set(rows)


def test_every_registered_metric_family_is_documented():
    text = DOC.read_text(encoding="utf-8")
    assert "| `process_*` |" in text  # prometheus_client's process collector, as one row
    missing = sorted(n for n in registered_names() - documented_names() if n[:8] != "process_")
    assert not missing, f"registered but not in docs/observability.md: {missing}"


def test_every_documented_metric_is_registered():
    unknown = sorted(documented_names() - registered_names())
    assert not unknown, f"in docs/observability.md but registered nowhere: {unknown}"
