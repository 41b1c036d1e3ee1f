"""Who a connection is and what it may do.

- Who: Kafka principals (``principal``), the mapping from a client certificate's distinguished
  name to a user name (``principal_mapping``, Kafka's ``SslPrincipalMapper``), SASL (``sasl``,
  ``scram``, ``jaas``) and OAUTHBEARER tokens checked against a JWKS (``oauthbearer``, ``jwks``),
  and the TLS contexts of SSL listeners (``tls``).
- What: ACLs as Kafka models them (``acl``, ``acl_filter``) and the ZooKeeper-backed authorizer
  that decides each request (``acl_authorizer``, Kafka's ``AclAuthorizer``).

The value modules import no configuration; ``tls`` and ``acl_authorizer`` sit a layer higher
(docs/architecture.md).
"""
