"""A service's ``/metrics`` read from its admin port, for tests that check what it counted."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def sample_total(member, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples (a counter's ``_total``, a gauge's value) whose labels
    include ``labels``, as ``member``'s admin port exports them now; 0 if there is none."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != name.removesuffix("_total"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            if all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total
