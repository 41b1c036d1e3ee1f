"""Who a connection is: Kafka principals (``principal``), the mapping from a client
certificate's distinguished name to a user name (``principal_mapping``, Kafka's
``SslPrincipalMapper``), and the TLS contexts of SSL listeners (``tls``).

No authorizer yet: the principal is recorded on each request's context for one to use.
"""
