"""Every default, bound and enum an odradek.io CRD states is the one the operator's spec readers
apply: the test walks the CRDs' schemas, so a field added to a CRD is checked without a line here
(issue 21 item 8 found hand-restated bounds drifted: 1000 vs 1001 brokers, a replication factor
of 1000 vs 32767; the readers now look them up, model/spec/readers.py).

For each field of ``metadata`` and ``spec`` (status is the operator's own output) the walk finds:

- ``default``: reading the resource without the field gives what reading it with the CRD's
  default gives (the API server writes the default; kmock and old resources do not);
- ``minimum`` / ``maximum``: one past a bound is refused, naming the field and the CRD's bounds,
  and the bound itself is not refused as out of range;
- ``enum``: each listed value is not refused at that field, a value not listed is;
- ``maxItems`` / ``minItems`` / ``maxLength``: one too many (too few) is refused, naming the
  field.

What the operator leaves to the API server on purpose is in ``CRD_ONLY`` with the reason; an
entry that no longer holds fails too. Patterns and ``minLength`` are not walked: the operator's
readers refuse an empty string anyway, and its quantity and label checks are the API server's
own grammar, which the CRD's patterns only approximate.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from odradek_operator.model import connect, crds, users
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.model.spec.topic import TopicSpec

READERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "OdradekCluster": ClusterSpec.from_resource,
    "OdradekTopic": TopicSpec.from_resource,
    "OdradekConnect": connect.ConnectSpec.from_resource,
    "OdradekConnector": connect.ConnectorSpec.from_resource,
    "OdradekUser": users.UserSpec.from_resource,
}


def _resource(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"namespace": "data", "uid": "u-1", **metadata}
    return {"apiVersion": crds.API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _selector(key: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


# A resource of each kind the operator accepts, with one entry in every list the walk reaches
# (a field of a list's items is set in the first entry).
MINIMAL = {
    "OdradekCluster": _resource(
        "OdradekCluster",
        {"name": "demo"},
        {
            "brokers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "10Gi"}]}},
            "listeners": [
                {
                    "name": "secure",
                    "port": 9443,
                    "tls": True,
                    "authentication": {"type": "scram-sha-512"},
                    "networkPolicyPeers": [
                        {"podSelector": _selector("app"), "namespaceSelector": _selector("team")}
                    ],
                }
            ],
            "authorization": {"type": "simple", "superUsers": ["User:admin"]},
        },
    ),
    "OdradekTopic": _resource(
        "OdradekTopic",
        {"name": "orders"},
        {"cluster": "demo", "partitions": 3, "replicationFactor": 3},
    ),
    "OdradekConnect": _resource(
        "OdradekConnect",
        {"name": "sink"},
        {
            "clusterRef": "demo",
            "authentication": {
                "type": "scram-sha-512",
                "username": "connect",
                "passwordSecret": {"secretName": "connect", "password": "password"},
            },
            "tls": {"trustedCertificates": [{"secretName": "ca", "certificate": "ca.crt"}]},
        },
    ),
    "OdradekConnector": _resource(
        "OdradekConnector",
        {"name": "files"},
        {"connectRef": "sink", "class": "FileStreamSource"},
    ),
    "OdradekUser": _resource(
        "OdradekUser",
        {"name": "alice", "labels": {"odradek.io/cluster": "demo"}},
        {
            "authentication": {"type": "scram-sha-512"},
            "authorization": {
                "type": "simple",
                "acls": [{"resource": {"type": "topic", "name": "orders"}, "operations": ["All"]}],
            },
            "quotas": {
                "producerByteRate": 1024,
                "consumerByteRate": 1024,
                "requestPercentage": 50,
                "controllerMutationRate": 1,
            },
        },
    ),
}

# (kind, path, keyword) the operator does not check itself, and why.
CRD_ONLY = {
    ("OdradekTopic", "spec.cluster", "maxLength"): (
        "a reference: a name no cluster can carry finds no cluster (status says so)"
    ),
    ("OdradekConnect", "spec.clusterRef", "maxLength"): (
        "a reference: a name no cluster can carry finds no cluster (status says so)"
    ),
    ("OdradekConnector", "spec.connectRef", "maxLength"): (
        "a reference: a name no OdradekConnect can carry finds none (status says so)"
    ),
    ("OdradekUser", "metadata.name", "maxLength"): (
        "the API server bounds every object's name at 253 already (a DNS subdomain)"
    ),
    ("OdradekUser", "spec.authorization.acls[].operations", "maxItems"): (
        "a repeated operation is one ACL: the bound only caps the list's size"
    ),
}
# Fields whose legal values depend on another: (kind, path) -> (that field, values to try); each of
# the CRD's values must be accepted with one of them.
DEPENDS_ON = {
    ("OdradekUser", "spec.authorization.acls[].operations[]"): (
        "spec.authorization.acls[].resource",  # each resource type takes only its operations
        [
            {"type": "topic", "name": "orders"},
            {"type": "group", "name": "readers"},
            {"type": "cluster"},
            {"type": "transactionalId", "name": "orders-tx"},
        ],
    ),
}
WALKED = ("default", "minimum", "maximum", "enum", "maxItems", "minItems", "maxLength")


def walk(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, schema node) of every field below ``node``; ``[]`` steps into a list's items."""
    if path:
        yield path, node
    for name, sub in node.get("properties", {}).items():
        if path or name in ("metadata", "spec"):
            yield from walk(sub, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")


def facts() -> list[tuple[str, str, str]]:
    found = []
    for crd in crds.crds():
        kind = crd["spec"]["names"]["kind"]
        for path, node in walk(crds.open_api_schema(crd)):
            found.extend((kind, path, fact) for fact in WALKED if fact in node)
    return found


FACTS = facts()


def concrete(path: str) -> str:
    """The field as a SpecError names it: the first entry of each list."""
    return path.replace("[]", "[0]")


def _parent(body: dict[str, Any], path: str) -> tuple[Any, str | int]:
    *parts, last = path.split(".")
    node: Any = body
    for part in parts:
        name = part.removesuffix("[]")
        node = node.setdefault(name, {})
        if part.endswith("[]"):
            assert node, f"MINIMAL needs an entry in {part} to reach {path}"
            node = node[0]
    if last.endswith("[]"):
        name = last.removesuffix("[]")
        assert node.get(name), f"MINIMAL needs an entry in {last} to reach {path}"
        return node[name], 0
    return node, last


def with_value(kind: str, path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(MINIMAL[kind])
    parent, key = _parent(body, path)
    parent[key] = value
    return body


def without(kind: str, path: str) -> dict[str, Any]:
    body = copy.deepcopy(MINIMAL[kind])
    parent, key = _parent(body, path)
    if isinstance(parent, dict):
        parent.pop(key, None)
    else:
        del parent[key]
    return body


def outcome(kind: str, body: Mapping[str, Any]) -> object:
    try:
        return READERS[kind](body)
    except SpecError as e:
        return ("refused", e.field, e.message)


def refusal(kind: str, body: Mapping[str, Any]) -> SpecError | None:
    try:
        READERS[kind](body)
    except SpecError as e:
        return e
    return None


def node_of(kind: str, path: str) -> Mapping[str, Any]:
    return crds.spec_field(kind, path)


def test_every_minimal_resource_is_accepted_and_valid() -> None:
    from odradek_operator.model import openapi

    for kind, body in MINIMAL.items():
        assert openapi.errors(body) == [], kind
        READERS[kind](body)


def test_the_walk_finds_the_facts_the_operator_reads() -> None:
    assert ("OdradekCluster", "spec.brokers.replicas", "maximum") in FACTS
    assert ("OdradekCluster", "spec.zookeeper.image", "default") in FACTS
    assert ("OdradekUser", "spec.authorization.acls[].resource.patternType", "default") in FACTS
    assert set(CRD_ONLY) <= set(FACTS), "CRD_ONLY names a fact no CRD states any more"


@pytest.mark.parametrize(("kind", "path", "fact"), FACTS, ids=[":".join(f) for f in FACTS])
def test_the_operator_applies_the_crds_fact(kind: str, path: str, fact: str) -> None:
    node = node_of(kind, path)
    where = concrete(path)
    if (kind, path, fact) in CRD_ONLY:
        check = _CHECKS[fact]
        with pytest.raises(AssertionError):
            check(kind, path, node, where)
        return
    _CHECKS[fact](kind, path, node, where)


def _default(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    absent = outcome(kind, without(kind, path))
    assert absent == outcome(kind, with_value(kind, path, node["default"])), (
        f"{where}: absent is read as something else than the CRD's default {node['default']!r}"
    )
    assert not isinstance(absent, tuple), f"{where}: MINIMAL without it is refused: {absent}"


def _out_of_range(kind: str, path: str, node: Mapping[str, Any], where: str, value: Any) -> None:
    error = refusal(kind, with_value(kind, path, value))
    assert error is not None, f"{where}: {value} is accepted, the CRD refuses it"
    assert error.field == where, f"{where}: {value} is refused at {error.field}: {error.message}"
    for bound in ("minimum", "maximum"):
        if bound in node:
            assert str(node[bound]) in error.message, f"{where}: {error.message}"


def _in_range(kind: str, path: str, where: str, value: Any) -> None:
    error = refusal(kind, with_value(kind, path, value))
    out_of_range = error is not None and error.field == where and "range" in error.message
    assert not out_of_range, f"{where}: {value} is the CRD's bound, the operator refuses it"


def _minimum(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    _out_of_range(kind, path, node, where, node["minimum"] - 1)
    _in_range(kind, path, where, node["minimum"])


def _maximum(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    _out_of_range(kind, path, node, where, node["maximum"] + 1)
    _in_range(kind, path, where, node["maximum"])


def _enum(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    choices = node["enum"]
    other, contexts = DEPENDS_ON.get((kind, path), (None, [None]))
    for choice in choices:
        errors = []
        for context in contexts:
            body = with_value(kind, path, choice)
            if other is not None:
                parent, key = _parent(body, other)
                parent[key] = context
            errors.append(refusal(kind, body))
        assert any(e is None or e.field != where for e in errors), (
            f"{where}: {choice!r} is the CRD's, the operator refuses it: {errors}"
        )
    if all(isinstance(c, int) for c in choices):
        stranger: Any = next(i for i in range(min(choices), max(choices)) if i not in choices)
    else:
        stranger = "not-one-of-them"
    error = refusal(kind, with_value(kind, path, stranger))
    assert error is not None and error.field == where, f"{where}: {stranger!r} is accepted"


def _items(kind: str, path: str, count: int) -> dict[str, Any]:
    body = copy.deepcopy(MINIMAL[kind])
    parent, key = _parent(body, path)
    first = parent.get(key) or [None]
    parent[key] = [copy.deepcopy(first[0]) for _ in range(count)]
    return body


def _max_items(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    error = refusal(kind, _items(kind, path, node["maxItems"] + 1))
    assert error is not None, f"{where}: {node['maxItems'] + 1} entries are accepted"
    assert error.field == where and str(node["maxItems"]) in error.message, (
        f"{where}: refused at {error.field}: {error.message}"
    )


def _min_items(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    error = refusal(kind, _items(kind, path, node["minItems"] - 1))
    assert error is not None, f"{where}: {node['minItems'] - 1} entries are accepted"
    assert error.field == where, f"{where}: refused at {error.field}: {error.message}"


def _max_length(kind: str, path: str, node: Mapping[str, Any], where: str) -> None:
    error = refusal(kind, with_value(kind, path, "a" * (node["maxLength"] + 1)))
    assert error is not None, f"{where}: {node['maxLength'] + 1} characters are accepted"
    assert error.field == where, f"{where}: refused at {error.field}: {error.message}"


_CHECKS: dict[str, Callable[[str, str, Mapping[str, Any], str], None]] = {
    "default": _default,
    "minimum": _minimum,
    "maximum": _maximum,
    "enum": _enum,
    "maxItems": _max_items,
    "minItems": _min_items,
    "maxLength": _max_length,
}
