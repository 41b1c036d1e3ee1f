"""The custom resources' ``spec`` as frozen, validated values: read a resource once, here.

``spec.cluster.ClusterSpec.from_resource(body)`` reads an ``OdradekCluster`` (the API's JSON as a
dict) and ``spec.topic.TopicSpec.from_resource(body)`` (also ``topic_state``) an
``OdradekTopic``; OdradekConnect, OdradekConnector (model/connect.py) and OdradekUser
(model/users.py) use the same readers. Defaults are the issue's contract (docs/kubernetes.md);
anything wrong raises ``SpecError(field, message)`` (spec/readers.py), where ``field`` is the
path a user would look at (``spec.brokers.config[min.insync.replicas]``): the operator turns it
into an ``Error`` status condition and does not retry until the spec changes.

Rule: never accept what is not honoured. One source: every bound, default and enum the CRD
states is read from its schema (model/crds.py) through ``readers.crd_*``, never restated; the
operator's own defaults (those the CRD leaves to it, e.g. the listener before
``spec.listeners``) are named where they are used.

Modules, by the part of the resource each reads:

- ``readers``: ``SpecError``, the small readers, the CRD look-ups.
- ``resources``: ``Resources`` and ``Storage`` (core/v1 quantities), default requests.
- ``network``: ``networkPolicyPeers`` (label selectors, CIDRs).
- ``listeners``: ``spec.listeners``, the ports, ``spec.authorization``.
- ``brokers``: ``spec.brokers`` (volumes, rack, broker config).
- ``cluster``: ``ClusterSpec`` (ZooKeeper, controllers, the CAs, and the above).
- ``topic``: ``TopicSpec``.

Immutable, no I/O: any thread may call it.
"""
