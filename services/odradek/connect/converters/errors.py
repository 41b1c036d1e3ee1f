"""The one error converters raise (Kafka's DataException, as far as converters are concerned)."""

from __future__ import annotations

from odradek.connect.data import DataError


class ConverterError(DataError):
    """Data a converter cannot convert; the message says what and where."""
