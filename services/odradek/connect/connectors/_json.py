"""JSON for values written out as text by the shipped sinks: timestamps, dates and times in
ISO 8601, decimals as strings (exact), bytes in base64; compact separators."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, default=_default, separators=(",", ":"), ensure_ascii=False)


def _default(value: Any) -> Any:
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    raise TypeError(f"{type(value).__name__} is not JSON-able")
