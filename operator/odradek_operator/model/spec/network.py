"""``networkPolicyPeers`` (Strimzi's name and shape: a list of networking.k8s.io/v1
NetworkPolicyPeer, ``podSelector``, ``namespaceSelector``, ``ipBlock``), checked as the API server
checks them (label selectors, CIDRs), so a NetworkPolicy the operator writes from them is never
refused. The list's bound and the selector operators are the CRD's.

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from odradek_operator import names
from odradek_operator.model.spec.readers import SpecError, _mapping, _only, crd_enum, crd_fact

__all__ = [
    "NETWORK_POLICY_PEERS_MAX",
    "network_policy_peers",
]

_PEERS = "spec.listeners[].networkPolicyPeers"
NETWORK_POLICY_PEERS_MAX = crd_fact(names.CLUSTER_KIND, _PEERS, "maxItems")
_SELECTOR_OPERATORS = crd_enum(
    names.CLUSTER_KIND, f"{_PEERS}[].podSelector.matchExpressions[].operator"
)
# A label key: an optional DNS-subdomain prefix and "/", then a name (Kubernetes' qualified name).
_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def network_policy_peers(value: object, where: str) -> tuple[Mapping[str, Any], ...] | None:
    """A list of NetworkPolicyPeer as the API server accepts them; None when absent. An empty
    list is refused: in a NetworkPolicy it would mean "from anywhere", surely not what was
    meant by narrowing."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise SpecError(where, "expected a non-empty list of NetworkPolicyPeer")
    if len(value) > NETWORK_POLICY_PEERS_MAX:
        raise SpecError(where, f"{len(value)} peers; at most {NETWORK_POLICY_PEERS_MAX}")
    peers = []
    for i, item in enumerate(value):
        path = f"{where}[{i}]"
        peer = _mapping(item, path)
        _only(peer, path, ("podSelector", "namespaceSelector", "ipBlock"))
        if not peer:
            raise SpecError(path, "a peer needs podSelector, namespaceSelector or ipBlock")
        if "ipBlock" in peer and len(peer) > 1:
            raise SpecError(path, "ipBlock cannot be combined with a selector")
        for key in ("podSelector", "namespaceSelector"):
            if key in peer:
                _label_selector(peer[key], f"{path}.{key}")
        if "ipBlock" in peer:
            _ip_block(peer["ipBlock"], f"{path}.ipBlock")
        peers.append(dict(peer))
    return tuple(peers)


def _label_selector(value: object, where: str) -> None:
    selector = _mapping(value, where)
    _only(selector, where, ("matchLabels", "matchExpressions"))
    for key, label in _mapping(selector.get("matchLabels"), f"{where}.matchLabels").items():
        _label_pair(key, label, f"{where}.matchLabels[{key}]")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SpecError(f"{where}.matchExpressions", "expected a list")
    for i, item in enumerate(expressions):
        path = f"{where}.matchExpressions[{i}]"
        expression = _mapping(item, path)
        _only(expression, path, ("key", "operator", "values"))
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if operator not in _SELECTOR_OPERATORS:
            raise SpecError(f"{path}.operator", f"{operator!r}: one of {_SELECTOR_OPERATORS}")
        if not isinstance(values, list):
            raise SpecError(f"{path}.values", "expected a list")
        if (operator in ("In", "NotIn")) != bool(values):
            raise SpecError(f"{path}.values", f"{operator} takes values only with In and NotIn")
        _label_pair(key, "", path)
        for value_ in values:
            _label_pair(key, value_, f"{path}.values")


def _label_pair(key: object, value: object, where: str) -> None:
    if not isinstance(key, str) or len(key) > 316 or not _LABEL_KEY.fullmatch(key):
        raise SpecError(where, f"{key!r} is not a label key")
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise SpecError(where, f"{value!r} is not a label value")


def _ip_block(value: object, where: str) -> None:
    block = _mapping(value, where)
    _only(block, where, ("cidr", "except"))
    try:
        cidr = ipaddress.ip_network(str(block.get("cidr")), strict=False)
        excepted = [ipaddress.ip_network(str(e), strict=False) for e in block.get("except") or []]
    except ValueError as e:
        raise SpecError(where, f"not a CIDR: {e}") from e
    for e in excepted:
        if e.version != cidr.version or not e.subnet_of(cidr):  # type: ignore[arg-type]
            raise SpecError(f"{where}.except", f"{e} is not inside {cidr}")
