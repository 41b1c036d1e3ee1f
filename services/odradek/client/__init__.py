"""A small asyncio Kafka protocol client: what the controller uses to reach brokers, and the CLI
and tests.

``connection.BrokerConnection`` is one TCP connection to one broker: kio request dataclasses in,
kio response dataclasses out, pipelined and matched by correlation id, with a bound on in-flight
requests and a timeout per request. Encoding and decoding are the protocol layer's
(``odradek.protocol.codec``); this package only adds the socket. Its failures are the small tree
in ``errors``.

Above the connection, what every administrative caller shares (the cluster operations in
``odradek.ops``, the operator through them, Connect's distributed workers): ``admin``, the
admin client (``ClusterClient``: any bootstrap broker or a broker by id, versions negotiated,
secured by ``security``), and ``coordinators``, FindCoordinator for a group or a transactional
id. Their failures are ``errors.AdminError``s. Imports nothing of ``odradek.ops``.
"""
