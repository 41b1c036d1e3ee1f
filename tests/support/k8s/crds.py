"""The odradek.io CustomResourceDefinitions the test API server serves.

The chart helper's ``odradek_operator.model.crds`` is the source of truth once it exists (any of
``crds()``, ``all_crds()``, ``CRDS``, ``custom_resource_definitions()``); until then, and as a
fallback, minimal definitions with the same names, scope and subresources (status; scale on
OdradekCluster with specReplicasPath ``.spec.brokers.replicas``). The API server validates
nothing against the schemas.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["odradek_crds"]


def _minimal() -> list[dict[str, Any]]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    cluster = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "odradekclusters.odradek.io"},
        "spec": {
            "group": "odradek.io",
            "scope": "Namespaced",
            "names": {
                "plural": "odradekclusters",
                "singular": "odradekcluster",
                "kind": "OdradekCluster",
                "shortNames": ["odc", "odradek"],
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": schema,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.brokers.replicas",
                            "statusReplicasPath": ".status.brokers.replicas",
                            "labelSelectorPath": ".status.brokers.selector",
                        },
                    },
                }
            ],
        },
    }
    topic = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "odradektopics.odradek.io"},
        "spec": {
            "group": "odradek.io",
            "scope": "Namespaced",
            "names": {
                "plural": "odradektopics",
                "singular": "odradektopic",
                "kind": "OdradekTopic",
                "shortNames": ["odt"],
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": schema,
                    "subresources": {"status": {}},
                }
            ],
        },
    }
    return [cluster, topic]


def odradek_crds() -> list[dict[str, Any]]:
    """The CRDs as dicts: the operator package's own if it has them, else minimal ones."""
    try:
        module = importlib.import_module("odradek_operator.model.crds")
    except ImportError:
        return _minimal()
    for name in ("crds", "all_crds", "custom_resource_definitions", "CRDS"):
        value = getattr(module, name, None)
        if callable(value):
            value = value()
        if isinstance(value, list | tuple) and value and isinstance(value[0], dict):
            return [dict(crd) for crd in value]
    return _minimal()
