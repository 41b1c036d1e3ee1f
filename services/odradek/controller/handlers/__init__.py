"""What the controller's listener serves: one module per Kafka API, wire types only here.

Each module has ``API_KEY``, ``VERSIONS`` (inclusive), ``async def handle(controller, request)``
and ``error_response(request, error)`` (Kafka's ``getErrorResponse``: the answer that refuses the
whole request). A handler is thin, as the broker's (``broker.handlers``): it decodes the kio
request into domain values, calls one typed ``Controller`` method (which decides it as an event,
in order with the controller's others), and encodes the domain answer, or the API's error
response for a ``Refused`` one. Long lists are read and written in time slices
(``time_slices``) outside the event, so the event itself holds the controller's queue only while
it decides. ``broker_responses`` is the other edge: the brokers' answers to the controller's
requests, decoded before they become events.

``served(controller)`` is the listener's table (``server.ControllerServer``): every module of
this package that defines ``API_KEY`` is registered, so adding an API is adding a module.

Handlers run on the controller's event loop, concurrently with each other (one per request in
flight); they share nothing but the controller.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import TYPE_CHECKING

from odradek.controller.server import Served

if TYPE_CHECKING:
    from odradek.controller.controller import Controller


def served(controller: Controller) -> dict[int, Served]:
    """The controller's listener's APIs: api key -> versions, handler, whole-request refusal."""
    table: dict[int, Served] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        api_key = getattr(module, "API_KEY", None)
        if api_key is None:
            continue
        if api_key in table:
            raise RuntimeError(f"two controller handler modules for api key {api_key}")
        table[int(api_key)] = Served(
            module.VERSIONS, functools.partial(module.handle, controller), module.error_response
        )
    return table
