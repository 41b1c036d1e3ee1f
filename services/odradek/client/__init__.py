"""A small asyncio Kafka protocol client: what the controller uses to reach brokers, and the CLI
and tests.

``connection.BrokerConnection`` is one TCP connection to one broker: kio request dataclasses in,
kio response dataclasses out, pipelined and matched by correlation id, with a bound on in-flight
requests and a timeout per request. Encoding and decoding are the protocol layer's
(``odradek.protocol.codec``); this package only adds the socket. Its failures are the small tree
in ``errors``.
"""
