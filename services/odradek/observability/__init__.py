"""What an Odradek service tells the outside world about itself, on its admin HTTP port.

- ``metrics``: every Prometheus metric Odradek exports, with its name, help text and labels, and
  the holders (``BrokerMetrics``, ``ControllerMetrics``, ``CommonMetrics``) that services update.
  Pure bookkeeping: no I/O.
- ``admin_server``: the aiohttp server for ``/metrics``, ``/healthz`` and ``/readyz``.

``docs/observability.md`` lists the metrics and endpoints and shows how to scrape them.
"""
