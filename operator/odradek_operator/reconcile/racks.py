"""The brokers' racks from a node label (``spec.brokers.rack.topologyKey``).

Kubernetes has no downward API for node labels. So on every pass, each broker pod that is
scheduled (``spec.nodeName``) and has no ``odradek.io/rack`` annotation yet gets its node's
label copied there; the kubelet then writes the annotation into the pod's downward API file,
which the broker waits for at start (``odradek.broker.rack.file``, model/brokers.py). A pod is
annotated once: it never changes node, and a restarted broker is a new pod. Nodes are
cluster-scoped, so the operator needs ``get`` on nodes (the chart's ClusterRole).

A pod whose node lacks the label, or whose node the operator cannot read, is reported in words
(the pass waits with that message in the status); its broker keeps waiting for the file until
the label appears or ``odradek.broker.rack.file.timeout.ms`` passes (then it exits, and its
container is restarted to wait again).

Called from the cluster pass only, one call at a time per cluster.
"""

from __future__ import annotations

from odradek_operator import names
from odradek_operator.kube import Kube, KubeError

__all__ = ["RACK", "annotate_racks"]

RACK = names.RACK_ANNOTATION


async def annotate_racks(kube: Kube, namespace: str, cluster: str, topology_key: str) -> list[str]:
    """Annotate every scheduled broker pod lacking its rack; one message per pod that waits."""
    pods = await kube.list("Pod", namespace, names.selector_labels(cluster, names.Component.BROKER))
    nodes: dict[str, dict | None] = {}
    waiting: list[str] = []
    for pod in pods:
        meta = pod["metadata"]
        node_name = (pod.get("spec") or {}).get("nodeName")
        if meta.get("deletionTimestamp") or RACK in (meta.get("annotations") or {}):
            continue
        if not node_name:
            continue  # not scheduled yet: a later pass
        if node_name not in nodes:
            try:
                nodes[node_name] = await kube.get("Node", node_name, None)
            except KubeError as e:
                waiting.append(
                    f"pod {meta['name']}: cannot read node {node_name} ({e}); the operator "
                    "needs get on nodes (the chart's ClusterRole)"
                )
                continue
        node = nodes[node_name]
        labels = {} if node is None else node.get("metadata", {}).get("labels") or {}
        rack = labels.get(topology_key)
        if not rack:
            where = "is gone" if node is None else f"has no label {topology_key}"
            waiting.append(
                f"pod {meta['name']}: node {node_name} {where}, so its broker has no rack "
                "(spec.brokers.rack) and waits"
            )
            continue
        patch = {"metadata": {"annotations": {RACK: rack}}}
        try:
            await kube.merge_patch("Pod", meta["name"], namespace, patch)
        except KubeError as e:
            if not e.not_found:  # a pod deleted meanwhile: its successor is the next pass's
                raise
    return waiting
