"""Kafka Connect's REST API over a ``Herder`` (aiohttp).

- ``bodies``: request bodies and query parameters checked and typed (pure).
- ``app``: the routes, Kafka's JSON error shape, the request metrics.
- ``forward``: a request a non-leader cannot answer, forwarded to the leader (at most two hops).
- ``server``: the listener (``listeners``, ``rest.advertised.*``).
- ``security``: HTTPS (``listeners.https.*``) and basic authentication (Kafka's
  ``BasicAuthSecurityRestExtension``), read once at the worker's start.
"""

from odradek.connect.rest.app import PluginCatalog, build_app
from odradek.connect.rest.server import RestServer, parse_listener, start_rest_server

__all__ = ["PluginCatalog", "RestServer", "build_app", "parse_listener", "start_rest_server"]
